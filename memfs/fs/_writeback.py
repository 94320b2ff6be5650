"""The write-back hint: while files are being fsynced, each write's change is
handed to the disk as soon as the write is answered.

What is promised:

- While files are being fsynced (one was in the last `WRITEBACK_AFTER_FSYNC`
  seconds), each write's change is handed to the disk once the write is
  answered, while the writer is on its way to the `fsync()` that typically
  follows (an editor's save, git's objects): that `fsync()` then has only the
  disk's cache left to flush (bench/README.md has what it saves).
- It is a hint: the write that asks for it never waits for it, and what it
  fails to hand over is the next `fsync()`'s to report.
"""

from __future__ import annotations

import trio

from ..cache import FilesystemFace

WRITEBACK_AFTER_FSYNC = 1.0
"""For this many seconds after an `fsync()`, each write's change is handed to the
disk right after the write is answered."""


class WriteBackHint:
    """When a mount's writes are handed to the disk early, and the task that does it."""

    def __init__(self, cache: FilesystemFace) -> None:
        self.cache = cache
        self._fsynced_at = -WRITEBACK_AFTER_FSYNC
        self._wanted = trio.lowlevel.ParkingLot()

    def fsynced(self, at: float) -> None:
        """An `fsync()` came at `at` (time.perf_counter())."""
        self._fsynced_at = at

    def written(self, at: float) -> None:
        """A write came at `at`: hand it to the disk if files are being fsynced."""
        if at - self._fsynced_at < WRITEBACK_AFTER_FSYNC:
            self._wanted.unpark()

    async def run(self) -> None:
        """Runs while mounted: hands the changes over whenever a write asks."""
        while True:
            await self._wanted.park()
            try:
                self.cache.start_writeback()
            except Exception:  # noqa: BLE001 - a hint; the fsync reports what failed
                pass
