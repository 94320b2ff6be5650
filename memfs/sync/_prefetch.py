"""The background download of every content not cached yet after a mount: a few one by one, many
through chains of full-view listing pages that readers take their contents from (design.md, "A large
store materialises by folder"). It waits while the cache's disk is full; a whole-store failure stops
it."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import trio

from .._exceptions import CacheError, StoreError
from ..api import Memory, content_sha256
from ..cache import Node, SyncFace
from ..client import StoreClient
from ._shared import each, log, whole_store

PREFETCH_BY_LISTING = 20
FULL_PAGE = 20
SPLIT_ABOVE = 3 * FULL_PAGE
LISTING_CONCURRENCY = 8
FULL_DISK_WAIT = 1.0
WAIT_PAGES_AHEAD = 1

Content = tuple[bytes, str]


@dataclass(eq=False)
class Chain:
    """One chain of full-view pages: a folder's subtree, or (`depth` 1) its own files."""

    prefix: str
    depth: int | None
    position: dict[str, int]
    """Memory id -> its place in the listing (subfolders count in a depth-1 one)."""
    missing: dict[str, Node]
    started: bool = False
    pages_read: int = 0
    paused: bool = False
    """Waiting for room on the cache's disk: its readers fetch for themselves."""
    done: bool = False


@dataclass(eq=False)
class Delivery:
    """A reader waiting for a page: set with the content, or None (fetch it yourself)."""

    ready: trio.Event = field(default_factory=trio.Event)
    content: Content | None = None

    def give(self, content: Content | None) -> None:
        self.content = content
        self.ready.set()


