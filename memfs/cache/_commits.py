"""How the journal's changes are committed: through its redo log, to SQLite.

A change (one operation, or the operations of one `transaction()`) is
committed by one record of the redo log (memfs/cache/_redo.py), a `pwritev`
of a few microseconds where an SQLite commit costs 20-50: once it returned,
a SIGKILL cannot undo it. `Commits.apply` writes the records to SQLite, many
in one transaction, together with the number of the last one; it runs while
the filesystem is idle, when the log is full, before anything reads what the
records changed, and at close. Opening applies what a kill left, and tells
the end a kill leaves from damage (`RedoDamage`: the journal names what was
lost; what is left past the chain is then written over with zeros, so that
it is never read again). Until then
the contents and meta values the records hold are answered from them
(`logged_content`, `logged_meta`).

`batch()` writes SQLite itself, after applying the log: it runs while nothing
else uses the journal (the pass before mounting), so its one SQLite commit
keeps its place in the order of changes.

A full disk: SQLite cannot take what the log holds, while the log's own
space is preallocated, so records still go there. Then the records stay in
the log (opening keeps a kill's chain there and answers from it), a batch is
one record, reads that need the log applied (`applied`) see it applied in a
transaction rolled back after, and `disk_full` says so (logged when it
begins and ends): the filesystem refuses changes with ENOSPC, so that the
log's space goes to the sync, which still uploads what the cache holds and
records what the store agreed. Housekeeping applies the log again once the
disk has room (`apply_when_idle`).

Durability: SQLite commits reach the WAL at once (synchronous=NORMAL);
`make_durable` flushes the redo log (one `fdatasync`), which makes every
change so far durable, and the WAL too when a batch wrote it. The log starts
again from its beginning only once the WAL holding what applied it is
flushed.

What each operation does to SQLite is `APPLY` (memfs/cache/_records.py).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from .._exceptions import CacheCorrupt, CacheDiskFull
from ._records import APPLY, Op, Operation, run
from ._redo import CAPACITY, ChainRecord, LogEnd, RedoLog, RedoLogError
from ._schema import LOG_APPLIED, LOG_FILLED, LOG_ID

log = logging.getLogger("memfs.cache")

ROOM_MARGIN = 1024 * 1024
"""Free bytes, beyond twice what the log holds, that say a full disk has room again."""
RETRY_FULL = 30.0
"""Seconds between tries to apply the log on a disk that seems full still."""


@dataclass(frozen=True)
class RedoDamage:
    """What opening the journal found lost from its redo log: why (`reason`, the
    end of a sentence about the log), the operations of the lost records that
    can still be read (the journal names the files from them), and the number
    of the first record lost."""

    reason: str
    lost: list[Operation]
    first_lost: int


class _Transaction:
    """`Commits.transaction()`: the outermost one gathers the operations inside
    and commits them as one record at its end; an exception commits nothing."""

    __slots__ = ("_commits", "_outer")

    def __init__(self, commits: Commits) -> None:
        self._commits = commits
        self._outer = False

    def __enter__(self) -> None:
        commits = self._commits
        self._outer = commits.group is None and not commits.db.in_transaction
        if self._outer:
            commits.group = []

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if not self._outer:
            return
        commits = self._commits
        ops, commits.group = commits.group or [], None
        if kind is not None:
            commits.rolled_back()
            return
        if ops:
            try:
                commits.commit(ops)
            except BaseException:
                commits.rolled_back()
                raise


class Commits:
    """The commits of one journal: its SQLite connection `db` and the redo log
    beside the database at `path`. `rolled_back` is called when a transaction
    commits nothing (the journal forgets what it assumed its rows hold).
    `folder_fd`: a descriptor of the database's folder, checked by the
    journal: the redo log and the WAL are opened relative to it."""

    def __init__(
        self,
        db: sqlite3.Connection,
        path: str,
        rolled_back: Callable[[], None],
        *,
        folder_fd: int | None = None,
    ) -> None:
        self.db = db
        self.path = path
        self.folder_fd = folder_fd
        self.rolled_back = rolled_back
        self.group: list[Operation] | None = None
        """The operations of the open `transaction()`, logged together at its end."""
        self.count = 0
        """Commits since the journal opened: records logged, statements of a batch."""
        self._logged_contents: dict[int, tuple[int, int] | None] = {}
        """Contents logged and not applied: (offset in the log, length), None if dropped."""
        self._logged_meta: dict[str, str | None] = {}
        self._durable_changes = -1
        self._wal_fd: int | None = None
        self._batch_ops: list[Operation] | None = None
        """The operations of the open SQLite batch, kept so that a full disk can
        log them instead."""
        self.disk_full = False
        """SQLite could not take the log's records for lack of space: they stay
        in the log (see the module's docstring)."""
        self._full_tried = 0.0
        self.damage: RedoDamage | None = None
        """What opening found lost from the redo log (None: it ended as a kill leaves it)."""
        log_id = self._sql_meta(LOG_ID)
        missing = False
        if log_id is None:
            # A journal new to the log, or made again beside an old one: records of
            # another id are never read.
            log_id = secrets.token_hex(8)
            self.db.execute(APPLY[Op.SET_META], (LOG_ID, log_id))
            self.db.execute(APPLY[Op.SET_META], (LOG_FILLED, None))
        else:
            missing = not self._log_is_there()
        self._applied = int(self._sql_meta(LOG_APPLIED) or 0)
        self._seq = self._applied
        self._log = RedoLog(path + "-redo", bytes.fromhex(log_id), dir_fd=folder_fd)
        chain, end = self._log.recover(self._applied)
        try:
            self._apply((r.seq, r.ops) for r in chain)
        except sqlite3.Error as e:
            if e.sqlite_errorcode != sqlite3.SQLITE_FULL:
                raise
            self._keep_in_log(chain, end.at)
            self._now_full()
        if missing:
            self.damage = RedoDamage("the file is missing", [], self._applied + 1)
        else:
            self.damage = self._damage(end)
        if self.damage is not None and end.later:
            self._log.clear_after(end.at)
        self._fill_noted = self.logged_meta(LOG_FILLED) is not None
        if not self._fill_noted:
            self._log.start_filling()

    def _log_is_there(self) -> bool:
        """The redo log of a journal that has one must be there: a missing file
        is damage (whatever it held is lost)."""
        name = self.path + "-redo"
        try:
            if self.folder_fd is None:
                os.stat(name, follow_symlinks=False)
            else:
                os.stat(os.path.basename(name), dir_fd=self.folder_fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        return True

    def _keep_in_log(self, chain: list[ChainRecord], end: int) -> None:
        """A kill's chain that SQLite cannot take (its disk is full) stays in the
        log, which goes on after it and answers for it."""
        if chain:
            self._seq = chain[-1].seq
        self._log.continue_at(end)
        for record in chain:
            self._note_logged(record.ops, record.contents_at)

    def _damage(self, end: LogEnd) -> RedoDamage | None:
        """Damage, told from the end a kill leaves (see `LogEnd`): intact records
        of the chain after one that fails its check, or a chain that runs into
        the end of a file cut shorter than it was made (its space was written
        whole once: `LOG_FILLED`)."""
        lost = list(end.partial or [])
        for _, ops in end.later:
            lost += ops
        if end.later:
            n = len(end.later)
            reason = (
                f"record {end.expected} is damaged or missing, and "
                f"{n} later {'one follows' if n == 1 else 'ones follow'} it"
            )
            return RedoDamage(reason, lost, end.expected)
        filled = self.logged_meta(LOG_FILLED) is not None
        if end.cut and filled and end.size < CAPACITY:
            reason = f"the file is cut short at {end.size} bytes of {CAPACITY}"
            return RedoDamage(reason, lost, end.expected)
        return None

    def _sql_meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error, RedoLogError, OSError, CacheDiskFull):
            self.apply()  # else the next open applies what is left
        self.abandon()
        if self._wal_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._wal_fd)
            self._wal_fd = None

    def abandon(self) -> None:
        """Close the log as a SIGKILL would: nothing applied or flushed."""
        self._log.close()

    def note_log_filled(self) -> None:
        """Remember that the redo log's space is written (its filling thread is
        done), so that no later open fills it again."""
        if self._log.filled and not self._fill_noted:
            self.do((Op.SET_META, LOG_FILLED, "1"))
            self._fill_noted = True

    # ---------------------------------------------------------- commits

    def transaction(self) -> _Transaction:
        """One commit for everything inside (one record of the redo log); nested
        uses join the outer one. An exception inside commits nothing."""
        return _Transaction(self)

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """One SQLite commit for many changes made while nothing else uses the
        journal, written to SQLite itself once the log is applied: unlike
        `transaction`, what ran is committed even when an exception ends the
        batch, since memory already holds it. On a full disk (known, or met
        inside) the batch's changes are one record of the log instead."""
        if self.group is not None or self.db.in_transaction:
            yield
            return
        try:
            self.apply()
        except CacheDiskFull:
            self.group = []
        else:
            self._batch_ops = []
            self.db.execute("BEGIN")
        try:
            yield
        finally:
            ops, self._batch_ops = self._batch_ops, None
            if self.group is not None:
                group, self.group = self.group, None
                if group:
                    self.commit(group)
            elif self._sql_open():
                self._commit_batch(ops or [])
            else:
                self.rolled_back()  # SQLite ends it itself after some errors

    def _commit_batch(self, ops: list[Operation]) -> None:
        try:
            self.db.execute("COMMIT")
        except sqlite3.Error as e:
            if e.sqlite_errorcode != sqlite3.SQLITE_FULL:
                raise
            self.db.execute("ROLLBACK")
            self._now_full()
            if ops:
                self.commit(ops)

    def _batch_to_log(self) -> None:
        """The disk filled inside a batch: what SQLite took goes back, and the
        batch goes on as one record of the log (its operations so far first)."""
        if self.db.in_transaction:
            self.db.execute("ROLLBACK")
        self._now_full()
        self.group, self._batch_ops = self._batch_ops or [], None

    def _sql_open(self) -> bool:
        """An SQLite transaction is open (asked anew each time: a statement may end it)."""
        return self.db.in_transaction

    def in_transaction(self) -> bool:
        return self.group is not None or self.db.in_transaction

    def do(self, *ops: Operation) -> None:
        """Commit operations together: into the open transaction's record, into
        SQLite inside a batch, else as a record of their own."""
        if self.group is not None:
            self.group.extend(ops)
        elif self.db.in_transaction:
            for i, op in enumerate(ops):
                self.count += 1
                if self._batch_ops is not None:
                    self._batch_ops.append(_kept(op))
                try:
                    self._run(op)
                except sqlite3.Error as e:
                    if self._batch_ops is None or e.sqlite_errorcode != sqlite3.SQLITE_FULL:
                        raise
                    self._batch_to_log()
                    self.do(*ops[i + 1 :])
                    return
        else:
            self.commit(list(ops))

    def _run(self, op: Operation) -> None:
        run(self.db, op)

    def commit(self, ops: list[Operation]) -> None:
        """Append one record of `ops` to the redo log (applying the log first when
        the record would not fit), then answer from it until it is applied."""
        contents = [op[-1] for op in ops if op[0] is Op.PUT_CONTENT]
        if contents:
            size = sum(map(len, contents))
            stored = [(*op[:-1], len(op[-1])) if op[0] is Op.PUT_CONTENT else op for op in ops]
        else:
            size, stored = 0, ops
        log = self._log
        if log.offset and log.offset + size + 4096 > CAPACITY:
            self.apply()
        try:
            at = log.append(self._seq + 1, stored, contents, size)
        except RedoLogError as e:
            raise self._log_failure(e) from e
        self._seq += 1
        self.count += 1
        self._note_logged(ops, at)
        if log.offset > CAPACITY:
            # Committed already: a full disk leaves it to the next commit to refuse.
            with contextlib.suppress(CacheDiskFull):
                self.apply()

    def _note_logged(self, ops: list[Operation], at: int) -> None:
        """Answer from the log for what `ops` changed (their contents from `at` on)."""
        for op in ops:
            code = op[0]
            if code is Op.PUT_CONTENT:
                self._logged_contents[op[1]] = (at, len(op[2]))
                at += len(op[2])
            elif code is Op.DROP_CONTENT:
                self._logged_contents[op[1]] = None
            elif code is Op.DROP_CONTENTS:
                for i in op[1]:
                    self._logged_contents[i] = None
            elif code is Op.SET_META:
                self._logged_meta[op[1]] = op[2]

    def apply(self) -> None:
        """Apply every record of the redo log to SQLite in one transaction, flush
        it, and start the log again (nothing to do when it is empty).
        CacheDiskFull when SQLite's disk is full: the records stay in the log
        (at once, without trying, while the disk is known full and has no room)."""
        if self._seq == self._applied or self.db.in_transaction:
            return
        if self.disk_full and not self._has_room():
            raise CacheDiskFull(self.full_reason)
        with self.disk_full_is_cache_disk_full():
            self._apply(self._log.records(self._applied), expect=self._seq)
        self._room_again()

    def apply_when_idle(self) -> None:
        """Housekeeping's apply. While the disk is known full it is tried once the
        disk seems to have room (or every `RETRY_FULL` seconds), and a refusal
        says nothing more: the full disk was logged once, and `memfs status`
        shows it until it has room again."""
        if not self.disk_full:
            self.apply()
            return
        if not self._has_room() and time.monotonic() - self._full_tried < RETRY_FULL:
            return
        self._full_tried = time.monotonic()
        if self._seq == self._applied:
            if self._has_room():
                self._room_again()
            return
        with contextlib.suppress(CacheDiskFull):
            with self.disk_full_is_cache_disk_full():
                self._apply(self._log.records(self._applied), expect=self._seq)
            self._room_again()

    @contextlib.contextmanager
    def applied(self) -> Iterator[None]:
        """Reads inside see every change committed: the log is applied first, or,
        when SQLite's disk is full, applied in a transaction rolled back after
        (SQLite keeps its pages in memory meanwhile: nothing is written)."""
        with contextlib.suppress(CacheDiskFull):
            self.apply()
        if self._seq == self._applied or self.db.in_transaction:
            yield
            return
        self.db.execute("PRAGMA cache_spill = OFF")
        self.db.execute("BEGIN")
        try:
            for _, ops in self._log.records(self._applied):
                for op in ops:
                    self._run(op)
            yield
        finally:
            if self._sql_open():
                self.db.execute("ROLLBACK")
            self.db.execute("PRAGMA cache_spill = ON")

    def _apply(
        self, records: Iterable[tuple[int, list[Operation]]], expect: int | None = None
    ) -> None:
        """Apply `records` in one SQLite transaction with the number of the last one,
        flush the WAL, and start the log again. `expect`: the last record this
        process wrote, which must be among them (else the log lost some)."""
        last = None
        self.db.execute("BEGIN")
        try:
            for seq, ops in records:
                for op in ops:
                    self._run(op)
                last = seq
            if expect is not None and last != expect:
                raise CacheCorrupt(
                    f"the redo log {self._log.path} lost records "
                    f"{(last or self._applied) + 1}-{expect}"
                )
            if last is not None:
                self.db.execute(APPLY[Op.SET_META], (LOG_APPLIED, str(last)))
            self.db.execute("COMMIT")
        except BaseException:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            raise
        if last is not None:
            self._applied = self._seq = last
        self._sync_wal()  # before the log's start is written again
        self._logged_contents.clear()
        self._logged_meta.clear()
        self._log.restart()

    def _sync_wal(self) -> None:
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

    def make_durable(self) -> None:
        """Make every change committed so far durable: one flush of the redo log
        (none when nothing was logged since), and of the WAL when a batch wrote it.
        `fdatasync` is enough: what it leaves out (times) is not needed to read
        either back."""
        self._sync_wal()
        with self.disk_full_is_cache_disk_full():
            self._log.flush()

    def start_writeback(self) -> None:
        """Hand what the redo log holds unflushed to the disk, without waiting, so
        that a `make_durable` soon after flushes less (`RedoLog.start_writeback`)."""
        self._log.start_writeback()

    # ------------------------------------------------------- what is logged

    def logged_content(self, node_id: int) -> tuple[bool, bytes | None]:
        """(True, the content or None if dropped) when a record not applied yet
        holds the latest word on a file's content, else (False, None)."""
        if node_id not in self._logged_contents:
            return False, None
        place = self._logged_contents[node_id]
        if place is None:
            return True, None
        with self.disk_full_is_cache_disk_full():
            try:
                return True, self._log.read(*place)
            except OSError as e:
                raise RedoLogError(e) from e

    def logged_meta(self, key: str) -> str | None:
        """A meta value, from a record not applied yet if one holds it."""
        if key in self._logged_meta:
            return self._logged_meta[key]
        return self._sql_meta(key)

    # --------------------------------------------------------------- errors

    @contextlib.contextmanager
    def disk_full_is_cache_disk_full(self) -> Iterator[None]:
        """The one place a full disk (SQLite's, or the redo log's ENOSPC) becomes
        the cache's `CacheDiskFull`."""
        try:
            yield
        except sqlite3.Error as e:
            if e.sqlite_errorcode == sqlite3.SQLITE_FULL:
                self._now_full()
                raise CacheDiskFull(self.full_reason) from e
            raise
        except RedoLogError as e:
            raise self._log_failure(e) from e

    @property
    def full_reason(self) -> str:
        return f"the disk of the cache at {os.path.dirname(self.path)} is full"

    def _now_full(self) -> None:
        """SQLite's disk is full: said once, until it has room again."""
        self._full_tried = time.monotonic()
        if self.disk_full:
            return
        self.disk_full = True
        log.warning(
            "%s: changes to the files are refused (ENOSPC) until space is freed; "
            "the files can still be read, and what the cache holds is still uploaded",
            self.full_reason,
            extra={"event": "cache_disk_full"},
        )

    def _room_again(self) -> None:
        if not self.disk_full:
            return
        self.disk_full = False
        log.info(
            "the disk of the cache at %s has room again: changes are taken again",
            os.path.dirname(self.path),
            extra={"event": "cache_disk_room"},
        )

    def _has_room(self) -> bool:
        """The disk seems to have room for what the log holds: twice its bytes and
        a margin (what applying it writes to the WAL, and more)."""
        try:
            if self.folder_fd is not None:
                st = os.fstatvfs(self.folder_fd)
            else:
                st = os.statvfs(os.path.dirname(self.path) or ".")
        except OSError:
            return True
        return st.f_bavail * st.f_frsize >= 2 * self._log.offset + ROOM_MARGIN

    def _log_failure(self, e: RedoLogError) -> Exception:
        """What a failed write or flush of the redo log is to the cache's callers."""
        if e.error.errno in (errno.ENOSPC, errno.EDQUOT):
            return CacheDiskFull(self.full_reason)
        return e.error


def _kept(op: Operation) -> Operation:
    """An operation as a batch keeps it for a full disk: a content held in a
    buffer its owner may change later is copied."""
    if op[0] is Op.PUT_CONTENT and isinstance(op[-1], bytearray):
        return (*op[:-1], bytes(op[-1]))
    return op
