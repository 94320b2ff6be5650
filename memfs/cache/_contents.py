"""What the files hold: one part of a store's cache, with its one index.

A file's content is a row of the journal (`Journal.content`, `put_content`),
and an open file's content is held in memory as well (`Live.data`), so that
reads never touch the disk. Clean contents are evicted least recently used
within a size budget; an edited content and an open file never are. Which
contents may be evicted is this part's index, and nothing else changes it:
the cache says when a file becomes clean (`evictable`) or not (`kept`). The
content rows of deleted files go while the filesystem is idle (`drop_deleted`).

A file's `cached` flag and its row go together: a cached file without a row
reads as empty, a file that is not cached has no row.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from .._exceptions import CacheCorrupt
from ._journal import Journal
from ._node import Node


class EvictingLRU:
    """node id -> size in bytes, the least recently used first; past the budget
    the oldest go, each through `on_evict`, but never the one just put (a
    content larger than the whole budget stays until the next one comes).

    One ordered dict, whose order is the order of use: a store's every clean
    file is here, so it costs half of cachetools' three maps (~0.1 MiB less for
    2,000 files), and every step is O(1)."""

    __slots__ = ("_sizes", "_total", "_budget", "_on_evict")

    def __init__(self, budget: int, on_evict: Callable[[int], None]) -> None:
        self._sizes: OrderedDict[int, int] = OrderedDict()
        self._total = 0
        self._budget = budget
        self._on_evict = on_evict

    def put(self, key: int, size: int) -> None:
        """Add or refresh `key`, as the most recently used."""
        self.pop(key)
        self._sizes[key] = size = max(1, size)
        self._total += size
        while self._total > self._budget and len(self._sizes) > 1:
            oldest, size = self._sizes.popitem(last=False)
            self._total -= size
            self._on_evict(oldest)

    def touch(self, key: int) -> None:
        """`key`, if held, becomes the most recently used."""
        if key in self._sizes:
            self._sizes.move_to_end(key)

    def pop(self, key: int) -> None:
        size = self._sizes.pop(key, None)
        if size is not None:
            self._total -= size


class Contents:
    """The contents of one store's files, through its journal; `node_of` finds
    a file by id (the tree's), for the eviction of one."""

    def __init__(
        self, journal: Journal, budget_bytes: int, node_of: Callable[[int], Node | None]
    ) -> None:
        self.journal = journal
        self._node_of = node_of
        self._evictable = EvictingLRU(budget_bytes, self._evict)
        self.dropped: list[int] = []
        """Ids of deleted files whose content rows go while the filesystem is idle
        (ids are never reused; a kill leaves them to the next open's sweep)."""

    def read(self, node: Node) -> bytes:
        """The whole local content of a cached file."""
        if node.live.data is not None:
            return bytes(node.live.data)
        content = self.journal.content(node.id)
        if content is None:
            if not node.cached:
                raise CacheCorrupt(f"{node.path} has no content in the cache")
            return b""
        return content

    def put(self, node: Node, content: bytes) -> None:
        """Replace a file's cached content (committed before this returns, unless the
        caller holds a transaction); an open file shows the new content."""
        self.journal.put_content(node.id, content)
        if node.live.data is not None:
            node.live.data = bytearray(content)

    def uncache(self, node: Node) -> None:
        """Forget a clean, closed file's content (the caller saves the file's row in
        the same transaction)."""
        if node.cached and node.live.open_count == 0:
            self.journal.drop_content(node.id)
            node.cached = False
            self.kept(node)

    # ----------------------------------------------------------- eviction

    def evictable(self, node: Node) -> None:
        """The file is clean, cached and closed: its content may be evicted."""
        self._evictable.put(node.id, node.size)

    def kept(self, node: Node) -> None:
        """The file is edited, open or gone: its content is never evicted."""
        self._evictable.pop(node.id)

    def touch(self, node: Node) -> None:
        """The file was used: the last to be evicted."""
        self._evictable.touch(node.id)

    def _evict(self, node_id: int) -> None:
        node = self._node_of(node_id)
        if node is None or node.edited or node.live.open_count > 0 or not node.cached:
            return
        node.cached = False
        with self.journal.transaction():
            self.journal.drop_content(node.id)
            self.journal.save(node)

    # ------------------------------------------------------ deleted files

    def deleted(self, node: Node) -> None:
        """The file left the tree: its row goes while the filesystem is idle."""
        self.kept(node)
        self.dropped.append(node.id)

    def drop_deleted(self, most: int | None = None) -> None:
        """Delete the content rows of deleted files (`most` of them at a time), in
        one SQLite commit of their own: nothing else runs meanwhile, and a kill
        leaves them to the next open's sweep, so they need no record of the redo
        log (nor the flush that applying one costs)."""
        if self.dropped:
            ids = self.dropped[:most]
            with self.journal.batch():
                self.journal.drop_contents(ids)
            del self.dropped[: len(ids)]
