"""The journal of one store: its rows in SQLite (WAL), each change one
transaction.

It keeps every node's row, the pending deletes, the uploads in flight and a
little metadata, in an SQLite file (memfs/cache/_schema.py); the files'
contents are files beside it (memfs/cache/_contents.py). A change (one
method call, or everything inside `transaction()`) is one SQLite commit: in
WAL mode with synchronous=NORMAL it is in the kernel's hands once the call
returns, so a SIGKILL of memfs cannot undo it; `make_durable` flushes the
WAL, which makes every commit so far survive a power cut too.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from typing import Any

from .._exceptions import CacheCorrupt
from ._disk_space import DiskSpace
from ._node import Node, Tombstone, Upload
from ._schema import INSERT_NODE, SELECT_NODES, UPDATE_NODE, node_of, open_journal_file, row_values


class Journal:
    """The journal of one store, at `path`, in the folder `folder_fd` (memfs's
    own, checked by the caller), whose disk `space` watches."""

    def __init__(self, path: str, folder_fd: int, space: DiskSpace, *, store_id: str) -> None:
        self.path = path
        self.folder_fd = folder_fd
        self.space = space
        self.db = open_journal_file(folder_fd, path, store_id=store_id)
        self._wal_fd: int | None = None
        self._durable_changes = -1
        self._checkpointed_changes = self.db.total_changes
        try:
            self._next_id = self._next_node_id()
        except sqlite3.Error as e:
            self.db.close()
            raise CacheCorrupt(f"cannot open the cache at {os.path.dirname(path)}: {e}") from e

    # -------------------------------------------------------------- commits

    def _run(self, sql: str, params: Any = ()) -> None:
        if self.db.in_transaction:  # a failed statement may have ended it: not done again
            with self.space.as_cache_disk_full():
                self.db.execute(sql, params)
        else:
            self.space.run(self.db.execute, sql, params)

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
            elif _in_transaction(self.db):  # a failed statement may have ended it
                self.db.execute("ROLLBACK")
            raise
        self._commit()

    def _commit(self) -> None:
        if not _in_transaction(self.db):
            return
        try:
            self._run("COMMIT")
        except BaseException:
            if _in_transaction(self.db):
                self.db.execute("ROLLBACK")
            raise

    @property
    def committed(self) -> int:
        """A count of changes committed: it changes whenever anything is."""
        return self.db.total_changes

    # ----------------------------------------------------------- durability

    def make_durable(self) -> None:
        """Make every commit so far durable: one flush of the WAL (none when
        nothing was committed since the last)."""
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
                return
        with self.space.as_cache_disk_full():
            os.fdatasync(self._wal_fd)
        self._durable_changes = changes

    @property
    def unsaved_commits(self) -> bool:
        """Something was committed since the last `checkpoint`."""
        return self.db.total_changes != self._checkpointed_changes

    def checkpoint(self) -> None:
        """Copy the WAL into the database now (while the filesystem is idle), so
        that no request pays for it; not on a full disk (the database may grow)."""
        if self.space.full:
            return
        with self.space.as_cache_disk_full():
            self.db.execute("PRAGMA wal_checkpoint(PASSIVE)")
        self._checkpointed_changes = self.db.total_changes

    def close(self) -> None:
        """Checkpoint the WAL whole and close (errors say nothing: the next open
        finds the WAL)."""
        with contextlib.suppress(sqlite3.Error):
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.abandon()

    def abandon(self) -> None:
        """Close as a SIGKILL would: nothing checkpointed or flushed."""
        self.db.close()
        if self._wal_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._wal_fd)
            self._wal_fd = None

    # ---------------------------------------------------------------- nodes

    def nodes(self) -> Iterator[Node]:
        for row in self.db.execute(SELECT_NODES).fetchall():
            yield node_of(row)

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
        return node_id

    def save(self, node: Node) -> None:
        self._run(UPDATE_NODE, (*row_values(node), node.id))

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
