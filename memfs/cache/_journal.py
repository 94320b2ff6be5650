"""The journal of one store: its rows in SQLite (WAL), its contents as files
(memfs/cache/_files.py).

A change (one method call, or everything inside `transaction()`) is one
SQLite commit, which with synchronous=NORMAL reaches the WAL through
write(2) before the call returns: a SIGKILL cannot undo it. The WAL is
checkpointed while the filesystem is idle (`when_idle`), not by a change.

`make_durable(node)`, for `fsync()`, is one flush: the file's content and row
go into the table `durable` in a commit with synchronous=FULL, which flushes
the WAL and so every commit before it. A `durable` row is kept only while the
content file holds exactly its bytes: a change to that content first flushes
the file and deletes the row (`_unpin`). Opening writes the rows left back
into their files (what a power cut lost), flushes them and deletes the rows;
so does the idle pass, with nothing to write back.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from typing import Any

from .._exceptions import CacheCorrupt, CacheDiskFull
from .._private import open_private_dir
from ._disk_space import DiskSpace
from ._files import ContentFiles
from ._node import FIRST_NODE_ID, Node, Tombstone, Upload
from ._schema import (
    INSERT_NODE,
    SELECT_NODES,
    UPDATE_NODE,
    node_of,
    open_journal_file,
    row_values,
)

ID_BLOCK = 1024
"""Ids given out between two writes of the meta `ids_kept`."""

Undo = tuple[int, bytes, int]
"""How a content file is put back when its change fails: these bytes at this
offset, then this size."""


class Journal:
    """The journal of one store, at `path`, its content files beside it. Its
    folder is opened once and checked as memfs's own; the database, its WAL
    and the content files are reached relative to that descriptor."""

    def __init__(self, path: str, *, store_id: str) -> None:
        self.path = path
        self.lost_paths: list[str] = []
        self.damage: str | None = None
        """What opening found lost (nothing: a kill leaves no damage to name)."""
        self._wal_fd: int | None = None
        self._durable_changes = -1
        self._durable: set[int] = set()
        """Ids of the files that have a `durable` row."""
        folder = os.path.dirname(path)
        self.folder_fd = open_private_dir(folder, "cache folder")
        try:
            self._space = DiskSpace(folder, self.folder_fd)
            self.db = open_journal_file(self.folder_fd, path, store_id=store_id)
            self._checkpointed = self.db.total_changes
        except BaseException:
            os.close(self.folder_fd)
            raise
        try:
            self.files = ContentFiles(self.folder_fd, folder, self._space)
            highest = int(self.db.execute("SELECT max(id) FROM nodes").fetchone()[0])
            self._ids_kept = int(self.get_meta("ids_kept") or FIRST_NODE_ID)
            self._next_id = max(self._ids_kept, highest + 1)
            self._restore_durable()
        except BaseException as e:
            self.abandon()
            if isinstance(e, OSError | sqlite3.Error):
                raise CacheCorrupt(f"cannot open the cache at {folder}: {e}") from e
            raise

    @property
    def committed(self) -> int:
        """A count of rows changed: it changes whenever anything is committed."""
        return self.db.total_changes

    # -------------------------------------------------------------- commits

    def _run(self, sql: str, params: Any = ()) -> None:
        # Inside a transaction a failed statement may have ended it: not done again.
        self._space.run(self.db.execute, sql, params, again=not self.db.in_transaction)

    def transaction(self) -> contextlib.AbstractContextManager[None]:
        """One commit for everything inside; nested uses join the outer one. An
        exception inside commits nothing."""
        return self._grouped(keep=False)

    def batch(self) -> contextlib.AbstractContextManager[None]:
        """One commit for many changes made while nothing else runs: unlike
        `transaction`, what ran is committed even when an exception ends the
        batch, since memory already holds it."""
        return self._grouped(keep=True)

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
        if not self.db.in_transaction:
            return
        try:
            with self._space.as_cache_disk_full():
                self.db.execute("COMMIT")
        except BaseException:
            self._rolled_back()
            raise

    def _rolled_back(self) -> None:
        """What the rows were assumed to hold is unknown again."""
        if self.db.in_transaction:  # a failed statement may have ended it
            self.db.execute("ROLLBACK")
        self._ids_kept = int(self.get_meta("ids_kept") or FIRST_NODE_ID)
        self._durable = {r[0] for r in self.db.execute("SELECT node_id FROM durable")}

    # ----------------------------------------------------------- durability

    def make_durable(self, node: Node | None = None, content: bytes = b"") -> None:
        """Make every commit so far durable, and `node`'s row and `content` (see
        the module): one flush of the WAL (none when nothing changed since)."""
        if node is None:
            self._flush_wal()
            return
        if node.id in self._durable and self.db.total_changes == self._durable_changes:
            return
        with self._space.as_cache_disk_full():
            self.db.execute("PRAGMA synchronous=FULL")
            try:
                with self.transaction():
                    self.save(node)
                    self._run(
                        "INSERT OR REPLACE INTO durable (node_id, content, mtime_ns) "
                        "VALUES (?, ?, ?)",
                        (node.id, content, node.mtime_ns),
                    )
            finally:
                self.db.execute("PRAGMA synchronous=NORMAL")
        self._durable.add(node.id)
        self._durable_changes = self.db.total_changes

    def _flush_wal(self) -> None:
        if self.db.total_changes == self._durable_changes:
            return
        if self._wal_fd is None:
            flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW
            try:
                name = os.path.basename(self.path) + "-wal"
                self._wal_fd = os.open(name, flags, dir_fd=self.folder_fd)
            except FileNotFoundError:
                return  # nothing was ever written to a WAL: nothing to flush
        with self._space.as_cache_disk_full():
            os.fdatasync(self._wal_fd)
        self._durable_changes = self.db.total_changes

    def flush_all(self) -> None:
        """Make every content file and every commit durable (`fsync(None)`)."""
        with self._space.as_cache_disk_full():
            self.files.flush()
        self._flush_wal()

    def _unpin(self, node_id: int) -> None:
        """Before a content with a `durable` row changes: its file is flushed,
        then the row goes (see the module)."""
        if node_id in self._durable:
            with self._space.as_cache_disk_full():
                self.files.sync_one(node_id)
            self._run("DELETE FROM durable WHERE node_id = ?", (node_id,))
            self._durable.discard(node_id)

    def _restore_durable(self) -> None:
        """Write the `durable` rows a stop left back into their content files
        where they differ, flush them all, and delete the rows."""
        rows = self.db.execute("SELECT node_id, content, mtime_ns FROM durable").fetchall()
        self._durable = {row[0] for row in rows}
        with contextlib.suppress(CacheDiskFull):  # the rows stay, for the idle pass
            for node_id, content, mtime_ns in rows:
                if self.files.read(node_id) != content:
                    self.files.patch(
                        node_id, 0, content, len(content), exact=True, mtime_ns=mtime_ns
                    )
            if rows:
                self._flush_durable()

    def _flush_durable(self) -> None:
        """Flush the content files changed (and those of `durable` rows), then
        delete the rows."""
        self.files.changed(self._durable)
        self.files.flush()
        if self._durable:
            self._run("DELETE FROM durable")
            self._durable.clear()

    def when_idle(self) -> None:
        """While the filesystem is idle: flush the content files changed and
        delete the `durable` rows; unlink the contents let go once the WAL that
        lets them go is flushed; copy the WAL into the database. Not on a full
        disk (see `look_for_room`)."""
        if self._space.full:
            return
        with self._space.as_cache_disk_full():
            if self.files.unflushed or self._durable:
                self._flush_durable()
            if self.files.dropping:
                self._flush_wal()
                self.files.remove_dropped()
            if self.db.total_changes != self._checkpointed:
                self.db.execute("PRAGMA wal_checkpoint(PASSIVE)")
                self._checkpointed = self.db.total_changes

    def look_for_room(self) -> None:
        """While the disk is full: take changes again once it has room."""
        self._space.look_for_room()

    @property
    def disk_full(self) -> bool:
        """The cache's disk is full: changes to the files are refused."""
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
                self._flush_durable()
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self.files.remove_dropped()
        self.abandon()

    def abandon(self) -> None:
        """Close as a SIGKILL would: nothing flushed or checkpointed."""
        self.db.close()
        for fd in (self._wal_fd, self.folder_fd):
            if fd is not None and fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._wal_fd, self.folder_fd = None, -1
        if hasattr(self, "files"):
            self.files.close()

    # ---------------------------------------------------------------- rows

    def nodes(self) -> Iterator[Node]:
        for row in self.db.execute(SELECT_NODES).fetchall():
            yield node_of(row)

    def insert(self, node: Node) -> int:
        """Insert a new node's row; returns its id. Ids are never reused: the
        meta `ids_kept` is an id no node had yet, moved a block ahead at a time
        (one write per block, not per node)."""
        node_id = self._next_id
        if node_id >= self._ids_kept:
            self.set_meta("ids_kept", str(node_id + ID_BLOCK))
            self._ids_kept = node_id + ID_BLOCK
        self._run(INSERT_NODE, (node_id, *row_values(node)))
        self._next_id += 1
        return node_id

    def save(self, node: Node) -> None:
        self._run(UPDATE_NODE, (*row_values(node), node.id))

    def delete(self, node_id: int) -> None:
        self._run("DELETE FROM nodes WHERE id = ?", (node_id,))

    def tombstones(self) -> Iterator[Tombstone]:
        for row in self.db.execute("SELECT memory_id, path, base_sha, deleted_at FROM tombstones"):
            yield Tombstone(*row)

    def add_tombstone(self, t: Tombstone) -> None:
        self._run(
            "INSERT OR REPLACE INTO tombstones (memory_id, path, base_sha, deleted_at) "
            "VALUES (?, ?, ?, ?)",
            (t.memory_id, t.path, t.base_sha, t.deleted_at),
        )

    def drop_tombstone(self, memory_id: str) -> None:
        self._run("DELETE FROM tombstones WHERE memory_id = ?", (memory_id,))

    def record_upload(self, u: Upload) -> None:
        self._run(
            "INSERT OR REPLACE INTO uploads (node_id, memory_id, path, sha) VALUES (?, ?, ?, ?)",
            (u.node_id, u.memory_id, u.path, u.sha),
        )

    def upload_answered(self, node_id: int) -> None:
        self._run("DELETE FROM uploads WHERE node_id = ?", (node_id,))

    def uploads(self) -> list[Upload]:
        rows = self.db.execute("SELECT node_id, memory_id, path, sha FROM uploads").fetchall()
        return [Upload(*row) for row in rows]

    def get_meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str | None) -> None:
        """Keep a meta value; an unchanged one commits nothing."""
        if self.get_meta(key) != value:
            self._run("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    # ------------------------------------------------------------- contents

    def content(self, node_id: int) -> bytes | None:
        """A file's content, or None when it has no file (a cached file without one
        is empty: a new file gets its file at its first write)."""
        with self._space.as_cache_disk_full():
            return self.files.read(node_id)

    def content_sizes(self) -> dict[int, int]:
        """The size of every content file kept, by node id."""
        return self.files.sizes()

    def put_content(self, node_id: int, data: bytes | bytearray) -> None:
        """A file's whole content, written now (a kill leaves the old or the new one)."""
        self._unpin(node_id)
        self.files.put(node_id, data)

    def write(
        self, node_id: int, offset: int, data: bytes, size: int, mtime_ns: int, undo: Undo
    ) -> None:
        """A write of `data` at `offset`, leaving the content `size` bytes long,
        changed at `mtime_ns`: its bytes go to the content file, stamped with that
        time. When it fails, the file is put back as `undo` says."""
        self._unpin(node_id)
        try:
            self.files.patch(node_id, offset, data, size, exact=not data, mtime_ns=mtime_ns)
        except BaseException:
            with contextlib.suppress(OSError, CacheCorrupt):
                self.files.patch(node_id, undo[0], undo[1], undo[2], exact=True)
            raise

    def truncate(self, node_id: int, size: int, mtime_ns: int, undo: Undo) -> None:
        """A content cut or grown to `size` bytes, as `write` does."""
        self.write(node_id, size, b"", size, mtime_ns, undo)

    def drop_content(self, node_id: int) -> None:
        """The content goes (its file once the rows saying so are durable)."""
        if node_id in self._durable:
            self._run("DELETE FROM durable WHERE node_id = ?", (node_id,))
            self._durable.discard(node_id)
        self.files.drop_later(node_id)
