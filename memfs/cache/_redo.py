"""The journal's redo log: how a change is committed without an SQLite commit.

A change the filesystem makes (a new file, a write's content, a rename) is
committed by appending one record to this file with one `pwritev`: once the
call returns, the bytes are the kernel's, and a SIGKILL of memfs cannot take
them back. `flush()` (one `fdatasync`) makes every record so far durable,
which is what `fsync()` promises. The journal applies the records to SQLite
later, many in one transaction, while the filesystem is idle; then the log
starts again from its beginning.

A record: a header (`HEADER`: the log's id, its sequence number, the lengths
of its two parts, a CRC-32 of all of it), the operations (versioned JSON,
documented in memfs/cache/_records.py), and the contents the operations
carry, one after the other. Reading the log back (`records`) follows the
chain of sequence numbers from offset 0 and stops at the first record that
is torn, foreign (another journal's log), stale (applied already) or out of
sequence: what follows it was never acknowledged by a `flush()` that
returned, or is applied already.

Opening (`recover`) reads the chain the same way and then says how the log
ends after it (`LogEnd`): a kill leaves zeros, an earlier cycle's records or
the record it interrupted, with nothing of the chain after them; damage is an
intact record of the chain after one that breaks it (searched for by its
header's bytes), or a chain that runs into the end of a file shorter than it
was made. The journal tells them apart and names what damage lost.

The file is preallocated (`CAPACITY`) and, once per log, filled with zeros by
a thread of its own (`start_filling`, none of it in a request), so that
records overwrite blocks the file already has, which a flush writes with
less work than blocks it must allocate (bench/README.md has the figures).
The thread writes from the end
down, and only past the next record's place, never over a record: the two
take turns under one lock.
"""

from __future__ import annotations

import contextlib
import enum
import os
import struct
import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from ._records import CONTENT_OPS, Operation, decode, encode

CAPACITY = 16 * 1024 * 1024
"""Bytes of records the log holds before the journal applies them (a record that
would not fit makes it apply first, in the request that writes it)."""

HEADER = struct.Struct("<8sQIII")
"""log id, sequence number, length of the operations, length of the contents, CRC-32."""
_HEAD = struct.Struct("<8sQII")
_CRC = struct.Struct("<I")

_FILL_CHUNK = 1024 * 1024
_READ_CHUNK = 256 * 1024
"""Records are read back this much at a time (a log of small records is one
`pread` per chunk, not two per record)."""
_SCAN_CHUNK = 1024 * 1024
"""The rest of the log is searched this much at a time, for records past a damaged one."""
_MOST_BREAKS = 64
"""Damaged records past which the chain is looked for again."""