class Download:
    """The background download of one mount's missing contents."""

    def __init__(
        self,
        client: StoreClient,
        cache: SyncFace,
        *,
        concurrency: int = 4,
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        self.client = client
        self.cache = cache
        self.concurrency = max(1, concurrency)
        self.progress = progress
        self.fetched = 0
        self.total = 0
        self._queue: deque[Chain] = deque()
        self._chain_of: dict[str, Chain] = {}
        self._waiting: dict[str, Delivery] = {}
        self._nursery: trio.Nursery | None = None
        self._failure: StoreError | None = None

    async def run(self) -> int:
        """How many contents it fetched. `progress(done, total)` hears of each
        page and content (`done` may end below `total`: readers fetch some)."""
        await self._room_on_the_cache_disk()
        missing = {n.memory_id: n for n in self.cache.files() if n.memory_id and not n.cached}
        self.total = len(missing)
        self._tell()
        if len(missing) > PREFETCH_BY_LISTING:
            chains = plan_chains(self.cache, missing)
            # A chain goes when it brings more contents than it costs pages.
            self._queue.extend(c for c in chains if len(c.missing) > _pages(c))
            self._chain_of = {m: c for c in self._queue for m in c.missing}
            try:
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    for _ in range(LISTING_CONCURRENCY):
                        nursery.start_soon(self._next_chains)
            finally:
                self._nursery = None
                self._chain_of = {}
                for delivery in self._waiting.values():
                    delivery.give(None)
                self._waiting.clear()
            if self._failure is not None:
                raise self._failure
        await each([n for n in missing.values() if _missing(n)], self._one, self.concurrency)
        return self.fetched

    async def content(self, memory_id: str) -> Content | None:
        """The content of `memory_id` from the page that brings it, when a chain
        brings it soon (its chain jumps the queue); None: fetch it yourself."""
        chain = self._chain_of.get(memory_id)
        if chain is None or chain.done or chain.paused or self._nursery is None:
            return None
        if not chain.started:
            chain.started = True
            self._nursery.start_soon(self._read_chain, chain)
        if chain.position[memory_id] // FULL_PAGE > chain.pages_read + WAIT_PAGES_AHEAD:
            return None
        delivery = self._waiting.setdefault(memory_id, Delivery())
        await delivery.ready.wait()
        return delivery.content

    def _tell(self) -> None:
        if self.progress is not None:
            self.progress(self.fetched, self.total)

    async def _next_chains(self) -> None:
        while self._queue:
            chain = self._queue.popleft()
            if not chain.started:
                chain.started = True
                await self._read_chain(chain)

    async def _read_chain(self, chain: Chain) -> None:
        cursor: str | None = None
        try:
            while True:
                page = await self.client.list_memories_page(
                    self.cache.store_id,
                    path_prefix=chain.prefix,
                    depth=chain.depth,
                    view="full",
                    limit=FULL_PAGE,
                    page=cursor,
                )
                chain.pages_read += 1
                self._take(chain, [m for m in page.data if isinstance(m, Memory)])
                cursor = page.next_page
                if not cursor or not chain.missing:
                    break
                if self.cache.disk_full:
                    chain.paused = True
                    self._release(chain)
                    await self._room_on_the_cache_disk()
                    chain.paused = False
        except StoreError as e:
            if not whole_store(e):
                return  # this chain's contents come one by one at the end
            if self._failure is None:
                self._failure = e
            if self._nursery is not None:
                self._nursery.cancel_scope.cancel()
        finally:
            chain.done = True
            self._release(chain)

    def _release(self, chain: Chain) -> None:
        """The readers waiting for a page of `chain` fetch their contents themselves."""
        for memory_id in chain.missing:
            delivery = self._waiting.pop(memory_id, None)
            if delivery is not None:
                delivery.give(None)

    async def _room_on_the_cache_disk(self) -> None:
        """Wait while the cache's disk is full: the room left goes to the sync's uploads."""
        while self.cache.disk_full:
            await trio.sleep(FULL_DISK_WAIT)

    def _take(self, chain: Chain, page: list[Memory]) -> None:
        """A page's contents to the readers waiting for them; the others cached
        (a clean file whose base they match), in one transaction."""
        todo: list[tuple[Node, str, bytes]] = []
        for item in page:
            node = chain.missing.pop(item.id, None)
            if node is None:
                continue
            content = (item.content or "").encode("utf-8")
            delivery = self._waiting.pop(item.id, None)
            if delivery is not None:
                delivery.give((content, content_sha256(content)))
                self.fetched += 1
            elif content_sha256(content) == node.base_sha and _missing(node):
                todo.append((node, item.id, content))
        if todo:
            with self.cache.transaction():
                for node, memory_id, content in todo:
                    self.fetched += self.cache.install_listed(node, memory_id, content)
        self._tell()

    async def _one(self, node: Node) -> None:
        if not _missing(node):
            return
        try:
            if await self.cache.ensure_cached(node.id):
                self.fetched += 1
                self._tell()
        except CacheError as e:
            log.info("prefetch skipped: %s", e, extra={"event": "prefetch_skipped"})


def _pages(chain: Chain) -> int:
    return -(-max(1, max(chain.position.values(), default=0) + 1) // FULL_PAGE)


def _missing(node: Node) -> bool:
    return not node.cached and node.memory_id is not None


def plan_chains(cache: SyncFace, missing: dict[str, Node]) -> list[Chain]:
    """The chains of pages that bring `missing`, in path order."""
    paths: dict[str, str] = {}
    for node in cache.files():
        if node.memory_id is not None:
            paths[node.memory_id] = node.base_path or node.path
    chains: list[Chain] = []
    _cut("/", sorted(paths, key=paths.__getitem__), paths, missing, chains, split=True)
    return sorted(chains, key=lambda c: c.prefix)


def _cut(
    prefix: str,
    under: list[str],
    paths: dict[str, str],
    missing: dict[str, Node],
    chains: list[Chain],
    *,
    split: bool,
) -> None:
    """Chains for the memories `under` (ids in path order) below `prefix`: the
    subtree's, or when `split`, the folder's own files' and its subfolders'."""
    folders: dict[str, list[str]] = {}
    own: list[str] = []
    for memory_id in under:
        rest = paths[memory_id][len(prefix) :]
        cut = rest.find("/")
        if cut == -1:
            own.append(memory_id)
        else:
            folders.setdefault(prefix + rest[: cut + 1], []).append(memory_id)
    if not split or not folders:
        position = {m: i for i, m in enumerate(under)}
        chains.append(Chain(prefix, None, position, {m: missing[m] for m in under if m in missing}))
        return
    if own:
        keyed = [(paths[m], m) for m in own] + [(f, "") for f in folders]
        position = {m: i for i, (_key, m) in enumerate(sorted(keyed)) if m}
        chains.append(Chain(prefix, 1, position, {m: missing[m] for m in own if m in missing}))
    for folder, ids in folders.items():
        _cut(folder, ids, paths, missing, chains, split=len(ids) > SPLIT_ABOVE)
