"""What the files hold. Clean contents are evicted least recently used past
`--cache-size` (a cachetools `LRUCache`); an edited or open one never is.
"""

from __future__ import annotations

from collections.abc import Callable

from cachetools import LRUCache

from .._exceptions import CacheCorrupt
from ._journal import Journal
from ._node import Node


class _Evicting(LRUCache[int, int]):
    """node id -> content size; past `maxsize` bytes the least recently used go
    through `on_evict` (never the one just put)."""

    def __init__(self, maxsize: int, on_evict: Callable[[int], None]) -> None:
        super().__init__(maxsize, getsizeof=lambda size: size)
        self._on_evict = on_evict

    def put(self, key: int, size: int) -> None:
        self.pop(key, None)
        self[key] = min(max(1, size), int(self.maxsize))

    def popitem(self) -> tuple[int, int]:
        key, size = super().popitem()
        self._on_evict(key)
        return key, size


class Contents:
    """The contents of one store's files; `node_of` finds a file by id."""

    def __init__(
        self, journal: Journal, size_bytes: int, node_of: Callable[[int], Node | None]
    ) -> None:
        self.journal = journal
        self._node_of = node_of
        self._evictable = _Evicting(size_bytes, self._evict)

    def read(self, node: Node) -> bytes:
        if node.live.data is not None:
            return bytes(node.live.data)
        if not node.cached:
            raise CacheCorrupt(f"{node.path} has no content in the cache")
        content = self.journal.content(node.id)
        return b"" if content is None else content

    def put(self, node: Node, content: bytes) -> None:
        """Replace a file's cached content; an open file shows the new one."""
        self.journal.put_content(node.id, content)
        if node.live.data is not None:
            node.live.data = bytearray(content)

    def uncache(self, node: Node) -> None:
        """Forget a clean, closed file's content (the caller saves its row)."""
        if node.cached and node.live.open_count == 0:
            self.journal.drop_content(node.id)
            node.cached = False
            self.kept(node)

    def evictable(self, node: Node) -> None:
        """The file is clean, cached and closed: its content may be evicted."""
        self._evictable.put(node.id, node.size)

    def kept(self, node: Node) -> None:
        """The file is edited, open or gone: its content is never evicted."""
        self._evictable.pop(node.id, None)

    def touch(self, node: Node) -> None:
        self._evictable.get(node.id)

    def _evict(self, node_id: int) -> None:
        node = self._node_of(node_id)
        if node is None or node.edited or node.live.open_count > 0 or not node.cached:
            return
        node.cached = False
        with self.journal.transaction():
            self.journal.drop_content(node.id)
            self.journal.save(node)

    def deleted(self, node: Node) -> None:
        self.kept(node)
        self.journal.drop_content(node.id)