class RedoLogError(Exception):
    """The log could not be written (the caller maps the OSError it wraps)."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


class RedoLog:
    """One journal's redo log, at `path`, written by this process alone."""

    def __init__(self, path: str, log_id: bytes, *, dir_fd: int | None = None) -> None:
        """`dir_fd`: a descriptor of the folder `path` is in, checked by the
        caller; the log is then opened relative to it (by its name alone)."""
        self.path = path
        self.log_id = log_id
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
        name = path if dir_fd is None else os.path.basename(path)
        self.fd = os.open(name, flags, 0o600, dir_fd=dir_fd)
        self.offset = 0
        """Where the next record goes; records before it are not applied yet."""
        self._unflushed = False
        self._lock = threading.Lock()
        """Taken by each record's write and each chunk of the filling."""
        self._filler: threading.Thread | None = None
        self.filled = False
        """The filling thread wrote the whole space and flushed it."""
        self.size_at_open = os.fstat(self.fd).st_size
        """The file's size as it was found, before it was preallocated again."""
        with contextlib.suppress(OSError):  # a filesystem without fallocate grows the file
            if self.size_at_open < CAPACITY:
                os.posix_fallocate(self.fd, 0, CAPACITY)

    def close(self) -> None:
        if self._filler is not None:
            self._filler.join()
        with contextlib.suppress(OSError):
            os.close(self.fd)

    def start_filling(self) -> None:
        """Write zeros over the space past the next record, from the end down, in a
        thread, and flush them: `filled` says when that is done."""
        self._filler = threading.Thread(target=self._fill, name="memfs-redo-fill", daemon=True)
        self._filler.start()

    def _fill(self) -> None:
        zeros = bytes(_FILL_CHUNK)
        try:
            for at in range(CAPACITY - _FILL_CHUNK, -1, -_FILL_CHUNK):
                with self._lock:
                    if at < self.offset:
                        break
                    os.pwrite(self.fd, zeros, at)
            os.fdatasync(self.fd)
        except OSError:
            return  # the flushes of records cost a little more, nothing else
        self.filled = True

    def append(
        self, seq: int, ops: list[Operation], contents: list[bytes | bytearray], size: int
    ) -> None:
        """Write one record after the others (`size`: the contents' length). Raises
        RedoLogError, and then the record is not part of the log (what follows
        the last record is never read back)."""
        encoded = encode(ops)
        head = _HEAD.pack(self.log_id, seq, len(encoded), size)
        crc = zlib.crc32(encoded, zlib.crc32(head))
        for c in contents:
            crc = zlib.crc32(c, crc)
        parts = [head, _CRC.pack(crc), encoded, *contents]
        with self._lock:
            try:
                written = os.pwritev(self.fd, parts, self.offset)
            except OSError as e:
                raise RedoLogError(e) from e
            if written != HEADER.size + len(encoded) + size:
                raise RedoLogError(OSError(f"short write to {self.path}"))
            self.offset += written
        self._unflushed = True

    def flush(self) -> None:
        """Make every record written so far durable (nothing to do when none was)."""
        if not self._unflushed:
            return
        try:
            os.fdatasync(self.fd)
        except OSError as e:
            raise RedoLogError(e) from e
        self._unflushed = False

    def continue_at(self, offset: int) -> None:
        """The next record goes at `offset`: the records before it (a kill's
        chain the journal could not apply) are kept, not applied yet."""
        with self._lock:
            self.offset = offset

    def clear_after(self, offset: int) -> None:
        """Write zeros over the log from `offset` to its end, and flush them: what
        damage left past the chain is then never read again (a later record
        with its number would follow the chain). Nothing when it cannot be done
        (the flush of a later record will fail too)."""
        zeros = bytes(_FILL_CHUNK)
        end = max(os.fstat(self.fd).st_size, CAPACITY)
        try:
            with self._lock:
                for at in range(offset, end, _FILL_CHUNK):
                    os.pwrite(self.fd, zeros[: min(_FILL_CHUNK, end - at)], at)
            os.fdatasync(self.fd)
        except OSError:
            return

    def restart(self) -> None:
        """The next record goes to the start again: every record is applied, and what
        applied them is durable (the caller made it so)."""
        with self._lock:
            self.offset = 0
        self._unflushed = False

    def records(self, after: int) -> Iterator[tuple[int, list[Operation]]]:
        """The records of the chain that follows sequence number `after`, in order,
        each as (seq, operations), a content operation's length replaced by the
        content itself."""
        for record in self._chain(_Reader(self.fd), 0, after + 1):
            yield record.seq, record.ops

    def recover(self, after: int) -> tuple[list[ChainRecord], LogEnd]:
        """What opening finds: the chain that follows `after` (as `records`, with
        where each record's contents are), and how the log ends after it
        (`LogEnd`), for the journal to tell a clean end from damage."""
        reader = _Reader(self.fd)
        walk = self._chain(reader, 0, after + 1)
        chain = list(walk)
        at, expected, found = walk.at, walk.seq, walk.end
        assert found is not None
        size = self.size_at_open
        partial = None
        if found.kind in (_Kind.CUT, _Kind.DAMAGED) and found.seq == expected:
            partial = found.ops
        later: list[tuple[int, list[Operation]]] = []
        if found.kind is _Kind.INTACT and found.seq > expected:
            later = self._chain_from(reader, at, found.seq)
        elif found.kind is not _Kind.END:
            later = self._later_records(reader, at, expected, size)
        end = LogEnd(
            at=at,
            expected=expected,
            size=size,
            cut=at + HEADER.size > size
            or (
                found.kind in (_Kind.CUT, _Kind.DAMAGED)
                and found.seq == expected
                and found.next_at > size
            ),
            partial=partial,
            later=later,
        )
        return chain, end

    def _later_records(
        self, reader: _Reader, at: int, expected: int, size: int
    ) -> list[tuple[int, list[Operation]]]:
        """The intact records of this log's chain that lie past a record that
        breaks it at `at` (numbered `expected`): the record after a damaged one
        is numbered one more, and its header (the log's id and that number) is
        looked for as bytes; the chain is followed from each found, and past
        a damaged one again. Stale records (numbered less) never match."""
        later: list[tuple[int, list[Operation]]] = []
        for _ in range(_MOST_BREAKS):
            hit = self._find_record(expected + 1, at + 1, size)
            if hit is None:
                break
            head = reader.read(hit, HEADER.size)
            if len(head) < HEADER.size or HEADER.unpack(head)[1] != expected + 1:
                at = hit
                continue
            found = self._record_at(reader, hit)
            if found.kind is not _Kind.INTACT or found.seq != expected + 1:
                at = hit
                continue
            chain = self._chain_from(reader, hit, expected + 1)
            later += chain
            at = hit
            expected = chain[-1][0] + 1
        return later

    def _chain_from(self, reader: _Reader, at: int, seq: int) -> list[tuple[int, list[Operation]]]:
        return [(record.seq, record.ops) for record in self._chain(reader, at, seq)]

    def _chain(self, reader: _Reader, at: int, seq: int) -> _Chain:
        return _Chain(lambda offset: self._record_at(reader, offset), at, seq)

    def _find_record(self, seq: int, start: int, size: int) -> int | None:
        """The first offset at or after `start` where a header of this log that
        may be numbered `seq` begins (the caller checks the rest). The bytes
        looked for are the log's id and the number's lowest byte: a search
        whose last byte is zero crawls over the zeros of a log's unwritten
        space, so then the id alone."""
        pattern = self.log_id + bytes([seq & 0xFF])
        if not pattern[-1]:
            pattern = self.log_id
        at = start
        while at < size:
            chunk = os.pread(self.fd, _SCAN_CHUNK + len(pattern) - 1, at)
            if len(chunk) < len(pattern):
                return None
            i = chunk.find(pattern)
            if i >= 0:
                return at + i
            at += _SCAN_CHUNK
        return None

    def _record_at(self, reader: _Reader, at: int) -> _Found:
        """What stands at offset `at`: an intact record of this log (its
        operations, a content operation's length replaced by the content), a
        record of this log cut by the end of the file or failing its check (its
        operations when they can still be read), the end of the file, or
        something else (zeros, another log's bytes, the middle of an old record)."""
        head = reader.read(at, HEADER.size)
        if len(head) < HEADER.size:
            return _Found(_Kind.END if not head else _Kind.CUT, 0, None, at)
        log_id, seq, ops_size, contents_size, crc = HEADER.unpack(head)
        if log_id != self.log_id:
            return _Found(_Kind.OTHER, 0, None, at)
        body = reader.read(at + HEADER.size, ops_size + contents_size)
        next_at = at + HEADER.size + ops_size + contents_size
        ops = decode(body[:ops_size]) if len(body) >= ops_size else None
        if len(body) != ops_size + contents_size:
            return _Found(_Kind.CUT, seq, ops, next_at)
        if zlib.crc32(body, zlib.crc32(head[:-4])) != crc or ops is None:
            return _Found(_Kind.DAMAGED, seq, ops, next_at)
        content_at = ops_size
        for i, op in enumerate(ops):
            if op[0] in CONTENT_OPS:
                length = op[-1]
                ops[i] = (*op[:-1], body[content_at : content_at + length])
                content_at += length
        return _Found(_Kind.INTACT, seq, ops, next_at)


