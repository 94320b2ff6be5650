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

from collections.abc import Callable

import cachetools

from .._exceptions import CacheCorrupt
from ._journal import Journal
from ._node import Node


class EvictingLRU(cachetools.LRUCache[int, int]):
    """node id -> size in bytes; evicting calls back so the content goes."""

    def __init__(self, maxsize: int, on_evict: Callable[[int], None]) -> None:
        super().__init__(maxsize=maxsize, getsizeof=lambda size: max(1, size))
        self._on_evict = on_evict

    def popitem(self) -> tuple[int, int]:
        key, value = super().popitem()
        self._on_evict(key)
        return key, value


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
        self._evictable[node.id] = node.size

    def kept(self, node: Node) -> None:
        """The file is edited, open or gone: its content is never evicted."""
        self._evictable.pop(node.id, None)

    def touch(self, node: Node) -> None:
        """The file was used: the last to be evicted."""
        if node.id in self._evictable:
            self._evictable[node.id] = self._evictable[node.id]

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
