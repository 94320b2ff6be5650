"""The journal of one store: an SQLite file (WAL) under the store's cache folder.

It keeps every node's row, the pending deletes, the uploads in flight and a
little metadata (the feed position, the mount folder memfs made). The file
itself (schema, migrations, a node's row, opening) is memfs/cache/_schema.py.

Files' contents live here too (the `contents` table, one row per cached
file, at most `MAX_CONTENT_BYTES` each), so that no change asks the
filesystem for an inode (creating a file costs some ext4 disks 0.1-0.9 ms).

Commits: a change (one method call, or everything inside `transaction()`) is
one record of the redo log, applied to SQLite later, many at once; reads of
what the records changed apply them first, or (contents, meta values) are
answered from them. How, and what is durable when, is `Commits`
(memfs/cache/_commits.py); what each operation does to SQLite is `APPLY`
(memfs/cache/_records.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from collections.abc import Iterator

from .._exceptions import CacheCorrupt
from .._private import open_private_dir
from ._commits import Commits, RedoDamage
from ._node import ROOT_ID, Node, Tombstone, Upload
from ._records import Op, Operation
from ._redo import RedoLogError
from ._schema import (
    SELECT_NODES,
    node_of,
    open_journal_file,
    row_values,
    row_values_in_place,
)

log = logging.getLogger("memfs.cache")

LOST_PATHS_LOGGED = 20
"""Paths a damaged redo log's warning names (`memfs status --json` has them all)."""
MAX_DEPTH = 512
"""More folders than a path of 1,024 bytes can hold: a deeper chain is a loop."""


_ABOUT_A_NODE = (Op.DELETE_NODE, Op.DROP_CONTENT, Op.UPLOAD_ANSWERED, Op.PUT_CONTENT)
"""Operations whose first argument is the id of the node they change."""


def _path_in(names: dict[int, tuple[int, str]], node_id: int) -> str | None:
    """The path of `node_id` by (parent, name) pairs; None for the root or a
    node whose folders are not all known."""
    parts: list[str] = []
    while node_id != ROOT_ID:
        if node_id not in names or len(parts) > MAX_DEPTH:
            return None
        node_id, name = names[node_id]
        parts.append(name)
    return "/" + "/".join(reversed(parts)) if parts else None


