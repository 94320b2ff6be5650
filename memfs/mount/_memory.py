"""Giving the memory a store process freed back to the system.

A store's first download parses thousands of memories in pages, and reading
every file through the mount passes every content through memory; Python and
the C allocator keep what those used once it is freed, so the process would
stay as large as it was at its busiest. So, once the download is done
(`give_back_freed_memory`: the garbage that refers to itself, as httpx's
answers do, collected first) and whenever the filesystem falls quiet after
answering requests (`FreedMemory.run`), the C library is asked to return its
free pages (`malloc_trim`, glibc's; elsewhere nothing is asked). Measured:
bench/README.md, "A store process's memory".
"""

from __future__ import annotations

import ctypes
import gc
from collections.abc import Callable

import trio

from .._private import libc_function

QUIET_AFTER = 5.0
"""Seconds without a request after which the filesystem is quiet."""

_TRIM = libc_function("malloc_trim", [ctypes.c_size_t])
"""glibc's `malloc_trim`, or None elsewhere."""


def _trim() -> None:
    if _TRIM is not None:
        _TRIM(0)


def give_back_freed_memory() -> None:
    """Collect the garbage, then return the allocator's free pages."""
    gc.collect()
    _trim()


class FreedMemory:
    """Returns the allocator's free pages once the filesystem is quiet after
    answering requests; `requests` counts the requests answered so far."""

    def __init__(self, requests: Callable[[], int]) -> None:
        self._requests = requests

    async def run(self) -> None:
        seen, given_back = self._requests(), True
        while True:
            await trio.sleep(QUIET_AFTER)
            now = self._requests()
            if now != seen:
                seen, given_back = now, False
            elif not given_back:
                _trim()
                given_back = True