class _Kind(enum.Enum):
    INTACT = "intact"
    DAMAGED = "damaged"
    """A record of this log whose bytes fail its check."""
    CUT = "cut"
    """A record (or a header) the end of the file cuts short."""
    END = "end"
    """The end of the file, exactly."""
    OTHER = "other"
    """Zeros, another log's record, the middle of an old record."""


@dataclass
class _Found:
    kind: _Kind
    seq: int
    ops: list[Operation] | None
    next_at: int


class ChainRecord(NamedTuple):
    """One record of the chain opening found: its number and its operations (a
    content operation's length replaced by the content)."""

    seq: int
    ops: list[Operation]


class _Chain:
    """The chain of a log's records from offset `at` on, numbered from `seq`
    on: iterating yields its intact records in order; once it stops, `at` is
    the offset past the last of them, `seq` the number the next would have
    had, and `end` what stands at `at` instead (what breaks the chain)."""

    def __init__(self, record_at: Callable[[int], _Found], at: int, seq: int) -> None:
        self.record_at = record_at
        self.at, self.seq = at, seq
        self.end: _Found | None = None

    def __iter__(self) -> Iterator[ChainRecord]:
        while True:
            found = self.end = self.record_at(self.at)
            if found.kind is not _Kind.INTACT or found.seq != self.seq:
                return
            assert found.ops is not None
            yield ChainRecord(found.seq, found.ops)
            self.at, self.seq = found.next_at, self.seq + 1


class _Reader:
    """`pread` through a buffer: a log of small records is one read per chunk."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer, self.at = b"", 0

    def read(self, start: int, size: int) -> bytes:
        if not self.at <= start <= start + size <= self.at + len(self.buffer):
            self.buffer, self.at = os.pread(self.fd, max(size, _READ_CHUNK), start), start
        return self.buffer[start - self.at : start - self.at + size]


@dataclass(frozen=True)
class LogEnd:
    """How the log ends after the chain a kill left: the facts the journal
    needs to tell the normal end of a log from damage.

    A kill leaves the chain followed by zeros (space never written), the bytes
    of an earlier cycle's records (stale: numbered at most the last one
    applied) or the record it interrupted, cut short or failing its check,
    with nothing of the chain after it. Damage is a record that fails its
    check while intact records numbered after it follow (`later`), or the
    chain running into the end of a file that is shorter than it was made
    (`cut`, `size`)."""

    at: int
    """The offset past the chain's last record."""
    expected: int
    """The number the next record of the chain would have had."""
    size: int
    """The file's size as it was found."""
    cut: bool
    """The chain ran into the end of the file as it was found (exactly, or in a
    record)."""
    partial: list[Operation] | None
    """The operations of the record at `at` when it is the one expected but cut
    short or failing its check, and its operations can still be read."""
    later: list[tuple[int, list[Operation]]]
    """Intact records of this log numbered past `expected` found after `at`."""
