"""Which clean contents may be evicted: an LRU within the cache's size budget.

Contents themselves are rows of the journal (memfs/cache/_journal.py).
"""

from __future__ import annotations

from collections.abc import Callable

import cachetools


class EvictingLRU(cachetools.LRUCache[int, int]):
    """node id -> size in bytes; evicting calls back so the content goes."""

    def __init__(self, maxsize: int, on_evict: Callable[[int], None]) -> None:
        super().__init__(maxsize=maxsize, getsizeof=lambda size: max(1, size))
        self._on_evict = on_evict

    def popitem(self) -> tuple[int, int]:
        key, value = super().popitem()
        self._on_evict(key)
        return key, value
