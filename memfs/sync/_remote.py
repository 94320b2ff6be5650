"""Remote change detection: what changed in the store since the last pass.

Normally the version feed since the last version seen (`created_at[gte]`,
skipping the ids already seen at that instant): one request when nothing
happened. A full listing in the basic view heals what a feed can miss: at
mount, after a conflict, every `full_listing_every` passes, and for good once
the store refuses the feed (400, 401, 403 or 404 while listings work: the
feed is an optimisation, never a requirement).

A listing of a large store is read by top-level folder, in parallel
(`_listing`). A memory a listing does not show is not taken as deleted on that word alone:
a memory moved while the pages were read can be missing from every page. It
is deleted only once the store confirms it (`GET` by id answers 404); a
memory found so is taken at the path and sha the store gives.
"""

from __future__ import annotations

from collections.abc import Iterable

from .._exceptions import (
    AuthenticationFailed,
    BillingError,
    InvalidRequest,
    NotFound,
    PermissionDenied,
    StatusError,
)
from ..api import MemoryVersion
from ._listing import list_whole_store
from ._part import Part, Shared, each, log
from ._reports import FollowMode
from ._rules import DEFAULT_CONCURRENCY, FINAL_CONCURRENCY
from ._store_api import RemoteMemory

FEED_START = "1970-01-01T00:00:00Z"
"""The feed position of a store that has no versions yet: every later version is new."""
FEED_REFUSALS = (InvalidRequest, AuthenticationFailed, BillingError, PermissionDenied, NotFound)
"""Answers to the version feed that mean "not for this token": listings instead."""

FeedHead = tuple[str | None, list[str]]
"""The newest version's time and the ids seen at that instant (None: unknown)."""


class RemoteChanges(Part):
    """Reads what changed in the store, by feed or by listing."""

    def __init__(
        self,
        shared: Shared,
        *,
        full_listing_every: int = 40,
        listing_concurrency: int = FINAL_CONCURRENCY,
    ) -> None:
        self.listing_concurrency = listing_concurrency
        super().__init__(shared)
        self.full_listing_every = full_listing_every
        self._passes_since_listing = 0

    async def read(self, *, full: bool) -> tuple[dict[str, RemoteMemory], FeedHead, bool]:
        """What changed, the new feed head, and whether it was a full listing."""
        self._passes_since_listing += 1
        listing = (
            full
            or self.ledger.need_listing
            or self.status.mode is FollowMode.LISTING
            or self._passes_since_listing >= self.full_listing_every
        )
        if not listing:
            try:
                remote, head = await self._feed()
                return remote, head, False
            except FEED_REFUSALS as e:
                remote, head = await self.listing(feed_refused=e)
                return remote, head, True
        remote, head = await self.listing()
        return remote, head, True

    def listed(self) -> None:
        """A listing was applied: the next ones wait for their turn."""
        self.ledger.need_listing = False
        self._passes_since_listing = 0

    def save_head(self, head: FeedHead) -> None:
        ts, ids = head
        if ts is None:
            return
        self.cache.set_meta("feed_ts", ts)
        self.cache.set_meta("feed_ids", ",".join(ids))

    async def _feed_head(self) -> FeedHead:
        page = await self.client.list_versions_page(self.store_id, limit=1)
        if not page.data:
            return FEED_START, []
        return page.data[0].created_at, [page.data[0].id]

    async def listing(
        self, *, feed_refused: StatusError | None = None
    ) -> tuple[dict[str, RemoteMemory], FeedHead]:
        """Everything the store holds, against everything the cache knows."""
        head: FeedHead = (None, [])
        if self.status.mode is FollowMode.FEED and feed_refused is None:
            try:
                head = await self._feed_head()
            except FEED_REFUSALS as e:
                feed_refused = e
        listing = await list_whole_store(self.client, self.store_id, self.listing_concurrency)
        remote = listing.memories
        for memory_id in listing.doubtful:
            del remote[memory_id]
        if feed_refused is not None and self.status.mode is FollowMode.FEED:
            self._follow_by_listings(feed_refused)
        known: Iterable[str] = [*self.cache.by_memory_id(), *self.cache.tombstones]
        missing = sorted({m for m in known if m not in remote} | listing.doubtful)
        await each(missing, lambda m: self._confirm(m, remote), DEFAULT_CONCURRENCY)
        return remote, head

    async def _confirm(self, memory_id: str, remote: dict[str, RemoteMemory]) -> None:
        """A memory known here that the listing did not show: deleted only when
        the store says so by id; otherwise as the store holds it now."""
        try:
            m = await self.client.get_memory(self.store_id, memory_id, view="basic")
        except NotFound:
            remote[memory_id] = RemoteMemory(memory_id, deleted=True)
            return
        remote[memory_id] = RemoteMemory.of(m)

    def _follow_by_listings(self, refusal: StatusError) -> None:
        """Listings work and the feed does not: follow the store by listings."""
        self.status.mode = FollowMode.LISTING
        self.status.mode_reason = (
            f"the version feed was refused ({refusal.status} {refusal.error_type})"
        )
        log.warning(
            "the version feed of %s is refused (%s); following the store by listings "
            "from now on (one request per 100 memories a pass)",
            self.store_id,
            refusal,
            extra={"event": "feed_refused"},
        )

    async def _feed(self) -> tuple[dict[str, RemoteMemory], FeedHead]:
        """Memories changed since the last version seen, newest state of each."""
        since = self.cache.get_meta("feed_ts")
        if since is None:
            return await self.listing()
        seen = set((self.cache.get_meta("feed_ids") or "").split(",")) - {""}
        versions: list[MemoryVersion] = []
        page_token = None
        while True:
            page = await self.client.list_versions_page(
                self.store_id, created_at_gte=since, limit=100, page=page_token
            )
            versions += page.data
            if not page.next_page:
                break
            page_token = page.next_page
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
            remote[memory_id] = await self._state_of(memory_id, v)
        return remote, head

    async def _state_of(self, memory_id: str, v: MemoryVersion) -> RemoteMemory:
        if v.operation == "deleted":
            return RemoteMemory(memory_id, deleted=True)
        if v.path is not None and v.content_sha256 is not None:
            return RemoteMemory(memory_id, v.path, v.content_sha256, v.content_size_bytes or 0)
        # A redacted version says nothing: ask the memory itself.
        try:
            m = await self.client.get_memory(self.store_id, memory_id, view="basic")
        except NotFound:
            return RemoteMemory(memory_id, deleted=True)
        return RemoteMemory.of(m)
