"""Whether the disk of a cache's journal has room: the journal's full-disk mode.

A content file that meets a full disk gets the room the cache keeps allocated
(`RESERVE`, the file `room`), given back then, and is written again (`run`);
the disk is full from then on, as it is when opening finds no room to keep.
SQLite's disk full (at open, when the redo log is applied, inside a batch):
the redo log's space is preallocated, so records still go there; they stay
in the log (reads see them applied), and `full` says so, logged when it
begins (`cache_disk_full`) and ends (`cache_disk_room`). The filesystem then
refuses changes with ENOSPC, so that the log's room goes to the sync. The
journal tries again once the disk seems to have room (`has_room`), or every
`RETRY_FULL` seconds (`retry_due`).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

from .._exceptions import CacheDiskFull
from .._private import open_file_at
from ._redo import RedoLogError

log = logging.getLogger("memfs.cache")

ROOM_MARGIN = 1024 * 1024
"""Free bytes, beyond twice what the log holds, that say a full disk has room again."""
RETRY_FULL = 30.0
"""Seconds between tries to apply the log on a disk that seems full still."""
RESERVE = 2 * 1024 * 1024
"""Bytes kept allocated for the content files, given back when the disk fills."""
RESERVE_NAME = "room"

T = TypeVar("T")


def _no_space(e: OSError) -> bool:
    return e.errno in (errno.ENOSPC, errno.EDQUOT)


class DiskSpace:
    """The full-disk state of the journal at `path`, whose folder is `folder_fd`."""

    def __init__(self, path: str, folder_fd: int | None) -> None:
        self.folder = os.path.dirname(path)
        self.folder_fd = folder_fd
        self.full = False
        """SQLite could not take the log's records for lack of space: they stay in the log."""
        self._tried = 0.0
        if not self._reserve():
            self.now_full()

    @property
    def reason(self) -> str:
        return f"the disk of the cache at {self.folder} is full"

    def now_full(self) -> None:
        """SQLite's disk is full: said once, until it has room again."""
        self._tried = time.monotonic()
        if self.full:
            return
        self.full = True
        log.warning(
            "%s: changes to the files are refused (ENOSPC) until space is freed; "
            "the files can still be read, and what the cache holds is still uploaded",
            self.reason,
            extra={"event": "cache_disk_full"},
        )

    def room_again(self) -> None:
        if not self.full or not self._reserve():
            return
        self.full = False
        log.info(
            "the disk of the cache at %s has room again: changes are taken again",
            self.folder,
            extra={"event": "cache_disk_room"},
        )

    def has_room(self, logged: int) -> bool:
        """The disk seems to have room for the `logged` bytes of the log: twice
        them and a margin (what applying them writes to the WAL, and more)."""
        try:
            if self.folder_fd is not None:
                st = os.fstatvfs(self.folder_fd)
            else:
                st = os.statvfs(self.folder or ".")
        except OSError:
            return True
        return st.f_bavail * st.f_frsize >= 2 * logged + ROOM_MARGIN

    def retry_due(self, logged: int) -> bool:
        """Whether to try the full disk again now: it seems to have room, or
        `RETRY_FULL` seconds went by since the last try (this one counts)."""
        if not self.has_room(logged) and time.monotonic() - self._tried < RETRY_FULL:
            return False
        self._tried = time.monotonic()
        return True

    @contextlib.contextmanager
    def as_cache_disk_full(self) -> Iterator[None]:
        """The one place a full disk (SQLite's, the redo log's or a content file's
        ENOSPC) becomes the cache's `CacheDiskFull`; another failure of the log,
        its OSError."""
        try:
            yield
        except sqlite3.Error as e:
            if e.sqlite_errorcode == sqlite3.SQLITE_FULL:
                self.now_full()
                raise CacheDiskFull(self.reason) from e
            raise
        except RedoLogError as e:
            raise self.log_failure(e) from e
        except OSError as e:
            if not _no_space(e):
                raise
            self.now_full()
            raise CacheDiskFull(self.reason) from e

    def run(self, change: Callable[..., T], *args: object) -> T:
        """`change(*args)`, a change to a content file that may be done twice:
        on a full disk, done again once the room kept is given back (then, or
        when none is left, `CacheDiskFull`)."""
        try:
            return change(*args)
        except OSError as e:
            if not _no_space(e):
                raise
            given_back = self._give_back()
            self.now_full()
            if not given_back:
                raise CacheDiskFull(self.reason) from e
        try:
            return change(*args)
        except OSError as e:
            if not _no_space(e):
                raise
            raise CacheDiskFull(self.reason) from e

    def _reserve(self) -> bool:
        """Keep `RESERVE` bytes allocated; False when the disk has no room for them."""
        if self.folder_fd is None:
            return True
        try:
            fd = open_file_at(self.folder_fd, RESERVE_NAME, os.O_WRONLY | os.O_CREAT)
            try:
                os.posix_fallocate(fd, 0, RESERVE)
            finally:
                os.close(fd)
        except OSError as e:
            return not _no_space(e)
        return True

    def _give_back(self) -> bool:
        """Free the room kept allocated; False when it was gone already."""
        if self.folder_fd is None:
            return False
        try:
            os.unlink(RESERVE_NAME, dir_fd=self.folder_fd)
        except OSError:
            return False
        return True

    def log_failure(self, e: RedoLogError) -> Exception:
        """What a failed write or flush of the redo log is to the cache's callers."""
        if _no_space(e.error):
            return CacheDiskFull(self.reason)
        return e.error
