"""The journal of one store: its rows in SQLite (WAL), its contents as files.

A change (one call, or a `transaction()`) is one commit with synchronous=NORMAL, in the WAL before
the call returns: a SIGKILL cannot undo it. `make_durable(node)`, for `fsync()`, commits the file's
content to the table `durable` and flushes the WAL, which makes every commit before it durable too.
A `durable` row is kept only while the content file holds exactly its bytes (a change
flushes the file and deletes the row first; a file removed or evicted leaves its row to the idle
pass, which deletes them all); opening writes the rows of cached files back, as a power cut may have
lost them.
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

Undo = tuple[int, bytes, int]
"""How a content file is put back when its change fails: (offset, bytes, size)."""


class Journal:
    """The journal at `path`, reached through its folder's checked descriptor."""

    def __init__(self, path: str, *, store_id: str, memory_bytes: int) -> None:
        self.path = path
        self._wal_fd: int | None = None
        self._durable_changes = -1
        self._durable: set[int] = set()
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
            self.files = ContentFiles(self.folder_fd, folder, self._space, memory_bytes)
            owner = self.get_meta("store_id") or store_id
            self.set_meta("store_id", owner)  # once, at its first open
            if owner != store_id:
                raise CacheCorrupt(f"the cache at {folder} holds store {owner}: move it aside")
            highest = int(self.db.execute("SELECT max(id) FROM nodes").fetchone()[0])
            self._ids_kept = int(self.get_meta("ids_kept") or FIRST_NODE_ID)
            self._next_id = max(self._ids_kept, highest + 1)
            self._restore_durable()
            self.after_crash = self.get_meta("closed") != "1"  # a content may lack pages
            self.set_meta("closed", None)
            self._flush_wal()
        except BaseException as e:
            self.abandon()
            if isinstance(e, OSError | sqlite3.Error):
                raise CacheCorrupt(f"cannot open the cache at {folder}: {e}") from e
            raise

    @property
    def committed(self) -> int:
        """Changes whenever anything is committed."""
        return self.db.total_changes

    def _run(self, sql: str, params: Any = ()) -> None:
        # Inside a transaction a failed statement may have ended it: not done again.
        self._space.run(self.db.execute, sql, params, again=not self.db.in_transaction)

    def transaction(self) -> contextlib.AbstractContextManager[None]:
        """One commit for everything inside (nested ones join); an exception
        commits nothing."""
        return self._grouped(keep=False)

    def batch(self) -> contextlib.AbstractContextManager[None]:
        """`transaction`, but what ran is committed even when an exception ends it,
        since memory already holds it."""
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

    def make_durable(self, node: Node | None = None, content: bytes = b"") -> None:
        """Make every commit so far durable, and `node`'s `content` and time (its
        row's size and times follow from them at the next open)."""
        if node is not None and not (
            node.id in self._durable and self.db.total_changes == self._durable_changes
        ):
            self._run(
                "INSERT OR REPLACE INTO durable (node_id, content, mtime_ns) VALUES (?, ?, ?)",
                (node.id, content, node.mtime_ns),
            )
            self._durable.add(node.id)
        self._flush_wal()

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
        """Make every content file and every commit durable."""
        with self._space.as_cache_disk_full():
            self.files.flush()
        self._flush_wal()

    def _unpin(self, node_id: int) -> None:
        """Before a content with a `durable` row changes: flush it, drop the row."""
        if node_id in self._durable:
            with self._space.as_cache_disk_full():
                self.files.sync_one(node_id)
            self._run("DELETE FROM durable WHERE node_id = ?", (node_id,))
            self._durable.discard(node_id)

    def _restore_durable(self) -> None:
        """Write the `durable` rows of cached files back into their content files,
        flush them, delete the rows."""
        sql = "SELECT id FROM nodes WHERE cached AND deleted_at IS NULL"
        self._run(f"DELETE FROM durable WHERE node_id NOT IN ({sql})")
        rows = self.db.execute("SELECT node_id, content, mtime_ns FROM durable").fetchall()
        self._durable = {row[0] for row in rows}
        with contextlib.suppress(CacheDiskFull):  # the rows stay, for the idle pass
            for node_id, content, mtime_ns in rows:
                if self.files.read(node_id) != content:
                    self.files.patch(
                        node_id, 0, content, len(content), exact=True, mtime_ns=mtime_ns
                    )
            self._flush_durable()

    def _flush_durable(self) -> None:
        self.files.changed(self._durable)
        self.files.flush()
        if self._durable:
            self._run("DELETE FROM durable")
            self._durable.clear()

    def when_idle(self) -> None:
        """While idle, with room: flush the content files, delete the `durable`
        rows, unlink the contents let go once the WAL is flushed, checkpoint."""
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
        self._space.look_for_room()

    @property
    def disk_full(self) -> bool:
        return self._space.full

    @property
    def disk_full_reason(self) -> str | None:
        """Why changes are refused; None when they are not."""
        return self._space.reason if self._space.full else None

    def close(self) -> None:
        """Flush and checkpoint (on errors the next open finds what is left)."""
        with contextlib.suppress(sqlite3.Error, OSError):
            if not self._space.full:
                self._flush_durable()
                self.set_meta("closed", "1")  # every content file flushed
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self.files.remove_dropped()
        self.abandon()

    def abandon(self) -> None:
        """Close without memfs's flushes, as a SIGKILL would (SQLite's close checkpoints)."""
        self.db.close()
        for fd in (self._wal_fd, self.folder_fd):
            if fd is not None and fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._wal_fd, self.folder_fd = None, -1
        if hasattr(self, "files"):
            self.files.close()

    def nodes(self) -> Iterator[Node]:
        return (node_of(row) for row in self.db.execute(SELECT_NODES).fetchall())

    def new_id(self) -> int:
        """An id never used: the meta `ids_kept`, moved a block ahead at a time, is one."""
        node_id = self._next_id
        if node_id >= self._ids_kept:
            self.set_meta("ids_kept", str(node_id + ID_BLOCK))
            self._ids_kept = node_id + ID_BLOCK
        self._next_id += 1
        return node_id

    def insert(self, node: Node) -> int:
        """Insert a new node's row; returns its id."""
        node_id = self.new_id()
        self._run(INSERT_NODE, (node_id, *row_values(node)))
        return node_id

    def save(self, node: Node) -> None:
        self._run(UPDATE_NODE, (*row_values(node), node.id))

    def delete(self, node_id: int) -> None:
        self._run("DELETE FROM nodes WHERE id = ?", (node_id,))

    def tombstones(self) -> Iterator[Tombstone]:
        sql = "SELECT memory_id, base_path, base_sha, deleted_at, id FROM nodes WHERE deleted_at"
        return (Tombstone(*row) for row in self.db.execute(sql).fetchall())

    def add_tombstone(self, t: Tombstone) -> None:
        """Make the row `t.node_id` the pending delete `t` (no node's row any more)."""
        self._run(
            "INSERT OR REPLACE INTO nodes (id, parent, name, kind, mode, mtime_ns, ctime_ns, "
            "memory_id, base_path, base_sha, deleted_at) VALUES (?, 0, '', 'file', 0, 0, 0, "
            "?, ?, ?, ?)",
            (t.node_id, t.memory_id, t.path, t.base_sha, t.deleted_at),
        )

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
        if self.get_meta(key) != value:
            self._run("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def content(self, node_id: int) -> bytes | None:
        """A file's content, or None when it has no content file."""
        with self._space.as_cache_disk_full():
            return self.files.read(node_id)

    def put_content(self, node_id: int, data: bytes | bytearray) -> None:
        self._unpin(node_id)
        self.files.put(node_id, data)

    def write(
        self, node_id: int, offset: int, data: bytes, size: int, mtime_ns: int, undo: Undo
    ) -> None:
        """Write `data` at `offset` into the content file, then `size` bytes long and
        stamped `mtime_ns`; when that fails, put it back as `undo` says."""
        self._unpin(node_id)
        try:
            self.files.patch(node_id, offset, data, size, exact=not data, mtime_ns=mtime_ns)
        except BaseException:
            with contextlib.suppress(OSError, CacheCorrupt):
                self.files.patch(node_id, undo[0], undo[1], undo[2], exact=True)
            raise

    def drop_content(self, node_id: int) -> None:
        self.files.drop_later(node_id)