class Journal:
    """The SQLite journal of one store, at `path`, and its redo log beside it.

    Its folder is opened once and checked as memfs's own (0700, the user's, not
    a symlink); the database, its WAL and its redo log are reached relative to
    that descriptor."""

    def __init__(self, path: str, *, store_id: str) -> None:
        self.path = path
        self._checkpointed_changes = 0
        self._names: dict[int, tuple[int, str]] = {}
        """(parent, name) of each row as the journal will hold it, by node id."""
        folder, name = os.path.split(path)
        self.folder_fd = open_private_dir(folder, "cache folder")
        try:
            self._open(name, store_id)
        except BaseException:
            if hasattr(self, "db"):
                self.db.close()
            self._close_folder()
            raise
        self.lost_paths: list[str] = []
        """The files whose changes opening found lost from a damaged redo log."""
        self.damage: str | None = None
        """That sentence, as logged; None when nothing was lost."""
        if self._commits.damage is not None:
            self._report_damage(self._commits.damage)
        self._next_id: int
        with self._commits.applied():
            (self._next_id,) = self.db.execute(
                "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'nodes'), 0), "
                "coalesce((SELECT max(id) FROM nodes), 0)) + 1"
            ).fetchone()
        self._do = self._commits.do
        self.transaction = self._commits.transaction
        """One commit for everything inside (one record of the redo log); nested
        uses join the outer one. An exception inside commits nothing."""
        self.batch = self._commits.batch
        """One SQLite commit for many changes while nothing else uses the journal
        (see `Commits.batch`)."""
        self.in_transaction = self._commits.in_transaction
        self.apply_log = self._commits.apply_when_idle
        """Apply the redo log to SQLite now, unless its disk is known full (see
        `Commits.apply_when_idle`)."""
        self.make_durable = self._commits.make_durable
        """Make every change committed so far durable (one flush of the redo log)."""
        self.note_log_filled = self._commits.note_log_filled
        self.start_writeback = self._commits.start_writeback
        """Start writing unflushed changes to the disk, without waiting (a hint)."""

    def _open(self, name: str, store_id: str) -> None:
        self.db = open_journal_file(self.folder_fd, self.path, store_id=store_id)
        try:
            self._commits = Commits(self.db, self.path, self._names.clear, folder_fd=self.folder_fd)
        except (OSError, sqlite3.Error, RedoLogError) as e:
            raise CacheCorrupt(f"cannot open the cache at {os.path.dirname(self.path)}: {e}") from e

    @property
    def disk_full(self) -> bool:
        """SQLite's disk is full: the redo log holds what it could not take, and
        changes to the files are refused (see memfs/cache/_commits.py)."""
        return self._commits.disk_full

    @property
    def disk_full_reason(self) -> str | None:
        """Why changes are refused, as a sentence; None when they are not."""
        return self._commits.full_reason if self._commits.disk_full else None

    def _report_damage(self, damage: RedoDamage) -> None:
        """Name what a damaged redo log lost (the files its remaining records
        name), log it once, and keep it for `memfs status`."""
        self.lost_paths = self._paths_of(damage.lost)
        folder = os.path.dirname(self.path)
        if self.lost_paths:
            shown = ", ".join(self.lost_paths[:LOST_PATHS_LOGGED])
            more = len(self.lost_paths) - LOST_PATHS_LOGGED
            if more > 0:
                shown += f" and {more} more"
            what = (
                f"the changes it held to {shown} are lost; "
                "those files show their state from before them"
            )
        else:
            what = (
                "changes written before memfs stopped may be lost "
                "(the records left do not say to which files)"
            )
        self.damage = f"the redo log of the cache at {folder} is damaged ({damage.reason}): {what}"
        log.warning(
            "the redo log of the cache at %s is damaged (%s): %s",
            folder,
            damage.reason,
            what,
            extra={"event": "redo_log_damaged"},
        )

    def _paths_of(self, ops: list[Operation]) -> list[str]:
        """The paths the operations of lost records are about: their files as
        the journal holds them now (or as the lost records named them, for a
        file they made or moved), and the paths of deletes and uploads."""
        with self._commits.applied():
            rows = self.db.execute("SELECT id, parent, name FROM nodes").fetchall()
        names = {row[0]: (row[1], row[2]) for row in rows}
        touched: list[int] = []
        paths: set[str] = set()
        for op in ops:
            code = op[0]
            if code is Op.INSERT_NODE:
                names[op[1]] = (op[2], op[3])
                touched.append(op[1])
            elif code is Op.SAVE_NODE:
                names[op[-1]] = (op[1], op[2])
                touched.append(op[-1])
            elif code is Op.SAVE_NODE_IN_PLACE:
                touched.append(op[-1])
            elif code is Op.WRITTEN:
                touched.append(op[4])
            elif code in _ABOUT_A_NODE:
                touched.append(op[1])
            elif code is Op.DROP_CONTENTS:
                touched += op[1]
            elif code is Op.RECORD_UPLOAD:
                paths.add(op[3])
            elif code is Op.ADD_TOMBSTONE:
                paths.add(op[2])
        for node_id in touched:
            path = _path_in(names, node_id)
            if path is not None:
                paths.add(path)
        return sorted(paths)

    @property
    def commits(self) -> int:
        """Commits since the journal opened: records logged, statements of a batch."""
        return self._commits.count

    def close(self) -> None:
        self._commits.close()
        with contextlib.suppress(sqlite3.Error):
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self.db.close()
        self._close_folder()

    def abandon(self) -> None:
        """Close as a SIGKILL would: nothing applied, flushed or checkpointed."""
        self._commits.abandon()
        self.db.close()
        self._close_folder()

    def _close_folder(self) -> None:
        if self.folder_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.folder_fd)
            self.folder_fd = -1

    @property
    def unsaved_commits(self) -> bool:
        """Something was committed to SQLite since the last `checkpoint`."""
        return self.db.total_changes != self._checkpointed_changes

    def checkpoint(self) -> None:
        """Copy the WAL into the database now (while the filesystem is idle), so
        that no request pays for it; the WAL keeps its size. Not while the disk
        is full: the database may need to grow."""
        if self.disk_full:
            return
        self.db.execute("PRAGMA wal_checkpoint(PASSIVE)")
        self._checkpointed_changes = self.db.total_changes

    # --------------------------------------------------------------- nodes

    def nodes(self) -> Iterator[Node]:
        with self._commits.applied():
            rows = self.db.execute(SELECT_NODES).fetchall()
        for row in rows:
            node = node_of(row)
            self._names[node.id] = (node.parent, node.name)
            yield node

    def insert(self, node: Node) -> int:
        """Insert a new node's row; returns its id (ids are never reused)."""
        node_id = self._next_id
        self._do((Op.INSERT_NODE, node_id, *row_values(node)))
        self._next_id += 1
        self._names[node_id] = (node.parent, node.name)
        return node_id

    def save(self, node: Node) -> None:
        """Write a node's row (leaving its name's index entry alone when the name
        is the one the row holds)."""
        name = (node.parent, node.name)
        if self._names.get(node.id) == name:
            self._do((Op.SAVE_NODE_IN_PLACE, *row_values_in_place(node)))
        else:
            self._do((Op.SAVE_NODE, *row_values(node), node.id))
            self._names[node.id] = name

    def delete(self, node_id: int) -> None:
        self._do((Op.DELETE_NODE, node_id))
        self._names.pop(node_id, None)

    # ---------------------------------------------------------- tombstones

    def tombstones(self) -> Iterator[Tombstone]:
        with self._commits.applied():
            rows = self.db.execute(
                "SELECT memory_id, path, base_sha, deleted_at FROM tombstones"
            ).fetchall()
        for row in rows:
            yield Tombstone(*row)

    def add_tombstone(self, stone: Tombstone) -> None:
        self._do((Op.ADD_TOMBSTONE, stone.memory_id, stone.path, stone.base_sha, stone.deleted_at))

    def drop_tombstone(self, memory_id: str) -> None:
        self._do((Op.DROP_TOMBSTONE, memory_id))

    # ------------------------------------------------------------- uploads

    def record_upload(self, upload: Upload) -> None:
        self._do((Op.RECORD_UPLOAD, upload.node_id, upload.memory_id, upload.path, upload.sha))

    def upload_answered(self, node_id: int) -> None:
        self._do((Op.UPLOAD_ANSWERED, node_id))

    def uploads(self) -> list[Upload]:
        with self._commits.applied():
            rows = self.db.execute("SELECT node_id, memory_id, path, sha FROM uploads").fetchall()
        return [Upload(*row) for row in rows]

    # ------------------------------------------------------------ contents

    def content(self, node_id: int) -> bytes | None:
        """A file's content, or None when it has no row (a cached file without one
        is empty: a new file gets its row at its first write)."""
        logged, content = self._commits.logged_content(node_id)
        if logged:
            return content
        row = self.db.execute("SELECT data FROM contents WHERE node_id = ?", (node_id,)).fetchone()
        return None if row is None else bytes(row[0])

    def content_sizes(self) -> dict[int, int]:
        """The size of every cached content, by node id."""
        with self._commits.applied():
            return dict(self.db.execute("SELECT node_id, length(data) FROM contents"))

    def put_content(self, node_id: int, data: bytes | bytearray) -> None:
        """A file's whole content; inside a transaction, `data` is written at its
        end, so the caller leaves it as it is until then."""
        self._do((Op.PUT_CONTENT, node_id, data))

    def put_written(self, node_id: int, data: bytes | bytearray, mtime_ns: int) -> None:
        """A file's whole content, changed at `mtime_ns` (its change time too), with
        its size: one commit (see `put_content` inside a transaction)."""
        self._do(
            (Op.PUT_CONTENT, node_id, data), (Op.WRITTEN, len(data), mtime_ns, mtime_ns, node_id)
        )

    def drop_content(self, node_id: int) -> None:
        self._do((Op.DROP_CONTENT, node_id))

    def drop_contents(self, node_ids: list[int]) -> None:
        self._do((Op.DROP_CONTENTS, list(node_ids)))

    def drop_stray_contents(self) -> int:
        """Delete contents no node owns; returns how many went (none while the
        disk is full: the next open's sweep takes them)."""
        self.apply_log()
        if self.disk_full:
            return 0
        try:
            return self.db.execute(
                "DELETE FROM contents WHERE node_id NOT IN (SELECT id FROM nodes)"
            ).rowcount
        except sqlite3.Error as e:
            if e.sqlite_errorcode != sqlite3.SQLITE_FULL:
                raise
            return 0

    # -------------------------------------------------------------- synced

    def synced(self) -> list[tuple[int, str, bytes]]:
        """The copies fsync left in caches made before contents lived here:
        (node id, boot id, content)."""
        with self._commits.applied():
            rows = self.db.execute("SELECT node_id, boot_id, content FROM synced").fetchall()
        return [(r[0], r[1], bytes(r[2])) for r in rows]

    def clear_synced(self) -> None:
        self._do((Op.CLEAR_SYNCED,))

    # ---------------------------------------------------------------- meta

    def get_meta(self, key: str) -> str | None:
        return self._commits.logged_meta(key)

    def set_meta(self, key: str, value: str | None) -> None:
        self._do((Op.SET_META, key, value))
