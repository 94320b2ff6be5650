"""The journal's SQLite side, off the write path: the redo log's records
applied to it, and what reads see.

The records are applied many at once, in one transaction that also records
the number of the last one (`LOG_APPLIED`), so that an apply a kill cut short
is done again and one that committed is never done twice; the content files
they changed are flushed before that commit, and the WAL that holds it
before the log starts again from its beginning over them.
That happens while the filesystem is idle (`apply_when_idle`), when the log
is full, before anything reads what the records changed (`reading`), and at
close. On a full disk (memfs/cache/_disk_space.py) the records stay in the
log, and reads see them applied in a transaction rolled back after.

SQLite commits reach the WAL at once (synchronous=NORMAL); the WAL is flushed
(`sync_wal`) when an apply or a batch wrote it and something must be durable,
and copied into the database while the filesystem is idle (`checkpoint`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sqlite3
from collections.abc import Iterable, Iterator
from typing import Any

from .._exceptions import CacheCorrupt, CacheDiskFull
from ._disk_space import DiskSpace
from ._files import ContentFiles
from ._records import APPLY, CONTENT_OPS, Op, Operation, run
from ._redo import ChainRecord, RedoLog
from ._schema import LOG_APPLIED, LOG_FILLED, LOG_ID, SELECT_NODES


class JournalDatabase:
    """The SQLite connection `db` of the journal at `path` (whose folder is
    `folder_fd`, whose disk `space` watches, whose content files are `files`),
    and the number of the last record of its redo log applied to it. The
    callers say up to which record the log was written (`written`)."""

    def __init__(
        self,
        db: sqlite3.Connection,
        path: str,
        folder_fd: int | None,
        space: DiskSpace,
        files: ContentFiles,
    ) -> None:
        self.db = db
        self.files = files
        self.path = path
        self.folder_fd = folder_fd
        self.space = space
        self.applied = int(self.meta(LOG_APPLIED) or 0)
        """The number of the last record of the redo log that SQLite holds."""
        self.batch_statements = 0
        """Statements run in batches since the journal opened."""
        self._batch: list[Operation] | None = None
        """The operations of the open batch, kept so that a full disk can log them instead."""
        self._durable_changes = -1
        self._checkpointed_changes = 0
        self._wal_fd: int | None = None

    # ------------------------------------------------------------ applying

    def run(self, op: Operation) -> None:
        run(self.db, op)

    def apply_log(self, log: RedoLog, written: int) -> None:
        """Apply every record of `log` (up to `written`, the last one written) in
        one transaction, and start the log again (nothing to do when it is
        empty). CacheDiskFull when SQLite's disk is full: the records stay in
        the log (at once, without trying, while the disk is known full and has
        no room)."""
        if written == self.applied or self.db.in_transaction:
            return
        if self.space.full and not self.space.has_room(log.offset):
            raise CacheDiskFull(self.space.reason)
        with self.space.as_cache_disk_full():
            self._apply(log.records(self.applied), log, expect=written)
        self.space.room_again()

    def apply_when_idle(self, log: RedoLog, written: int) -> None:
        """Housekeeping's `apply_log`. While the disk is known full it is tried
        once the disk seems to have room (or every `RETRY_FULL` seconds), and a
        refusal says nothing more: the full disk was logged once, and `memfs
        status` shows it until it has room again."""
        space = self.space
        if not space.full:
            self.apply_log(log, written)
            return
        if not space.retry_due(log.offset):
            return
        if written == self.applied:
            if space.has_room(log.offset):
                space.room_again()
            return
        with contextlib.suppress(CacheDiskFull):
            with space.as_cache_disk_full():
                self._apply(log.records(self.applied), log, expect=written)
            space.room_again()

    def apply_chain(self, chain: list[ChainRecord], log: RedoLog) -> bool:
        """Apply the chain of records a kill left in `log` (opening); False when
        SQLite's disk is full: the chain stays in the log, which goes on after it."""
        try:
            self._apply(((r.seq, r.ops) for r in chain), log, expect=None)
        except sqlite3.Error as e:
            if e.sqlite_errorcode != sqlite3.SQLITE_FULL:
                raise
            self.space.now_full()
            return False
        return True

    def _apply(
        self, records: Iterable[tuple[int, list[Operation]]], log: RedoLog, expect: int | None
    ) -> None:
        """Apply `records` in one transaction with the number of the last one,
        flush the WAL, and start `log` again. `expect`: the last record this
        process wrote, which must be among them (else the log lost some)."""
        last = None
        self.db.execute("BEGIN")
        try:
            for seq, ops in records:
                for op in ops:
                    self.run(op)
                last = seq
            if expect is not None and last != expect:
                raise CacheCorrupt(
                    f"the redo log {log.path} lost records {(last or self.applied) + 1}-{expect}"
                )
            if last is not None:
                self.db.execute(APPLY[Op.SET_META], (LOG_APPLIED, str(last)))
            self.files.flush()
            self.db.execute("COMMIT")
        except BaseException:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            raise
        if last is not None:
            self.applied = last
        self.sync_wal()  # before the log's start is written again
        log.restart()

    @contextlib.contextmanager
    def reading(self, log: RedoLog, written: int) -> Iterator[None]:
        """Reads inside see every record up to `written`: the log is applied
        first, or, when SQLite's disk is full, applied in a transaction rolled
        back after (SQLite keeps its pages in memory meanwhile: nothing is
        written)."""
        with contextlib.suppress(CacheDiskFull):
            self.apply_log(log, written)
        if written == self.applied or self.db.in_transaction:
            yield
            return
        self.db.execute("PRAGMA cache_spill = OFF")
        self.db.execute("BEGIN")
        try:
            for _, ops in log.records(self.applied):
                for op in ops:
                    self.run(op)
            yield
        finally:
            if _in_transaction(self.db):
                self.db.execute("ROLLBACK")
            self.db.execute("PRAGMA cache_spill = ON")

    # ------------------------------------------------------------- batches

    def begin_batch(self) -> None:
        """Begin a batch: one SQLite transaction for many operations, while
        nothing else uses the journal (see `Journal.batch`)."""
        self._batch = []
        self.db.execute("BEGIN")

    def run_in_batch(self, ops: tuple[Operation, ...]) -> list[Operation] | None:
        """Run `ops` in the open transaction. When the disk fills meanwhile, what
        SQLite took goes back, and the batch's operations so far and the rest
        of `ops` are returned: the caller logs them as one record instead."""
        for i, op in enumerate(ops):
            self.batch_statements += 1
            if self._batch is not None:
                self._batch.append(_kept(op))
            try:
                self.run(op)
            except sqlite3.Error as e:
                if self._batch is None or e.sqlite_errorcode != sqlite3.SQLITE_FULL:
                    raise
                if self.db.in_transaction:
                    self.db.execute("ROLLBACK")
                self.space.now_full()
                ran, self._batch = self._batch, None
                return ran + list(ops[i + 1 :])
        return None

    def end_batch(self) -> list[Operation] | None:
        """Commit the batch: None when it is. Else what to log instead of it: its
        operations, when the disk is full (it was rolled back); none when SQLite
        ended it itself after an error."""
        ops, self._batch = self._batch or [], None
        if not _in_transaction(self.db):
            return []
        try:
            self.files.flush()
            self.db.execute("COMMIT")
        except sqlite3.Error as e:
            if e.sqlite_errorcode != sqlite3.SQLITE_FULL:
                raise
            self.db.execute("ROLLBACK")
            self.space.now_full()
            return ops
        return None

    # ---------------------------------------------------------- durability

    def sync_wal(self) -> None:
        """Flush the WAL, when something was committed to it since the last flush."""
        changes = self.db.total_changes
        if changes == self._durable_changes:
            return
        if self._wal_fd is None:
            wal = self.path + "-wal"
            if self.folder_fd is not None:
                wal = os.path.basename(wal)
            flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW
            try:
                self._wal_fd = os.open(wal, flags, dir_fd=self.folder_fd)
            except FileNotFoundError:
                return  # nothing was ever written to a WAL: nothing to flush
        os.fdatasync(self._wal_fd)
        self._durable_changes = changes

    @property
    def unsaved_commits(self) -> bool:
        """Something was committed to SQLite since the last `checkpoint`."""
        return self.db.total_changes != self._checkpointed_changes

    def checkpoint(self) -> None:
        """Copy the WAL into the database now; the WAL keeps its size."""
        self.db.execute("PRAGMA wal_checkpoint(PASSIVE)")
        self._checkpointed_changes = self.db.total_changes

    def close(self) -> None:
        """Checkpoint the WAL whole and close (errors say nothing: the next open
        finds the WAL)."""
        with contextlib.suppress(sqlite3.Error):
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self.db.close()
        self.abandon()

    def abandon(self) -> None:
        """Close as a SIGKILL would: nothing checkpointed or flushed."""
        self.db.close()
        if self._wal_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._wal_fd)
            self._wal_fd = None

    # --------------------------------------------------------------- reads

    def redo_log_id(self) -> tuple[str, bool]:
        """The id of the journal's redo log, and whether it was made now: for a
        journal new to the log, or made again beside an old one (records of
        another id are never read)."""
        log_id = self.meta(LOG_ID)
        if log_id is not None:
            return log_id, False
        log_id = secrets.token_hex(8)
        self.run((Op.SET_META, LOG_ID, log_id))
        self.run((Op.SET_META, LOG_FILLED, None))
        return log_id, True

    def meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def node_rows(self) -> list[Any]:
        return self.db.execute(SELECT_NODES).fetchall()

    def names(self) -> dict[int, tuple[int, str]]:
        """Each row's (parent, name), by id."""
        rows = self.db.execute("SELECT id, parent, name FROM nodes").fetchall()
        return {row[0]: (row[1], row[2]) for row in rows}

    def next_node_id(self) -> int:
        """The id after every one given out (ids are never reused)."""
        (next_id,) = self.db.execute(
            "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'nodes'), 0), "
            "coalesce((SELECT max(id) FROM nodes), 0)) + 1"
        ).fetchone()
        return int(next_id)

    def tombstone_rows(self) -> list[Any]:
        return self.db.execute(
            "SELECT memory_id, path, base_sha, deleted_at FROM tombstones"
        ).fetchall()

    def upload_rows(self) -> list[Any]:
        return self.db.execute("SELECT node_id, memory_id, path, sha FROM uploads").fetchall()

    def row_size(self, node_id: int) -> int | None:
        row = self.db.execute("SELECT size FROM nodes WHERE id = ?", (node_id,)).fetchone()
        return None if row is None else int(row[0])


def _in_transaction(db: sqlite3.Connection) -> bool:
    """An SQLite transaction is open (asked anew each time: a statement may end it)."""
    return db.in_transaction


def _kept(op: Operation) -> Operation:
    """An operation as a batch keeps it for a full disk: a content held in a
    buffer its owner may change later is copied."""
    if op[0] in CONTENT_OPS and isinstance(op[-1], bytearray):
        return (*op[:-1], bytes(op[-1]))
    return op
