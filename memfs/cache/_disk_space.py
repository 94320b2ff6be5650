"""Whether the disk of a cache's journal has room: the journal's full-disk mode.

SQLite's disk full (at open, when the redo log is applied, inside a batch):
the redo log's space is preallocated, so records still go there; they stay
in the log (the journal answers from it), and `full` says so, logged when it
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
from collections.abc import Iterator

from .._exceptions import CacheDiskFull
from ._redo import RedoLogError

log = logging.getLogger("memfs.cache")

ROOM_MARGIN = 1024 * 1024
"""Free bytes, beyond twice what the log holds, that say a full disk has room again."""
RETRY_FULL = 30.0
"""Seconds between tries to apply the log on a disk that seems full still."""


class DiskSpace:
    """The full-disk state of the journal at `path`, whose folder is `folder_fd`."""

    def __init__(self, path: str, folder_fd: int | None) -> None:
        self.folder = os.path.dirname(path)
        self.folder_fd = folder_fd
        self.full = False
        """SQLite could not take the log's records for lack of space: they stay in the log."""
        self._tried = 0.0

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
        if not self.full:
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
        """The one place a full disk (SQLite's, or the redo log's ENOSPC) becomes
        the cache's `CacheDiskFull`; another failure of the log, its OSError."""
        try:
            yield
        except sqlite3.Error as e:
            if e.sqlite_errorcode == sqlite3.SQLITE_FULL:
                self.now_full()
                raise CacheDiskFull(self.reason) from e
            raise
        except RedoLogError as e:
            raise self.log_failure(e) from e

    def log_failure(self, e: RedoLogError) -> Exception:
        """What a failed write or flush of the redo log is to the cache's callers."""
        if e.error.errno in (errno.ENOSPC, errno.EDQUOT):
            return CacheDiskFull(self.reason)
        return e.error
