"""What changed in the store since the last pass: the version feed, or a full basic listing at
mount, after a conflict, every `FULL_LISTING_EVERY` passes and for good once the feed is refused
(design.md, "Remote changes come from the version feed"). A memory a listing does not show, or shows
twice with different states, is deleted only once the store confirms it by id (404)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .._exceptions import (
    AuthenticationFailed,
    BillingError,
    InvalidRequest,
    NotFound,
    PermissionDenied,
    StatusError,
    StoreError,
)
from ..api import Memory, MemoryVersion
from ._shared import (
    DEFAULT_CONCURRENCY,
    FollowMode,
    Part,
    RemoteMemory,
    Shared,
    each,
    log,
    whole_store,
)

FEED_START = "1970-01-01T00:00:00Z"
"""The feed position of a store that has no versions yet."""
FEED_REFUSALS = (InvalidRequest, AuthenticationFailed, BillingError, PermissionDenied, NotFound)
"""Answers to the version feed that mean "not for this token"."""
FULL_LISTING_EVERY = 40
LISTING_PAGE = 100
MAX_PREFIX_LISTINGS = 64

FeedHead = tuple[str | None, list[str]]
"""The newest version's time and the ids seen at that instant (None: unknown)."""


@dataclass
class Listing:
    """What a listing found; `doubtful`: ids listed twice with different states."""

    memories: dict[str, RemoteMemory] = field(default_factory=dict)
    doubtful: set[str] = field(default_factory=set)

    def add(self, item: Memory) -> None:
        seen = self.memories.get(item.id)
        if seen is None:
            self.memories[item.id] = RemoteMemory.of(item)
        elif (seen.path, seen.sha) != (item.path, item.content_sha256):
            self.doubtful.add(item.id)


class RemoteChanges(Part):
    """Reads what changed in the store, by feed or by listing."""

    def __init__(self, shared: Shared, *, listing_concurrency: int) -> None:
        super().__init__(shared)
        self.listing_concurrency = listing_concurrency
        self._passes_since_listing = 0

    async def read(self, *, full: bool) -> tuple[dict[str, RemoteMemory], FeedHead, bool]:
        """What changed, the new feed head, and whether it was a full listing."""
        self._passes_since_listing += 1
        if not (
            full
            or self.ledger.need_listing
            or self.status.mode is FollowMode.LISTING
            or self._passes_since_listing >= FULL_LISTING_EVERY
        ):
            try:
                remote, head = await self._feed()
                return remote, head, False
            except FEED_REFUSALS as e:
                remote, head = await self.listing(feed_refused=e)
                return remote, head, True
        remote, head = await self.listing()
        return remote, head, True

    def applied(self, head: FeedHead, listed: bool) -> None:
        """What `read` returned was applied: keep the feed's head."""
        ts, ids = head
        if ts is not None:
            self.cache.set_meta("feed_ts", ts)
            self.cache.set_meta("feed_ids", ",".join(ids))
        if listed:
            self.ledger.need_listing = False
            self._passes_since_listing = 0

    async def listing(
        self, *, feed_refused: StatusError | None = None
    ) -> tuple[dict[str, RemoteMemory], FeedHead]:
        """Everything the store holds, against everything the cache knows."""
        head: FeedHead = (None, [])
        if self.status.mode is FollowMode.FEED and feed_refused is None:
            try:
                page = await self.client.list_versions_page(self.store_id, limit=1)
                head = (
                    (page.data[0].created_at, [page.data[0].id]) if page.data else (FEED_START, [])
                )
            except FEED_REFUSALS as e:
                feed_refused = e
        listing = await self._list_whole_store()
        remote = listing.memories
        for memory_id in listing.doubtful:
            del remote[memory_id]
        if feed_refused is not None and self.status.mode is FollowMode.FEED:
            self.status.mode = FollowMode.LISTING
            self.status.mode_reason = (
                f"the version feed was refused ({feed_refused.status} {feed_refused.error_type})"
            )
            log.warning(
                "the version feed of %s is refused (%s); following the store by listings "
                "from now on (one request per 100 memories a pass)",
                self.store_id,
                feed_refused,
                extra={"event": "feed_refused"},
            )
        known = [*self.cache.by_memory_id(), *self.cache.tombstones]
        missing = sorted({m for m in known if m not in remote} | listing.doubtful)
        await each(missing, lambda m: self._ask(m, remote), DEFAULT_CONCURRENCY)
        return remote, head

    async def _ask(self, memory_id: str, remote: dict[str, RemoteMemory]) -> None:
        remote[memory_id] = await self.one(memory_id)

    async def one(self, memory_id: str) -> RemoteMemory:
        """The store's state of one memory, by id (deleted: 404)."""
        try:
            return RemoteMemory.of(
                await self.client.get_memory(self.store_id, memory_id, view="basic")
            )
        except NotFound:
            return RemoteMemory(memory_id, deleted=True)

    async def _list_whole_store(self) -> Listing:
        out = Listing()
        rest = await self._pages(out, just_one=True)
        if rest is None:
            return out
        folders: list[str] = []
        await self._pages(out, folders=folders, path_prefix="/", depth=1)
        if len(folders) < 2 or len(folders) > MAX_PREFIX_LISTINGS:
            await self._pages(out, page=rest)
            return out
        try:
            await each(folders, lambda f: self._pages(out, path_prefix=f), self.listing_concurrency)
        except StoreError as e:
            if whole_store(e):
                raise
            await self._pages(out, page=rest)
        return out

    async def _pages(
        self,
        out: Listing,
        *,
        folders: list[str] | None = None,
        path_prefix: str | None = None,
        depth: int | None = None,
        page: str | None = None,
        just_one: bool = False,
    ) -> str | None:
        """Pages from `page` on into `out`, the subfolders a depth-1 listing
        names into `folders`; `just_one`: the cursor after one page."""
        while True:
            got = await self.client.list_memories_page(
                self.store_id,
                path_prefix=path_prefix,
                depth=depth,
                view="basic",
                limit=LISTING_PAGE,
                page=page,
            )
            for item in got.data:
                if isinstance(item, Memory):
                    out.add(item)
                elif folders is not None:
                    folders.append(item.path)
            page = got.next_page
            if not page or just_one:
                return page

    async def _feed(self) -> tuple[dict[str, RemoteMemory], FeedHead]:
        """Memories changed since the last version seen, newest state of each."""
        since = self.cache.get_meta("feed_ts")
        if since is None:
            return await self.listing()
        seen = set((self.cache.get_meta("feed_ids") or "").split(",")) - {""}
        feed = self.client.iter_versions(self.store_id, created_at_gte=since)
        versions = [v async for v in feed]
        newest: dict[str, MemoryVersion] = {}
        for v in versions:
            if v.id not in seen:
                newest.setdefault(v.memory_id, v)
        head: FeedHead = (since, sorted(seen))
        if versions:
            top = versions[0].created_at
            ids = {v.id for v in versions if v.created_at == top}
            head = (top, sorted(ids | seen if top == since else ids))
        remote: dict[str, RemoteMemory] = {}
        for memory_id, v in newest.items():
            if v.operation == "deleted":
                remote[memory_id] = RemoteMemory(memory_id, deleted=True)
            elif v.path is not None and v.content_sha256 is not None:
                remote[memory_id] = RemoteMemory(
                    memory_id, v.path, v.content_sha256, v.content_size_bytes or 0
                )
            else:  # a redacted version says nothing: ask the memory itself
                await self._ask(memory_id, remote)
        return remote, head
