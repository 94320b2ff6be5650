"""The journal of one store: its rows in SQLite, its contents as files, each
change committed by one record of its redo log.

It keeps every node's row, the pending deletes, the uploads in flight and a
little metadata in an SQLite file (memfs/cache/_schema.py), and each cached
content as a file of its own (memfs/cache/_files.py). A change (one method
call, or everything inside `transaction()`) is committed by one record of
the redo log (memfs/cache/_redo.py, one `pwritev`): once it returned, a
SIGKILL cannot undo it. A write puts its bytes in the content file first,
and its record holds only those bytes, at their offset. The records are
applied to SQLite later, many at once (memfs/cache/_database.py), once the
content files they changed are flushed. `batch()` writes SQLite itself,
while nothing else uses the journal. Opening does the records a kill left
again (onto the content files too) and tells damage from a kill's end
(memfs/cache/_damage.py); on a full disk the records stay in the log
(memfs/cache/_disk_space.py). `make_durable` is one flush of the log.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from typing import NamedTuple

from .._exceptions import CacheCorrupt, CacheDiskFull
from .._private import open_private_dir
from . import _damage
from ._database import JournalDatabase
from ._disk_space import DiskSpace
from ._files import ContentFiles
from ._node import Node, Tombstone, Upload
from ._records import CONTENT_OPS, Op, Operation
from ._redo import CAPACITY, RedoLog, RedoLogError
from ._schema import (
    LOG_FILLED,
    node_of,
    open_journal_file,
    row_values,
    row_values_in_place,
)

_PATCH, _WRITTEN, _SAVE_NODE_IN_PLACE = Op.PATCH, Op.WRITTEN, Op.SAVE_NODE_IN_PLACE


class Undo(NamedTuple):
    """How a content file is put back when its change is not committed: these
    bytes at this offset, then this size."""

    offset: int
    data: bytes
    size: int


class Journal:
    """The journal of one store, at `path`, and its redo log beside it.

    Its folder is opened once and checked as memfs's own (0700, the user's, not
    a symlink); the database, its WAL, its redo log and the content files are
    reached relative to that descriptor. It is its own `transaction()`: the
    outermost use gathers the operations inside and commits them as one
    record at its end."""

    def __init__(self, path: str, *, store_id: str) -> None:
        self.path = path
        self._rows_known = 1
        """Nodes whose `Live.row_known` is this know their row's name (`save`);
        it grows when what the rows hold is unknown again."""
        self._group: list[Operation] | None = None
        """The operations of the open `transaction()`, logged together at its end."""
        self._outer: list[bool] = []
        """For each `transaction()` entered: whether it is the outermost."""
        self._logged_meta: dict[str, tuple[int, str | None]] = {}
        """Meta values a record holds, with its number."""
        self._records = 0
        self.lost_paths: list[str] = []
        """The files whose changes opening found lost from a damaged redo log."""
        self.damage: str | None = None
        """That sentence, as logged; None when nothing was lost."""
        self.folder_fd = open_private_dir(os.path.dirname(path), "cache folder")
        self._space = DiskSpace(path, self.folder_fd)
        try:
            db = open_journal_file(self.folder_fd, path, store_id=store_id)
        except BaseException:
            self._close_folder()
            raise
        try:
            self.files = ContentFiles(self.folder_fd, os.path.dirname(path), self._space)
        except BaseException:
            db.close()
            self._close_folder()
            raise
        self._database = JournalDatabase(db, path, self.folder_fd, self._space, self.files)
        try:
            self._open_log()
        except BaseException as e:
            if hasattr(self, "_log"):
                self._log.close()
            self._database.abandon()
            self.files.close()
            self._close_folder()
            if isinstance(e, OSError | sqlite3.Error | RedoLogError):
                folder = os.path.dirname(path)
                raise CacheCorrupt(f"cannot open the cache at {folder}: {e}") from e
            raise

    def _open_log(self) -> None:
        """Open the redo log, apply what a kill left in it (or keep it there on a
        full disk), and say what damage lost."""
        database = self._database
        log_id, new = database.redo_log_id()
        missing = not new and _damage.is_missing(
            self.folder_fd, os.path.basename(self.path) + "-redo"
        )
        self._log = RedoLog(self.path + "-redo", bytes.fromhex(log_id), dir_fd=self.folder_fd)
        chain, end = self._log.recover(database.applied)
        try:
            for record in chain:  # what a power cut may have left out of the content files
                for op in record.ops:
                    if op[0] in CONTENT_OPS:
                        self.files.redo(*op)
            applied = database.apply_chain(chain, self._log)
        except CacheDiskFull:
            applied = False
        self._seq = database.applied
        """The number of the last record written."""
        if not applied:  # the disk is full: the chain stays in the log, which goes on after it
            self._log.continue_at(end.at)
            for record in chain:
                self._note_logged(record.seq, record.ops)
                self._seq = record.seq
        filled = self.get_meta(LOG_FILLED) is not None
        found = _damage.damage_at(end, filled=filled, missing=missing)
        if found is not None:
            if end.later:
                self._log.clear_after(end.at)
            with self._reading():
                names = database.names()
                self._undo_lost_writes(found.lost)
            self.lost_paths = _damage.lost_paths(found.lost, names)
            self.damage = _damage.report(os.path.dirname(self.path), found, self.lost_paths)
        with self._reading():
            self._next_id = database.next_node_id()
        self._fill_noted = filled
        if not filled:
            self._log.start_filling()

    def _undo_lost_writes(self, lost: list[Operation]) -> None:
        """The content files of the writes damage lost go back to the size their
        rows say (their state from before those writes)."""
        for node_id in {op[1] for op in lost if op[0] is _PATCH}:
            size = self._database.row_size(node_id)
            if size is not None and self.files.size(node_id) not in (None, size):
                with contextlib.suppress(CacheDiskFull, OSError):
                    self.files.patch(node_id, size, b"", size, exact=True)

    @property
    def commits(self) -> int:
        """Commits since the journal opened: records logged, statements of a batch."""
        return self._records + self._database.batch_statements

    @property
    def db(self) -> sqlite3.Connection:
        """The journal's SQLite connection (for tests and counters)."""
        return self._database.db

    # -------------------------------------------------------------- commits

    def transaction(self) -> Journal:
        """One commit for everything inside (one record of the redo log); nested
        uses join the outer one. An exception inside commits nothing."""
        return self

    def __enter__(self) -> None:
        outer = self._group is None and not self._database.db.in_transaction
        self._outer.append(outer)
        if outer:
            self._group = []

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if not self._outer.pop():
            return
        ops, self._group = self._group or [], None
        if kind is not None:
            self._rows_known += 1  # what the rows were assumed to hold is unknown now
            return
        if ops:
            try:
                self._commit(ops)
            except BaseException:
                self._rows_known += 1
                raise

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """One SQLite commit for many changes made while nothing else uses the
        journal, written to SQLite itself once the log is applied: unlike
        `transaction`, what ran is committed even when an exception ends the
        batch, since memory already holds it. On a full disk (known, or met
        inside) the batch's changes are one record of the log instead."""
        if self.in_transaction():
            yield
            return
        try:
            self._apply()
        except CacheDiskFull:
            self._group = []
        else:
            self._database.begin_batch()
        try:
            yield
        finally:
            if self._group is not None:
                group, self._group = self._group, None
                if group:
                    self._commit(group)
            elif (left := self._database.end_batch()) is not None:
                if left:
                    self._commit(left)
                else:
                    self._rows_known += 1  # SQLite ended it: the rows are as they were

    def in_transaction(self) -> bool:
        return self._group is not None or self.db.in_transaction

    def _do(self, *ops: Operation) -> None:
        """Commit operations together: into the open transaction's record, into
        SQLite inside a batch, else as a record of their own."""
        if self._group is not None:
            self._group.extend(ops)
        elif self._database.db.in_transaction:
            self._group = self._database.run_in_batch(ops)  # not None: the disk filled
        else:
            self._commit(list(ops))

    def _commit(self, ops: list[Operation]) -> None:
        """Append one record of `ops` to the redo log (applying the log first when
        the record would not fit)."""
        contents = [op[-1] for op in ops if op[0] in CONTENT_OPS]
        if contents:
            size = sum(map(len, contents))
            stored = [(*op[:-1], len(op[-1])) if op[0] in CONTENT_OPS else op for op in ops]
        else:
            size, stored = 0, ops
        log = self._log
        if log.offset and log.offset + size + 4096 > CAPACITY:
            self._apply()
        try:
            log.append(self._seq + 1, stored, contents, size)
        except RedoLogError as e:
            raise self._space.log_failure(e) from e
        self._seq += 1
        self._records += 1
        self._note_logged(self._seq, ops)
        if log.offset > CAPACITY:
            # Committed already: a full disk leaves it to the next commit to refuse.
            with contextlib.suppress(CacheDiskFull):
                self._apply()

    def _note_logged(self, seq: int, ops: list[Operation]) -> None:
        """Answer from the log for the meta values `ops` set, until their record
        `seq` is applied."""
        for op in ops:
            if op[0] is Op.SET_META:
                self._logged_meta[op[1]] = (seq, op[2])

    # ------------------------------------------------------------- applying

    def _apply(self, *, when_idle: bool = False) -> None:
        """Apply the redo log to SQLite now (CacheDiskFull when its disk is full);
        `when_idle`: housekeeping's apply (`JournalDatabase.apply_when_idle`)."""
        if when_idle:
            self._database.apply_when_idle(self._log, self._seq)
        else:
            self._database.apply_log(self._log, self._seq)
        if self._seq == self._database.applied:
            self._logged_meta.clear()
            if not self.disk_full:
                self._database.sync_wal()
                self.files.remove_dropped()

    def apply_log(self) -> None:
        """Apply the redo log to SQLite now, unless its disk is known full."""
        self._apply(when_idle=True)

    def _reading(self) -> contextlib.AbstractContextManager[None]:
        """Reads inside see every change committed (`JournalDatabase.reading`)."""
        return self._database.reading(self._log, self._seq)

    # ----------------------------------------------------------- durability

    def make_durable(self) -> None:
        """Make every change committed so far durable: one flush of the redo log
        (none when nothing was logged since), and of the WAL when a batch wrote it."""
        self._database.sync_wal()
        with self._space.as_cache_disk_full():
            self._log.flush()

    def note_log_filled(self) -> None:
        """Remember that the redo log's space is written (its filling thread is
        done), so that no later open fills it again."""
        if self._log.filled and not self._fill_noted:
            self._do((Op.SET_META, LOG_FILLED, "1"))
            self._fill_noted = True

    @property
    def committed(self) -> int:
        """A count of records committed: it changes whenever anything is."""
        return self._seq

    @property
    def unsaved_commits(self) -> bool:
        """Something was committed to SQLite since the last `checkpoint`."""
        return self._database.unsaved_commits

    def checkpoint(self) -> None:
        """Copy the WAL into the database now (while the filesystem is idle), so
        that no request pays for it; not on a full disk (the database may grow)."""
        if not self.disk_full:
            self._database.checkpoint()

    @property
    def disk_full(self) -> bool:
        """SQLite's disk is full: the redo log holds what it could not take, and
        changes to the files are refused (see memfs/cache/_disk_space.py)."""
        return self._space.full

    @property
    def disk_full_reason(self) -> str | None:
        """Why changes are refused, as a sentence; None when they are not."""
        return self._space.reason if self._space.full else None

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error, RedoLogError, OSError, CacheDiskFull):
            self._apply()  # else the next open applies what is left
        self._log.close()
        self._database.close()
        self.files.close()
        self._close_folder()

    def abandon(self) -> None:
        """Close as a SIGKILL would: nothing applied, flushed or checkpointed."""
        self._log.close()
        self._database.abandon()
        self.files.close()
        self._close_folder()

    def _close_folder(self) -> None:
        if self.folder_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.folder_fd)
            self.folder_fd = -1

    # ---------------------------------------------------------------- nodes

    def nodes(self) -> Iterator[Node]:
        with self._reading():
            rows = self._database.node_rows()
        for row in rows:
            node = node_of(row)
            _note_row_name(node, self._rows_known)
            yield node

    def insert(self, node: Node) -> int:
        """Insert a new node's row; returns its id (ids are never reused)."""
        node_id = self._next_id
        self._do((Op.INSERT_NODE, node_id, *row_values(node)))
        self._next_id += 1
        _note_row_name(node, self._rows_known)
        return node_id

    def save(self, node: Node) -> None:
        """Write a node's row (leaving its name's index entry alone when the name
        is the one the row holds)."""
        if _row_named_as(node, self._rows_known):
            self._do((_SAVE_NODE_IN_PLACE, *row_values_in_place(node)))
        else:
            self._do((Op.SAVE_NODE, *row_values(node), node.id))
            _note_row_name(node, self._rows_known)

    def delete(self, node_id: int) -> None:
        self._do((Op.DELETE_NODE, node_id))

    # ----------------------------------------------------------- tombstones

    def tombstones(self) -> Iterator[Tombstone]:
        with self._reading():
            rows = self._database.tombstone_rows()
        for row in rows:
            yield Tombstone(*row)

    def add_tombstone(self, stone: Tombstone) -> None:
        self._do((Op.ADD_TOMBSTONE, stone.memory_id, stone.path, stone.base_sha, stone.deleted_at))

    def drop_tombstone(self, memory_id: str) -> None:
        self._do((Op.DROP_TOMBSTONE, memory_id))

    # -------------------------------------------------------------- uploads

    def record_upload(self, upload: Upload) -> None:
        self._do((Op.RECORD_UPLOAD, upload.node_id, upload.memory_id, upload.path, upload.sha))

    def upload_answered(self, node_id: int) -> None:
        self._do((Op.UPLOAD_ANSWERED, node_id))

    def uploads(self) -> list[Upload]:
        with self._reading():
            rows = self._database.upload_rows()
        return [Upload(*row) for row in rows]

    # ------------------------------------------------------------- contents

    def content(self, node_id: int) -> bytes | None:
        """A file's content, or None when it has no file (a cached file without one
        is empty: a new file gets its file at its first write)."""
        with self._space.as_cache_disk_full():
            return self.files.read(node_id)

    def content_size(self, node_id: int) -> int | None:
        return self.files.size(node_id)

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
        """A file's whole content, written now; its record comes with the
        transaction's, so the caller leaves `data` as it is until then."""
        self.files.put(node_id, data)
        self._do((Op.PUT_CONTENT, node_id, data))

    def write(
        self, node_id: int, offset: int, data: bytes, size: int, mtime_ns: int, undo: Undo
    ) -> None:
        """A write of `data` at `offset`, leaving the content `size` bytes long,
        changed at `mtime_ns` (its change time too): the bytes go to the content
        file, then one record holds them (so, not inside a transaction). When
        either fails, the file is put back as `undo` says."""
        self._patch_file(node_id, (_PATCH, node_id, offset, size, data), mtime_ns, undo)

    def truncate(self, node_id: int, size: int, mtime_ns: int, undo: Undo) -> None:
        """A content cut or grown to `size` bytes, as `write` does."""
        self._patch_file(node_id, (_PATCH, node_id, size, size, b""), mtime_ns, undo)

    def _patch_file(self, node_id: int, patch: Operation, mtime_ns: int, undo: Undo) -> None:
        _, _, offset, size, data = patch
        try:
            self.files.patch(node_id, offset, data, size, exact=not data)
            self._do(patch, (_WRITTEN, size, mtime_ns, mtime_ns, node_id))
        except BaseException:
            with contextlib.suppress(OSError, CacheDiskFull):
                self.files.patch(node_id, undo.offset, undo.data, undo.size, exact=True)
            raise

    def drop_content(self, node_id: int) -> None:
        """The content goes (its file once the rows saying so are applied)."""
        self.files.drop_later(node_id)

    def sweep_contents(self, keep: set[int]) -> None:
        """Take away the content files of every node but those in `keep`."""
        self.files.sweep(keep)

    # ----------------------------------------------------------------- meta

    def get_meta(self, key: str) -> str | None:
        """A meta value, from a record not applied yet if one holds it."""
        logged = self._logged_meta.get(key)
        if logged is None or logged[0] <= self._database.applied:
            return self._database.meta(key)
        return logged[1]

    def set_meta(self, key: str, value: str | None) -> None:
        """Keep a meta value; an unchanged one commits nothing, outside a
        transaction (inside, what it set so far is not readable yet)."""
        if self.in_transaction() or self.get_meta(key) != value:
            self._do((Op.SET_META, key, value))


def _note_row_name(node: Node, known: int) -> None:
    """The journal's row of `node` holds its parent and name (`Live.row_known`)."""
    live = node.live
    live.row_parent, live.row_name, live.row_known = node.parent, node.name, known


def _row_named_as(node: Node, known: int) -> bool:
    """Whether the journal's row of `node` holds its parent and name."""
    live = node.live
    return live.row_known == known and live.row_parent == node.parent and live.row_name == node.name
