"""The journal's redo log: how a change is committed without an SQLite commit.

A change the filesystem makes (a new file, a write's content, a rename) is
committed by appending one record to this file with one `pwritev`: once the
call returns, the bytes are the kernel's, and a SIGKILL of memfs cannot take
them back. `flush()` (one `fdatasync`) makes every record so far durable,
which is what `fsync()` promises. The journal applies the records to SQLite
later, many in one transaction, while the filesystem is idle; then the log
starts again from its beginning.

A record: a header (`HEADER`: the log's id, its sequence number, the lengths
of its two parts, a CRC-32 of all of it), the operations (`marshal`), and the
contents the operations carry, one after the other. Reading the log back
(`records`) follows the chain of sequence numbers from offset 0 and stops at
the first record that is torn, foreign (another journal's log), stale (applied
already) or out of sequence: what follows it was never acknowledged by a
`flush()` that returned, or is applied already.

The file is preallocated (`CAPACITY`) and, once per log, filled with zeros by
a thread of its own (`start_filling`: ~20 ms of disk work, none of it in a
request), so that records overwrite blocks the file already has: flushing
such a file costs this kind of disk ~110 µs, against ~150 µs for one only
preallocated and ~240 µs for one that grows. The thread writes from the end
down, and only past the next record's place, never over a record: the two
take turns under one lock.

`start_writeback()` hands the records written since its last call to the disk
without waiting for them (`sync_file_range`), so that a flush that comes soon
after finds them written and has only the disk's cache left to flush. It
promises nothing: the flush alone makes records durable.
"""

from __future__ import annotations

import contextlib
import ctypes
import marshal
import os
import struct
import threading
import zlib
from collections.abc import Iterator
from typing import Any

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

Op = tuple[Any, ...]
"""One operation: its code, then its arguments (the journal gives them meaning)."""

CONTENT = "c"
"""The code of the operation whose last argument is a content carried after the
operations (in the record, the operation holds its length)."""


_SYNC_FILE_RANGE_WRITE = 2


def _sync_file_range() -> Any:
    """libc's `sync_file_range`, or None where there is none (then
    `start_writeback` does nothing)."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_START_WRITEBACK = _sync_file_range()


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
        self._written_back = 0
        """Records before this offset were handed to the disk (`start_writeback`)."""
        self._lock = threading.Lock()
        """Taken by each record's write and each chunk of the filling."""
        self._filler: threading.Thread | None = None
        self.filled = False
        """The filling thread wrote the whole space and flushed it."""
        with contextlib.suppress(OSError):  # a filesystem without fallocate grows the file
            if os.fstat(self.fd).st_size < CAPACITY:
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

    def append(self, seq: int, ops: list[Op], contents: list[bytes | bytearray], size: int) -> int:
        """Write one record after the others (`size`: the contents' length); returns
        the file offset of its first content (they follow each other). Raises
        RedoLogError, and then the record is not part of the log (what follows
        the last record is never read back)."""
        encoded = marshal.dumps(ops)
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
            first_content = self.offset + HEADER.size + len(encoded)
            self.offset += written
        self._unflushed = True
        return first_content

    def start_writeback(self) -> None:
        """Start writing the records written since the last call (or flush) to the
        disk, and return without waiting: a hint, whose errors are the flush's to
        report."""
        start, end = self._written_back, self.offset
        if end > start and _START_WRITEBACK is not None:
            _START_WRITEBACK(self.fd, start, end - start, _SYNC_FILE_RANGE_WRITE)
            self._written_back = end

    def flush(self) -> None:
        """Make every record written so far durable (nothing to do when none was)."""
        if not self._unflushed:
            return
        try:
            os.fdatasync(self.fd)
        except OSError as e:
            raise RedoLogError(e) from e
        self._unflushed = False
        self._written_back = self.offset

    def restart(self) -> None:
        """The next record goes to the start again: every record is applied, and what
        applied them is durable (the caller made it so)."""
        with self._lock:
            self.offset = self._written_back = 0
        self._unflushed = False

    def read(self, at: int, size: int) -> bytes:
        """`size` bytes of the log at `at` (a content the journal has not applied yet)."""
        return os.pread(self.fd, size, at) if size else b""

    def records(self, after: int) -> Iterator[tuple[int, list[Op]]]:
        """The records of the chain that follows sequence number `after`, in order,
        each as (seq, operations), a content operation's length replaced by the
        content itself."""
        at, expected = 0, after + 1
        buffer, buffer_at = b"", 0

        def read(start: int, size: int) -> bytes:
            nonlocal buffer, buffer_at
            if not buffer_at <= start <= start + size <= buffer_at + len(buffer):
                buffer, buffer_at = os.pread(self.fd, max(size, _READ_CHUNK), start), start
            return buffer[start - buffer_at : start - buffer_at + size]

        while True:
            head = read(at, HEADER.size)
            if len(head) < HEADER.size:
                return
            log_id, seq, ops_size, contents_size, crc = HEADER.unpack(head)
            if log_id != self.log_id or seq != expected:
                return
            body = read(at + HEADER.size, ops_size + contents_size)
            if len(body) != ops_size + contents_size:
                return
            if zlib.crc32(body, zlib.crc32(head[:-4])) != crc:
                return
            try:
                ops = marshal.loads(body[:ops_size])
            except (EOFError, ValueError, TypeError):
                return
            content_at = ops_size
            for i, op in enumerate(ops):
                if op[0] == CONTENT:
                    length = op[-1]
                    ops[i] = (*op[:-1], body[content_at : content_at + length])
                    content_at += length
            yield seq, ops
            at += HEADER.size + ops_size + contents_size
            expected += 1
