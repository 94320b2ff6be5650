"""The journal of one store: its rows in SQLite (WAL), each change one
transaction; its contents as files.

It keeps every node's row, the pending deletes, the uploads in flight and a
little metadata in an SQLite file (memfs/cache/_schema.py), and each cached
content as a file of its own (memfs/cache/_files.py). A change (one method
call, or everything inside `transaction()`) is one SQLite commit: in WAL mode
with synchronous=NORMAL it reaches the WAL through write(2) before the call
returns, so a SIGKILL of memfs cannot undo it.

`make_durable(node)`, for `fsync()`, is one flush: the file's whole content
goes into the table `durable` in a transaction committed with
synchronous=FULL, which flushes the WAL and so every commit before it too.
A `durable` row is kept only while the content file holds exactly its bytes:
the first change to the content after it (a write, a truncate, a content the
store sent, its removal) first flushes the content file and deletes the row
(`_unpin`). Opening writes each row left back into its content file (what a
power cut lost of it), flushes them and deletes the rows; while the
filesystem is idle (`when_idle`) the content files are flushed and the rows
deleted, with nothing to write back.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from typing import Any, NamedTuple

from .._exceptions import CacheCorrupt
from .._private import open_private_dir
from ._disk_space import DiskSpace
from ._files import ContentFiles
from ._node import Node, Tombstone, Upload
from ._schema import (
    INSERT_NODE,
    SELECT_NODES,
    UPDATE_NODE,
    UPDATE_NODE_IN_PLACE,
    node_of,
    open_journal_file,
    row_values,
    row_values_in_place,
)


class Undo(NamedTuple):
    """How a content file is put back when its change fails: these bytes at
    this offset, then this size."""

    offset: int
    data: bytes
    size: int


class Journal:
    """The journal of one store, at `path`, with its content files beside it.

    Its folder is opened once and checked as memfs's own (0700, the user's, not
    a symlink); the database, its WAL and the content files are reached
    relative to that descriptor."""

    def __init__(self, path: str, *, store_id: str) -> None:
        self.path = path
        self.lost_paths: list[str] = []
        """The files whose changes opening found lost (none: SQLite and the
        content files lose nothing a kill leaves)."""
        self.damage: str | None = None
        """Why changes were lost, as a sentence; None when nothing was."""
        self._rows_known = 1
        """Nodes whose `Live.row_known` is this know their row's name (`save`);
        it grows when a transaction is rolled back."""
        self._wal_fd: int | None = None
        self._durable_changes = -1
        self._durable: set[int] = set()
        """Ids of the files that have a `durable` row."""
        folder = os.path.dirname(path)
        self.folder_fd = open_private_dir(folder, "cache folder")
        try:
            self._space = DiskSpace(folder, self.folder_fd)
            self.db = open_journal_file(self.folder_fd, path, store_id=store_id)
        except BaseException:
            self._close_folder()
            raise
        try:
            self.files = ContentFiles(self.folder_fd, folder, self._space)
        except BaseException:
            self.db.close()
            self._close_folder()
            raise
        self._checkpointed_changes = self.db.total_changes
        try:
            self._next_id = self._next_node_id()
            self._restore_durable()
        except BaseException as e:
            self.abandon()
            if isinstance(e, OSError | sqlite3.Error):
                raise CacheCorrupt(f"cannot open the cache at {folder}: {e}") from e
            raise

    @property
    def commits(self) -> int:
        """Rows changed since the journal opened (it changes whenever anything is
        committed)."""
        return self.db.total_changes

    @property
    def committed(self) -> int:
        """A count of changes committed: it changes whenever anything is."""
        return self.db.total_changes

    # -------------------------------------------------------------- commits

    def _run(self, sql: str, params: Any = ()) -> None:
        if self.db.in_transaction:  # a failed statement may have ended it: not done again
            with self._space.as_cache_disk_full():
                self.db.execute(sql, params)
        else:
            self._space.run(self.db.execute, sql, params)

    def transaction(self) -> contextlib.AbstractContextManager[None]:
        """One commit for everything inside; nested uses join the outer one. An
        exception inside commits nothing."""
        return self._grouped(keep=False)

    def batch(self) -> contextlib.AbstractContextManager[None]:
        """One commit for many changes made while nothing else runs: unlike
        `transaction`, what ran is committed even when an exception ends the
        batch, since memory already holds it."""
        return self._grouped(keep=True)

    def in_transaction(self) -> bool:
        return self.db.in_transaction

    @contextlib.contextmanager
    def _grouped(self, *, keep: bool) -> Iterator[None]:
        if self.db.in_transaction:
            yield
            return
        self._run("BEGIN")
        try:
            yield
        except BaseException:
            if keep:
                self._commit()
            else:
                self._rolled_back()
            raise
        self._commit()

    def _commit(self) -> None:
        if not _in_transaction(self.db):
            return
        try:
            with self._space.as_cache_disk_full():
                self.db.execute("COMMIT")
        except BaseException:
            self._rolled_back()
            raise

    def _rolled_back(self) -> None:
        """What the rows were assumed to hold is unknown again."""
        if _in_transaction(self.db):  # a failed statement may have ended it
            self.db.execute("ROLLBACK")
        self._rows_known += 1
        self._durable = {r[0] for r in self.db.execute("SELECT node_id FROM durable")}

    # ----------------------------------------------------------- durability

    def make_durable(self, node: Node | None = None, content: bytes = b"") -> None:
        """Make every commit so far durable, and `node`'s row and `content` (see
        the module): one flush of the WAL (none when nothing was committed since
        the last and no node is given)."""
        if node is None:
            self._flush_wal()
            return
        if node.id in self._durable and self.db.total_changes == self._durable_changes:
            return  # nothing changed since its last fsync
        with self._space.as_cache_disk_full():
            self.db.execute("PRAGMA synchronous=FULL")
            try:
                self._commit_durable(node, content)
            finally:
                self.db.execute("PRAGMA synchronous=NORMAL")
        self._durable.add(node.id)
        self._durable_changes = self.db.total_changes

    def _commit_durable(self, node: Node, content: bytes) -> None:
        self.db.execute("BEGIN")
        try:
            self.save(node)
            self.db.execute(
                "INSERT OR REPLACE INTO durable (node_id, content, mtime_ns) VALUES (?, ?, ?)",
                (node.id, content, node.mtime_ns),
            )
            self.db.execute("COMMIT")
        except BaseException:
            self._rolled_back()
            raise

    def _flush_wal(self) -> None:
        changes = self.db.total_changes
        if changes == self._durable_changes:
            return
        if self._wal_fd is None:
            flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW
            try:
                self._wal_fd = os.open(
                    os.path.basename(self.path) + "-wal", flags, dir_fd=self.folder_fd
                )
            except FileNotFoundError:
                return  # nothing was ever written to a WAL: nothing to flush
        with self._space.as_cache_disk_full():
            os.fdatasync(self._wal_fd)
        self._durable_changes = changes

    def flush_all(self) -> None:
        """Make every content file and every commit durable (`fsync(None)`)."""
        with self._space.as_cache_disk_full():
            self.files.flush()
        self._flush_wal()

    def _unpin(self, node_id: int) -> None:
        """Before a content with a `durable` row changes: its file is flushed,
        then the row goes (see the module)."""
        if node_id not in self._durable:
            return
        with self._space.as_cache_disk_full():
            self.files.sync_one(node_id)
        self._run("DELETE FROM durable WHERE node_id = ?", (node_id,))
        self._durable.discard(node_id)

    def _restore_durable(self) -> None:
        """Write the `durable` rows a stop left back into their content files
        where they differ, flush them all, and delete the rows."""
        rows = self.db.execute("SELECT node_id, content, mtime_ns FROM durable").fetchall()
        if not rows:
            return
        for node_id, content, mtime_ns in rows:
            if self.files.read(node_id) != content:
                self.files.patch(node_id, 0, content, len(content), exact=True, mtime_ns=mtime_ns)
        self.files.changed({row[0] for row in rows})
        self.files.flush()
        self.db.execute("DELETE FROM durable")

    def when_idle(self) -> None:
        """While the filesystem is idle: flush the content files changed (those
        with `durable` rows among them) and delete those rows; once the rows are
        durable, unlink the contents let go; then copy the WAL into the
        database. Not on a full disk (see `look_for_room`)."""
        space = self._space
        if space.full:
            return
        with space.as_cache_disk_full():
            if self.files.unflushed or self._durable:
                self.files.changed(self._durable)
                self.files.flush()
                if self._durable:
                    self._run("DELETE FROM durable")
                    self._durable.clear()
            if self.files.dropping:
                self._flush_wal()
                self.files.remove_dropped()
            if self.db.total_changes != self._checkpointed_changes:
                self.db.execute("PRAGMA wal_checkpoint(PASSIVE)")
                self._checkpointed_changes = self.db.total_changes

    def look_for_room(self) -> None:
        """While the disk is full: take changes again once it has room."""
        self._space.look_for_room()

    @property
    def disk_full(self) -> bool:
        """The cache's disk is full: changes to the files are refused (see
        memfs/cache/_disk_space.py)."""
        return self._space.full

    @property
    def disk_full_reason(self) -> str | None:
        """Why changes are refused, as a sentence; None when they are not."""
        return self._space.reason if self._space.full else None

    def close(self) -> None:
        """Flush and checkpoint what is left (errors say nothing: the next open
        finds the WAL and the `durable` rows)."""
        with contextlib.suppress(sqlite3.Error, OSError):
            if not self._space.full:
                self.files.changed(self._durable)
                self.files.flush()
                if self._durable:
                    self.db.execute("DELETE FROM durable")
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self.files.remove_dropped()
        self.abandon()

    def abandon(self) -> None:
        """Close as a SIGKILL would: nothing flushed or checkpointed."""
        self.db.close()
        if self._wal_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._wal_fd)
            self._wal_fd = None
        if hasattr(self, "files"):
            self.files.close()
        self._close_folder()

    def _close_folder(self) -> None:
        if self.folder_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.folder_fd)
            self.folder_fd = -1

    # ---------------------------------------------------------------- nodes

    def nodes(self) -> Iterator[Node]:
        for row in self.db.execute(SELECT_NODES).fetchall():
            node = node_of(row)
            _note_row_name(node, self._rows_known)
            yield node

    def _next_node_id(self) -> int:
        """The id after every one given out (ids are never reused)."""
        (next_id,) = self.db.execute(
            "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'nodes'), 0), "
            "coalesce((SELECT max(id) FROM nodes), 0)) + 1"
        ).fetchone()
        return int(next_id)

    def insert(self, node: Node) -> int:
        """Insert a new node's row; returns its id (ids are never reused)."""
        node_id = self._next_id
        self._run(INSERT_NODE, (node_id, *row_values(node)))
        self._next_id += 1
        _note_row_name(node, self._rows_known)
        return node_id

    def save(self, node: Node) -> None:
        """Write a node's row (leaving its name's index entry alone when the name
        is the one the row holds)."""
        if _row_named_as(node, self._rows_known):
            self._run(UPDATE_NODE_IN_PLACE, row_values_in_place(node))
        else:
            self._run(UPDATE_NODE, (*row_values(node), node.id))
            _note_row_name(node, self._rows_known)

    def delete(self, node_id: int) -> None:
        self._run("DELETE FROM nodes WHERE id = ?", (node_id,))

    # ----------------------------------------------------------- tombstones

    def tombstones(self) -> Iterator[Tombstone]:
        rows = self.db.execute(
            "SELECT memory_id, path, base_sha, deleted_at FROM tombstones"
        ).fetchall()
        for row in rows:
            yield Tombstone(*row)

    def add_tombstone(self, stone: Tombstone) -> None:
        self._run(
            "INSERT OR REPLACE INTO tombstones (memory_id, path, base_sha, deleted_at) "
            "VALUES (?, ?, ?, ?)",
            (stone.memory_id, stone.path, stone.base_sha, stone.deleted_at),
        )

    def drop_tombstone(self, memory_id: str) -> None:
        self._run("DELETE FROM tombstones WHERE memory_id = ?", (memory_id,))

    # -------------------------------------------------------------- uploads

    def record_upload(self, upload: Upload) -> None:
        self._run(
            "INSERT OR REPLACE INTO uploads (node_id, memory_id, path, sha) VALUES (?, ?, ?, ?)",
            (upload.node_id, upload.memory_id, upload.path, upload.sha),
        )

    def upload_answered(self, node_id: int) -> None:
        self._run("DELETE FROM uploads WHERE node_id = ?", (node_id,))

    def uploads(self) -> list[Upload]:
        rows = self.db.execute("SELECT node_id, memory_id, path, sha FROM uploads").fetchall()
        return [Upload(*row) for row in rows]

    # ------------------------------------------------------------- contents

    def content(self, node_id: int) -> bytes | None:
        """A file's content, or None when it has no file (a cached file without one
        is empty: a new file gets its file at its first write)."""
        with self._space.as_cache_disk_full():
            return self.files.read(node_id)

    def content_size(self, node_id: int) -> int | None:
        return self.files.size(node_id)

    def content_mtime(self, node_id: int) -> int | None:
        """A content file's modification time (an edited file's last write)."""
        try:
            st = os.stat(str(node_id), dir_fd=self.files.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        return st.st_mtime_ns

    def content_sizes(self) -> dict[int, int]:
        """The size of every content file kept, by node id."""
        sizes = {}
        for name in os.listdir(self.files.fd):
            if name.isdigit():
                size = self.files.size(int(name))
                if size is not None:
                    sizes[int(name)] = size
        return sizes

    def put_content(self, node_id: int, data: bytes | bytearray) -> None:
        """A file's whole content, written now (a rename: a kill leaves the old
        or the new one)."""
        self._unpin(node_id)
        self.files.put(node_id, data)

    def write(
        self, node_id: int, offset: int, data: bytes, size: int, mtime_ns: int, undo: Undo
    ) -> None:
        """A write of `data` at `offset`, leaving the content `size` bytes long,
        changed at `mtime_ns`: the bytes go to the content file, stamped with
        that time. When it fails, the file is put back as `undo` says."""
        self._patch_file(node_id, offset, data, size, mtime_ns, undo)

    def truncate(self, node_id: int, size: int, mtime_ns: int, undo: Undo) -> None:
        """A content cut or grown to `size` bytes, as `write` does."""
        self._patch_file(node_id, size, b"", size, mtime_ns, undo)

    def _patch_file(
        self, node_id: int, offset: int, data: bytes, size: int, mtime_ns: int, undo: Undo
    ) -> None:
        self._unpin(node_id)
        try:
            self.files.patch(node_id, offset, data, size, exact=not data, mtime_ns=mtime_ns)
        except BaseException:
            with contextlib.suppress(OSError, CacheCorrupt):
                self.files.patch(node_id, undo.offset, undo.data, undo.size, exact=True)
            raise

    def drop_content(self, node_id: int) -> None:
        """The content goes (its file once the rows saying so are durable)."""
        if node_id in self._durable:
            self._run("DELETE FROM durable WHERE node_id = ?", (node_id,))
            self._durable.discard(node_id)
        self.files.drop_later(node_id)

    def sweep_contents(self, keep: set[int]) -> None:
        """Take away the content files of every node but those in `keep`."""
        self.files.sweep(keep)

    # ----------------------------------------------------------------- meta

    def get_meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str | None) -> None:
        """Keep a meta value; an unchanged one commits nothing."""
        if self.get_meta(key) != value:
            self._run("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))


def _in_transaction(db: sqlite3.Connection) -> bool:
    """Asked anew each time: a statement may have ended the transaction."""
    return db.in_transaction


def _note_row_name(node: Node, known: int) -> None:
    """The journal's row of `node` holds its parent and name (`Live.row_known`)."""
    live = node.live
    live.row_parent, live.row_name, live.row_known = node.parent, node.name, known


def _row_named_as(node: Node, known: int) -> bool:
    """Whether the journal's row of `node` holds its parent and name."""
    live = node.live
    return live.row_known == known and live.row_parent == node.parent and live.row_name == node.name
