"""Prefetch: every content not cached yet, in the background after a mount.

Many missing contents come through full-view listing pages (20 a request,
each page put in place in one journal transaction); the rest one by one, a
few at a time. Between pages the download may give way to the filesystem
(`give_way`), so that a walk of a fresh mount does not wait behind it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

from .._exceptions import CacheError
from ..api import Memory, content_sha256
from ..cache import Node, SyncFace
from ._part import log
from ._store_api import StoreAPI

PREFETCH_BY_LISTING = 20
"""Above this many missing contents, prefetch reads full-view listing pages."""


async def prefetch(
    client: StoreAPI,
    cache: SyncFace,
    concurrency: int = 4,
    progress: Callable[[int, int], None] | None = None,
    give_way: Callable[[], Awaitable[None]] | None = None,
) -> int:
    """Fetch every content not cached yet; returns how many were fetched.
    `progress(done, total)` hears of each page and each content, `total`
    being the contents missing at the start (some may be fetched on first
    read meanwhile, so `done` may end below it)."""
    missing = {n.memory_id: n for n in cache.files() if not n.cached and n.memory_id is not None}
    total = len(missing)
    fetched = 0

    def tell() -> None:
        if progress is not None:
            progress(fetched, total)

    tell()
    if len(missing) > PREFETCH_BY_LISTING:
        page: list[Memory] = []
        async for item in client.iter_memories(cache.store_id, view="full", limit=20):
            if isinstance(item, Memory) and item.id in missing:
                page.append(item)
            if len(page) >= 20:
                fetched += _install_page(cache, page, missing)
                tell()
                page = []
                if give_way is not None:
                    await give_way()
        fetched += _install_page(cache, page, missing)
        tell()
    limiter = trio.CapacityLimiter(concurrency)

    async def one(node_id: int) -> None:
        nonlocal fetched
        async with limiter:
            try:
                if await cache.ensure_cached(node_id):
                    fetched += 1
                    tell()
            except CacheError as e:
                log.info("prefetch skipped: %s", e)

    async with trio.open_nursery() as nursery:
        for node in missing.values():
            if not node.cached and node.memory_id is not None:
                nursery.start_soon(one, node.id)
    return fetched


def _install_page(cache: SyncFace, page: list[Memory], missing: dict[str, Node]) -> int:
    """Cache the contents of one listing page, in one journal transaction."""
    todo: list[tuple[Node, str, bytes]] = []
    for item in page:
        node = missing.pop(item.id)
        if node.cached or node.live.fetching is not None or node.memory_id != item.id:
            continue
        content = (item.content or "").encode("utf-8")
        if content_sha256(content) == node.base_sha:
            todo.append((node, item.id, content))
        else:
            missing[item.id] = node
    installed = 0
    if todo:
        with cache.transaction():
            for node, memory_id, content in todo:
                installed += cache.install_listed(node, memory_id, content)
    return installed
