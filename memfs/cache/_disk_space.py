"""The cache's full-disk mode. The cache keeps room allocated (the file `room`); a change that meets
a full disk gets that room back and is done again (`run`). From then on (or from an open with too
little room) `full` is true, logged when it begins and ends, and the filesystem refuses changes with
ENOSPC so that the room goes to the sync, until housekeeping finds room."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import sqlite3
from collections.abc import Callable, Iterator
from typing import TypeVar

from .._exceptions import CacheDiskFull
from .._private import open_file_at

log = logging.getLogger("memfs.cache")

ROOM_MARGIN = 4 * 1024 * 1024
"""Free bytes that say a full disk has room again."""
RESERVE = 2 * 1024 * 1024
RESERVE_NAME = "room"

T = TypeVar("T")


def _no_space(e: BaseException) -> bool:
    if isinstance(e, sqlite3.Error):
        return e.sqlite_errorcode == sqlite3.SQLITE_FULL
    return isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT)


class DiskSpace:
    """The full-disk state of the cache in the folder `folder_fd` (at `folder`)."""

    def __init__(self, folder: str, folder_fd: int) -> None:
        self.folder = folder
        self.folder_fd = folder_fd
        self.reason = f"the disk of the cache at {folder} is full"
        self.full = False
        if not self.has_room():
            self.now_full()
        else:
            self._reserve()

    def now_full(self) -> None:
        """The disk is full: give the room kept back, and say it once."""
        self._give_back()
        if self.full:
            return
        self.full = True
        log.warning(
            "%s: changes to the files are refused (ENOSPC) until space is freed; "
            "the files can still be read, and what the cache holds is still uploaded",
            self.reason,
            extra={"event": "cache_disk_full"},
        )

    def look_for_room(self) -> None:
        if not self.full or not self.has_room():
            return
        self.full = False
        self._reserve()
        log.info(
            "the disk of the cache at %s has room again: changes are taken again",
            self.folder,
            extra={"event": "cache_disk_room"},
        )

    def has_room(self) -> bool:
        try:
            st = os.fstatvfs(self.folder_fd)
        except OSError:
            return True
        return st.f_bavail * st.f_frsize >= ROOM_MARGIN

    def _reserve(self) -> None:
        with contextlib.suppress(OSError):
            fd = open_file_at(self.folder_fd, RESERVE_NAME, os.O_WRONLY | os.O_CREAT)
            try:
                os.posix_fallocate(fd, 0, RESERVE)
            finally:
                os.close(fd)

    def _give_back(self) -> bool:
        """False when the room was given back already."""
        try:
            os.unlink(RESERVE_NAME, dir_fd=self.folder_fd)
        except OSError:
            return False
        return True

    @contextlib.contextmanager
    def as_cache_disk_full(self) -> Iterator[None]:
        """Where a full disk (SQLite's, or a content file's ENOSPC) becomes the
        cache's `CacheDiskFull` (`run` too, when it cannot do the change again)."""
        try:
            yield
        except (sqlite3.Error, OSError) as e:
            if not _no_space(e):
                raise
            self.now_full()
            raise CacheDiskFull(self.reason) from e

    def run(self, change: Callable[..., T], *args: object, again: bool = True) -> T:
        """`change(*args)`; on a full disk, done once more if `again` (safe to repeat)
        and room was given back, else (or failing again) `CacheDiskFull`."""
        try:
            return change(*args)
        except (sqlite3.Error, OSError) as e:
            if not _no_space(e):
                raise
            given_back = again and self._give_back()
            self.now_full()
            if not given_back:
                raise CacheDiskFull(self.reason) from e
        with self.as_cache_disk_full():
            return change(*args)
