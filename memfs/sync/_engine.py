"""The sync pass: keep one store's cache and the Memory Store in step.

Each pass (`SyncEngine.run_pass`) does, in order:

1. Remote changes. Normally the version feed since the last version seen (one
   request when nothing happened); at mount, every `full_listing_every`
   passes, and for good once the store refuses the feed (400, 401, 403 or 404
   while listings work: the feed is an optimisation, never a requirement), a
   full listing in the basic view. Contents that must be pulled are fetched
   in parallel, then the decision table of `design.md` is applied memory by
   memory, against its base (B) and the local state (L). The store wins
   conflicts; the local version is kept as a conflict copy under the cache
   folder.
2. Own writes. Every upload is recorded durably before it is sent; a store
   found holding exactly what memfs sent (its answer was lost) is memfs's own
   change, agreed, not a conflict. Records are settled by the next look at
   the store's state and then forgotten.
3. A wipe is not a delete: when every file of a store that had more than one
   is missing at once, nothing is deleted and the files are restored.
4. Local changes, taken from what the filesystem recorded (`StoreCache.changes`
   and the pending deletes), in parallel: pushes with the base as
   precondition, moves, creates, and corroborated deletes (the window, the
   per-pass cap, a re-check just before sending, `expected_content_sha256`).
   A file still being written (open for writing, written less than
   `QUIET_SECONDS` ago) or whose last write was refused with EFBIG is not
   pushed.

Failures: the base advances only on success. Any refusal of one memory is
that memory's alone: it is recorded (a log line once, `refused()` for
status) and the pass goes on. Only whole-store conditions end a pass early
with everything kept (no answer, 401, 408, 429 or 5xx after retries); the
loop retries with backoff.

This layer never touches FUSE: what the kernel must forget goes through the
`KernelNotifier` the composition root hands in.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Protocol, TypeVar

import trio

from .._exceptions import (
    AuthenticationFailed,
    BillingError,
    CacheError,
    Conflict,
    InvalidRequest,
    NotFound,
    PathConflict,
    PermissionDenied,
    PreconditionFailed,
    RequestTooLarge,
    StatusError,
    StoreError,
    SyncError,
)
from ..api import MARKER_PATH, MAX_CONTENT_BYTES, Memory, MemoryVersion, content_sha256
from ..cache import Change, Node, StoreCache, Upload
from ..client import StoreClient

log = logging.getLogger("memfs.sync")

DELETE_WINDOW = 30.0
QUIET_SECONDS = 2.0
"""A file open for writing is pushed once no write touched it for this long."""
PREFETCH_BY_LISTING = 20
"""Above this many missing contents, prefetch reads full-view listing pages."""
FEED_START = "1970-01-01T00:00:00Z"
"""The feed position of a store that has no versions yet: every later version is new."""
DELETIONS_MODES = ("enabled", "log_only", "disabled")
DEFAULT_CONCURRENCY = 16
FINAL_CONCURRENCY = 32
"""Requests at once in a periodic pass and in the final sync."""
HOLD_FIRST = 15.0
HOLD_MAX = 600.0
"""A memory the store refused for a reason other than its content is tried
again after HOLD_FIRST seconds, doubling up to HOLD_MAX, or at once when it
changes."""
FEED_REFUSALS = (InvalidRequest, AuthenticationFailed, BillingError, PermissionDenied, NotFound)
"""Answers to the version feed that mean "not for this token": listings instead."""

T = TypeVar("T")


class KernelNotifier(Protocol):
    async def forget_content(self, inode: int) -> None: ...
    async def forget_entry(self, parent_inode: int, name: str) -> None: ...


class NoKernel:
    """The notifier while nothing is mounted: there is no kernel cache to clear."""

    async def forget_content(self, inode: int) -> None:
        return None

    async def forget_entry(self, parent_inode: int, name: str) -> None:
        return None


def delete_cap(n: int) -> int:
    """At most max(8, min(50, n/4)) deletes per pass, n the memories in the store."""
    return max(8, min(50, n // 4))


def whole_store(e: StoreError) -> bool:
    """Whether a failure concerns the store as a whole (end the pass, back off)
    rather than the one memory it was about."""
    if not isinstance(e, StatusError):
        return True
    return e.status in (401, 408, 429) or e.status >= 500


@dataclass
class _Remote:
    """What the store holds for one memory; `deleted` when it holds nothing."""

    memory_id: str
    path: str | None = None
    sha: str | None = None
    size: int = 0
    deleted: bool = False


@dataclass
class _Hold:
    """A memory the store refused for a reason other than its content."""

    gen: int
    retry_at: float
    attempts: int
    reason: str


@dataclass
class PassReport:
    """What one pass did; `error` is set when it could not finish."""

    pushed: int = 0
    pulled: int = 0
    moved: int = 0
    deleted_remote: int = 0
    removed_local: int = 0
    conflicts: int = 0
    refused: int = 0
    requests: int = 0
    full_listing: bool = False
    error: str | None = None
    finished_at: float = 0.0

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class SyncStatus:
    passes: int = 0
    failures_in_a_row: int = 0
    last: PassReport | None = None
    last_error: str | None = None
    mode: str = "feed"
    """How remote changes are followed: `feed` (the version feed) or `listing`."""
    mode_reason: str | None = None


class SyncEngine:
    """Runs sync passes for one store; one pass at a time."""

    def __init__(
        self,
        client: StoreClient,
        cache: StoreCache,
        *,
        read_only: bool = False,
        deletions: str = "enabled",
        kernel: KernelNotifier | None = None,
        full_listing_every: int = 40,
        delete_window: float = DELETE_WINDOW,
        concurrency: int = DEFAULT_CONCURRENCY,
        final_concurrency: int = FINAL_CONCURRENCY,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if deletions not in DELETIONS_MODES:
            raise ValueError(deletions)
        self.client = client
        self.cache = cache
        self.store_id = cache.store_id
        self.read_only = read_only
        self.deletions = deletions
        self.kernel: KernelNotifier = kernel or NoKernel()
        self.full_listing_every = full_listing_every
        self.delete_window = delete_window
        self.concurrency = max(1, concurrency)
        self.final_concurrency = max(1, final_concurrency)
        self.clock = clock
        self.status = SyncStatus()
        self._lock = trio.Lock()
        self._passes_since_listing = 0
        self._need_listing = True
        self._logged_deletes: set[str] = set()
        self._index: dict[str, Node] = {}
        self._index_stale = False
        cache.on_change = self._local_change
        self._first_missing: dict[str, tuple[float, float]] = {}
        """memory id -> (its pending delete's time, the first pass that saw that delete)."""
        self._holds: dict[int, _Hold] = {}
        """node id -> a refusal for another reason than the content."""
        self._delete_holds: dict[str, _Hold] = {}
        self._logged: dict[object, str] = {}
        """What was last logged for a file or memory, so each refusal is logged once."""
        self._fetched: dict[str, tuple[bytes, str]] = {}
        self._sent_by_memory: dict[str, Upload] = {}
        self._sent_creates: dict[tuple[str, str], Upload] = {}
        cache.source = self.fetch_content

    # -------------------------------------------------------------- content

    async def fetch_content(self, memory_id: str) -> tuple[bytes, str]:
        memory = await self.client.get_memory(self.store_id, memory_id, view="full")
        content = (memory.content or "").encode("utf-8")
        return content, content_sha256(content)

    async def prefetch(self, concurrency: int = 4) -> int:
        """Fetch every content not cached yet. Many missing contents come through
        full-view listing pages (20 a request); the rest one by one, a few at a
        time. Returns how many were fetched."""
        missing = {
            n.memory_id: n for n in self.cache.files() if not n.cached and n.memory_id is not None
        }
        fetched = 0
        if len(missing) > PREFETCH_BY_LISTING:
            page: list[Memory] = []
            async for item in self.client.iter_memories(self.store_id, view="full", limit=20):
                if isinstance(item, Memory) and item.id in missing:
                    page.append(item)
                if len(page) >= 20:
                    fetched += self._install_page(page, missing)
                    page = []
                    await trio.sleep(0)  # let waiting filesystem requests in between pages
            fetched += self._install_page(page, missing)
        limiter = trio.CapacityLimiter(concurrency)

        async def one(node_id: int) -> None:
            nonlocal fetched
            async with limiter:
                try:
                    if await self.cache.ensure_cached(node_id):
                        fetched += 1
                except CacheError as e:
                    log.info("prefetch skipped: %s", e)

        async with trio.open_nursery() as nursery:
            for node in missing.values():
                if not node.cached and node.memory_id is not None:
                    nursery.start_soon(one, node.id)
        return fetched

    def _install_page(self, page: list[Memory], missing: dict[str, Node]) -> int:
        """Cache the contents of one listing page, in one journal transaction."""
        installed = 0
        with self.cache.transaction():
            for item in page:
                node = missing.pop(item.id)
                if node.cached or node.fetching is not None or node.memory_id != item.id:
                    continue
                content = (item.content or "").encode("utf-8")
                if content_sha256(content) == node.base_sha:
                    self.cache.install_content(node, content, node.base_sha)
                    installed += 1
                else:
                    missing[item.id] = node
        return installed

    # --------------------------------------------------------------- passes

    async def run_pass(self, *, final: bool = False, full: bool = False) -> PassReport:
        """One whole pass; raises SyncError when the store could not be reached or refused us."""
        async with self._lock:
            report = PassReport()
            before = self.client.stats.requests
            try:
                await self._pass(report, final=final, full=full)
            except AuthenticationFailed as e:
                report.error = (
                    f"the store refused the token (401); local changes are kept: {e.message}"
                )
            except NotFound as e:
                report.error = f"store {self.store_id} was not found (404): {e.message}"
            except PermissionDenied as e:
                report.error = f"the token may not use store {self.store_id} (403): {e.message}"
            except StoreError as e:
                report.error = (
                    f"the store could not be reached or failed; local changes are kept: {e}"
                )
            except Exception as e:  # noqa: BLE001 - no failure of a pass may end the store process
                log.exception("sync pass of %s failed unexpectedly", self.store_id)
                report.error = f"the pass failed unexpectedly ({type(e).__name__}: {e}); local changes are kept"
            finally:
                report.requests = self.client.stats.requests - before
                report.finished_at = self.clock()
                self.status.passes += 1
                self.status.last = report
                self._fetched.clear()
            if report.error:
                self.status.failures_in_a_row += 1
                self.status.last_error = report.error
                log.error("sync of %s failed: %s", self.store_id, report.error)
                raise SyncError(report.error)
            self.status.failures_in_a_row = 0
            self.status.last_error = None
            return report

    def _node_for(self, memory_id: str) -> Node | None:
        """The local file of a memory, from the index built at the start of the pass."""
        node = self._index.get(memory_id)
        if (
            node is None
            or node.memory_id != memory_id
            or node.orphan
            or self.cache.nodes.get(node.id) is not node
        ):
            if not self._index_stale:
                return None
            # The filesystem changed the tree while this pass waited on the store.
            self._index = self.cache.by_memory_id()
            self._index_stale = False
            node = self._index.get(memory_id)
        return node

    def _local_change(self) -> None:
        self._index_stale = True

    async def _pass(self, report: PassReport, *, final: bool, full: bool) -> None:
        self._passes_since_listing += 1
        self._index = self.cache.by_memory_id()
        self._index_stale = False
        sent = self.cache.uploads()
        self._sent_by_memory = {u.memory_id: u for u in sent if u.memory_id is not None}
        self._sent_creates = {(u.path, u.sha): u for u in sent if u.memory_id is None}
        listing = (
            full
            or self._need_listing
            or self.status.mode == "listing"
            or self._passes_since_listing >= self.full_listing_every
        )
        remote, head, listed = await self._remote_changes(listing)
        report.full_listing = listed
        await self._apply_all(remote, report, final=final)
        self._save_feed(*head)
        if listed:
            self._need_listing = False
            self._passes_since_listing = 0
        # Every upload in flight at the start has now met the store's state: a
        # record kept longer would claim another writer's identical bytes.
        self.cache.forget_uploads([u.node_id for u in sent])
        self._sent_by_memory, self._sent_creates = {}, {}
        if self.read_only:
            return
        if self._is_wipe():
            await self._undo_wipe(report, final=final)
        changes = self.cache.changes(quiet_for=0.0 if final else QUIET_SECONDS)
        await self._each(changes, lambda c: self._push(c, report, final=final), final=final)
        await self._deletes(report, final=final)

    async def _each(
        self, items: Iterable[T], fn: Callable[[T], Awaitable[None]], *, final: bool
    ) -> None:
        """`fn(item)` for every item, a bounded number at once. The first
        whole-store failure stops the others and is raised."""
        limiter = trio.CapacityLimiter(self.final_concurrency if final else self.concurrency)
        failures: list[StoreError] = []

        async with trio.open_nursery() as nursery:

            async def one(item: T) -> None:
                async with limiter:
                    if failures:
                        return
                    try:
                        await fn(item)
                    except StoreError as e:
                        failures.append(e)
                        nursery.cancel_scope.cancel()

            for item in items:
                nursery.start_soon(one, item)
        if failures:
            raise failures[0]

    # ------------------------------------------------------ remote changes

    async def _remote_changes(
        self, listing: bool
    ) -> tuple[dict[str, _Remote], tuple[str | None, list[str]], bool]:
        """What changed in the store, the new feed head, and whether it was a listing."""
        if not listing:
            try:
                remote, head = await self._feed()
                return remote, head, False
            except FEED_REFUSALS as e:
                remote, head = await self._full_listing(feed_refused=e)
                return remote, head, True
        remote, head = await self._full_listing()
        return remote, head, True

    async def _feed_head(self) -> tuple[str | None, list[str]]:
        page = await self.client.list_versions_page(self.store_id, limit=1)
        if not page.data:
            return FEED_START, []
        return page.data[0].created_at, [page.data[0].id]

    async def _full_listing(
        self, *, feed_refused: StatusError | None = None
    ) -> tuple[dict[str, _Remote], tuple[str | None, list[str]]]:
        """Everything the store holds, against everything the cache knows."""
        head: tuple[str | None, list[str]] = (None, [])
        if self.status.mode == "feed" and feed_refused is None:
            try:
                head = await self._feed_head()
            except FEED_REFUSALS as e:
                feed_refused = e
        remote: dict[str, _Remote] = {}
        async for item in self.client.iter_memories(self.store_id, view="basic", limit=100):
            if isinstance(item, Memory):
                remote[item.id] = _Remote(
                    item.id, item.path, item.content_sha256, item.content_size_bytes
                )
        if feed_refused is not None and self.status.mode == "feed":
            # Listings work and the feed does not: follow the store by listings.
            self.status.mode = "listing"
            self.status.mode_reason = (
                f"the version feed was refused ({feed_refused.status} {feed_refused.error_type})"
            )
            log.warning(
                "the version feed of %s is refused (%s); following the store by listings "
                "from now on (one request per 100 memories a pass)",
                self.store_id,
                feed_refused,
            )
        for memory_id in list(self._index) + list(self.cache.tombstones):
            if memory_id not in remote:
                remote[memory_id] = _Remote(memory_id, deleted=True)
        return remote, head

    def _save_feed(self, ts: str | None, ids: list[str]) -> None:
        if ts is None:
            return
        self.cache.set_meta("feed_ts", ts)
        self.cache.set_meta("feed_ids", ",".join(ids))

    async def _feed(self) -> tuple[dict[str, _Remote], tuple[str | None, list[str]]]:
        """Memories changed since the last version seen, newest state of each, and the new feed head."""
        since = self.cache.get_meta("feed_ts")
        if since is None:
            return await self._full_listing()
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
        head: tuple[str | None, list[str]] = (since, sorted(seen))
        if versions:
            top = versions[0].created_at
            ids = {v.id for v in versions if v.created_at == top}
            head = (top, sorted(ids | seen if top == since else ids))
        remote: dict[str, _Remote] = {}
        for memory_id, v in newest.items():
            if v.operation == "deleted":
                remote[memory_id] = _Remote(memory_id, deleted=True)
            elif v.path is None or v.content_sha256 is None:
                try:
                    m = await self.client.get_memory(self.store_id, memory_id, view="basic")
                    remote[memory_id] = _Remote(
                        memory_id, m.path, m.content_sha256, m.content_size_bytes
                    )
                except NotFound:
                    remote[memory_id] = _Remote(memory_id, deleted=True)
            else:
                remote[memory_id] = _Remote(
                    memory_id, v.path, v.content_sha256, v.content_size_bytes or 0
                )
        return remote, head

    async def _apply_all(
        self, remote: dict[str, _Remote], report: PassReport, *, final: bool
    ) -> None:
        """Fetch what must be pulled in parallel, then decide memory by memory."""
        wanted = [r for r in remote.values() if self._wants_content(r)]
        await self._each(wanted, self._fetch_ahead, final=final)
        for r in remote.values():
            try:
                await self._apply_remote(r, report)
            except StoreError as e:
                if whole_store(e):
                    raise
                self._log_once(
                    r.memory_id, f"cannot pull {r.path or r.memory_id} from the store: {e}"
                )
                self._need_listing = True
            except (CacheError, OSError) as e:
                log.warning("cannot show %s from the store here: %s", r.path or r.memory_id, e)
                self._need_listing = True

    def _wants_content(self, r: _Remote) -> bool:
        """Whether applying `r` will likely pull its content (fetched ahead, in parallel)."""
        if r.deleted or r.path == MARKER_PATH:
            return False
        sent = self._sent_by_memory.get(r.memory_id)
        if sent is not None and sent.sha == r.sha:
            return False
        stone = self.cache.tombstones.get(r.memory_id)
        if stone is not None:
            return r.sha != stone.base_sha
        node = self._node_for(r.memory_id)
        return node is not None and r.sha != node.base_sha and (node.cached or node.open_count > 0)

    async def _fetch_ahead(self, r: _Remote) -> None:
        try:
            self._fetched[r.memory_id] = await self.fetch_content(r.memory_id)
        except StoreError as e:
            if whole_store(e):
                raise
            # Applying `r` fetches again and decides what the failure means.

    async def _apply_remote(self, r: _Remote, report: PassReport) -> None:
        """The decision table, for one memory the store reports changed."""
        cache = self.cache
        node = self._node_for(r.memory_id)
        stone = cache.tombstones.get(r.memory_id)
        if r.deleted:
            if stone is not None:
                cache.tombstone_done(r.memory_id)
            if node is None:
                return
            if not node.changed:
                await self._remove_local(node, report)
            elif self.read_only:
                log.warning("%s was deleted in the store; the local copy is kept", node.path)
                cache.forget_memory(node)
            else:
                log.warning(
                    "%s was deleted in the store but changed here: it will be created again",
                    node.path,
                )
                cache.forget_memory(node)
            return
        assert r.path is not None and r.sha is not None
        if r.path == MARKER_PATH:
            log.warning(
                "the store holds a memory at %s, the marker's path; it is not shown", MARKER_PATH
            )
            return
        if self._settle_own_write(r, node, stone):
            return
        if stone is not None:
            if r.sha == stone.base_sha and r.path == stone.path:
                return
            log.warning(
                "%s was deleted here but changed in the store: the store's version is restored",
                r.path,
            )
            cache.tombstone_done(r.memory_id)
            await self._place(r, report, fetch=True)
            return
        if node is not None:
            if r.sha == node.base_sha and r.path == node.base_path:
                return
            if node.changed and r.sha == node.base_sha:
                # Moved in the store, changed here: follow the move, keep the local change.
                try:
                    gone = cache.follow_remote_move(node, r.path)
                except CacheError as e:
                    log.warning("cannot follow the move of %s to %s: %s", node.path, r.path, e)
                    return
                report.moved += 1
                for parent, name in gone:
                    await self.kernel.forget_entry(parent, name)
                return
            if node.dirty and r.sha != node.base_sha:
                copy = cache.keep_conflict_copy(node)
                log.warning(
                    "conflict on %s: changed here and in the store; the store's version wins, "
                    "the local version is kept at %s",
                    node.path,
                    copy,
                )
                report.conflicts += 1
            await self._place(r, report, fetch=node.cached or node.open_count > 0)
            return
        await self._place(r, report, fetch=False)

    def _settle_own_write(self, r: _Remote, node: Node | None, stone) -> bool:
        """The store holds exactly what memfs sent, whose answer was lost: agree on it."""
        sent = self._sent_by_memory.get(r.memory_id)
        if sent is not None and sent.sha == r.sha and sent.path == r.path:
            if node is not None:
                self.cache.adopt_own_write(node, r.memory_id, r.sha, r.path)
            elif stone is not None:
                self.cache.retarget_tombstone(r.memory_id, r.path, r.sha)
            else:
                return False
            log.info("%s: the store holds memfs's own upload (its answer was lost)", r.path)
            return True
        if node is not None or stone is not None:
            return False
        sent = self._sent_creates.get((r.path, r.sha))
        if sent is None:
            return False
        owner = self.cache.nodes.get(sent.node_id)
        if owner is not None and not owner.orphan and not owner.is_dir and owner.memory_id is None:
            self.cache.adopt_own_write(owner, r.memory_id, r.sha, r.path)
            self._index[r.memory_id] = owner
        else:
            # Created by memfs (answer lost), and the file was deleted here since.
            self.cache.retarget_tombstone(r.memory_id, r.path, r.sha)
        log.info("%s: the store holds memfs's own create (its answer was lost)", r.path)
        return True

    async def _content_for(self, r: _Remote) -> tuple[bytes, str]:
        ahead = self._fetched.pop(r.memory_id, None)
        if ahead is not None:
            return ahead
        return await self.fetch_content(r.memory_id)

    async def _place(self, r: _Remote, report: PassReport, *, fetch: bool) -> None:
        content = None
        if fetch:
            try:
                content, sha = await self._content_for(r)
            except NotFound:
                return
            r.sha, r.size = sha, len(content)
        old = self._node_for(r.memory_id)
        old_place = (old.parent, old.name, old.id) if old is not None else None
        assert r.path is not None and r.sha is not None
        # Whatever stands where the store puts this memory goes; a local file
        # with changes the store has not seen is kept as a conflict copy.
        try:
            placed = self.cache.place_remote(r.memory_id, r.path, r.sha, r.size, content, node=old)
        except CacheError as e:
            log.warning("cannot show %s from the store here: %s", r.path, e)
            return
        node = placed.node
        self._index[r.memory_id] = node
        report.pulled += 1
        for local, copy in placed.copies:
            log.warning(
                "conflict on %s: changed here while the store put %s there; the store's "
                "version wins, the local version is kept at %s",
                local,
                r.path,
                copy,
            )
            report.conflicts += 1
        for parent, name in placed.gone:
            await self.kernel.forget_entry(parent, name)
        if old_place is None:
            return
        if (old_place[0], old_place[1]) != (node.parent, node.name):
            report.moved += 1
        await self.kernel.forget_content(node.id)

    async def _remove_local(self, node: Node, report: PassReport) -> None:
        parent = node.parent
        gone = self.cache.remove_remote(node)
        report.removed_local += 1
        for folder, name in gone:
            await self.kernel.forget_entry(folder, name)
        await self.kernel.forget_content(parent)

    def set_aside_local_changes(self) -> None:
        """A read-only mount shows the store's state: what an earlier read-write
        mount of this cache did not upload is kept aside as conflict copies."""
        for path, copy in self.cache.set_aside_local_changes():
            log.warning(
                "%s is mounted read-only: the local change to %s that an earlier read-write "
                "mount did not upload is kept at %s",
                self.store_id,
                path,
                copy,
            )

    # ---------------------------------------------------------------- wipes

    def _is_wipe(self) -> bool:
        """Every file of a store that had more than one is missing at once."""
        if self.deletions != "enabled" or len(self.cache.tombstones) < 2:
            return False
        return not any(n.memory_id is not None for n in self.cache.files())

    async def _undo_wipe(self, report: PassReport, *, final: bool) -> None:
        stones = list(self.cache.tombstones.values())
        log.warning(
            "every file of %s was deleted here at once (%d files): that looks like a wipe, "
            "not a request; nothing is deleted in the store and the files are restored from it",
            self.store_id,
            len(stones),
        )
        with self.cache.transaction():
            for stone in stones:
                self.cache.tombstone_done(stone.memory_id)
        self._first_missing.clear()
        remote, _ = await self._full_listing()
        await self._apply_all(remote, report, final=final)

    # ------------------------------------------------------- local changes

    def _log_once(self, key: object, message: str, level: int = logging.WARNING) -> None:
        if self._logged.get(key) != message:
            self._logged[key] = message
            log.log(level, "%s", message)

    async def _push(self, change: Change, report: PassReport, *, final: bool) -> None:
        cache = self.cache
        node = cache.nodes.get(change.node_id)
        if node is None or node.orphan or not node.changed:
            return
        if node.too_large:
            self._log_once(
                node.id,
                f"{change.path} is not uploaded: a write past {MAX_CONTENT_BYTES:,} bytes was "
                "refused (EFBIG); the store keeps its version until the file is written again "
                "within the limit",
            )
            return
        hold = self._holds.get(node.id)
        if hold is not None:
            if hold.gen != node.gen:
                del self._holds[node.id]
            elif self.clock() < hold.retry_at and not final:
                return
        try:
            raw = cache.read_content(node) if node.cached else None
        except OSError as e:
            log.error("cannot read %s from the cache: %s", change.path, e)
            return
        if raw is None:
            if change.memory_id is None:
                return
            sha = change.base_sha or ""
            text = None
        else:
            sha = content_sha256(raw)
            if node.refused_sha == sha and node.refused_reason:
                return
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                self._refuse(change, sha, "its content is not UTF-8 text", report)
                return
        try:
            if change.memory_id is None:
                memory = await self._create(change, text or "", sha)
            else:
                content = text if change.dirty and sha != change.base_sha else None
                path = change.path if change.path != change.base_path else None
                if content is None and path is None:
                    cache.mark_pushed(change, memory_id=change.memory_id, sha=sha, path=change.path)
                    self._cleared(node.id, change.path)
                    return
                memory = await self._update(change, content, path, sha)
        except StoreError as e:
            if whole_store(e):
                raise  # the upload may have landed: its record stays
            cache.upload_answered(node.id)
            await self._refused_by_store(change, node, sha, e, report, final=final)
            return
        with cache.transaction():
            cache.upload_answered(node.id)
            cache.mark_pushed(
                change, memory_id=memory.id, sha=memory.content_sha256, path=memory.path
            )
        self._cleared(node.id, change.path)
        report.pushed += 1

    def _cleared(self, node_id: int, path: str) -> None:
        self._holds.pop(node_id, None)
        if self._logged.pop(node_id, None) is not None:
            log.info("%s is uploaded", path)

    async def _refused_by_store(
        self,
        change: Change,
        node: Node,
        sha: str,
        e: StoreError,
        report: PassReport,
        *,
        final: bool,
    ) -> None:
        """One memory refused: decide what it means for that memory alone."""
        if isinstance(e, NotFound) and change.memory_id is not None:
            log.warning("%s was deleted in the store; it is created again", change.path)
            self.cache.forget_memory(node)
            await self._push(Change.of(node), report, final=final)
            return
        if isinstance(e, PreconditionFailed):
            log.info("%s changed in the store meanwhile; the next pass pulls it", change.path)
            self._need_listing = True
            return
        if isinstance(e, RequestTooLarge):
            self._refuse(change, sha, f"the store refused it as too large: {e.message}", report)
            return
        if isinstance(e, InvalidRequest):
            self._refuse(change, sha, f"the store refused it: {e.message}", report)
            return
        if isinstance(e, (PathConflict, Conflict)):
            self._need_listing = True
        reason = (
            f"the path conflicts with {e.conflicting_path or 'another memory'}"
            if isinstance(e, PathConflict)
            else f"the store refused it ({e})"
        )
        self._hold(node, reason, change.path)
        report.refused += 1

    def _hold(self, node: Node, reason: str, path: str) -> None:
        hold = self._holds.get(node.id)
        attempts = hold.attempts + 1 if hold is not None and hold.gen == node.gen else 1
        wait = min(HOLD_MAX, HOLD_FIRST * 2 ** (attempts - 1))
        self._holds[node.id] = _Hold(node.gen, self.clock() + wait, attempts, reason)
        self._log_once(
            node.id,
            f"{path} is not uploaded: {reason}; it is tried again later or after it changes",
        )

    async def _create(self, change: Change, text: str, sha: str) -> Memory:
        self.cache.record_upload(Upload(change.node_id, None, change.path, sha))
        try:
            return await self.client.create_memory(self.store_id, change.path, text)
        except PathConflict as e:
            if not await self._clear_pending_delete(e):
                raise
            return await self.client.create_memory(self.store_id, change.path, text)

    async def _update(
        self, change: Change, content: str | None, path: str | None, sha: str
    ) -> Memory:
        assert change.memory_id is not None
        sent_sha = sha if content is not None else (change.base_sha or sha)
        self.cache.record_upload(Upload(change.node_id, change.memory_id, change.path, sent_sha))
        kwargs = dict(content=content, path=path, precondition_sha256=change.base_sha or None)
        try:
            return await self.client.update_memory(self.store_id, change.memory_id, **kwargs)
        except PathConflict as e:
            if not await self._clear_pending_delete(e):
                raise
            return await self.client.update_memory(self.store_id, change.memory_id, **kwargs)

    async def _clear_pending_delete(self, conflict: PathConflict) -> bool:
        """A path taken by a memory deleted here: the local tree corroborates the
        delete, so it is sent now rather than after the window."""
        stone = self.cache.tombstones.get(conflict.conflicting_memory_id or "")
        if stone is None or self.deletions != "enabled":
            return False
        try:
            await self.client.delete_memory(
                self.store_id, stone.memory_id, expected_content_sha256=stone.base_sha
            )
        except NotFound:
            pass
        except StoreError as e:
            if whole_store(e):
                raise
            return False
        self.cache.tombstone_done(stone.memory_id)
        return True

    def _refuse(self, change: Change, sha: str, reason: str, report: PassReport) -> None:
        """The store refused this content: retried only after it changes."""
        self._log_once(
            change.node_id,
            f"{change.path} is not uploaded: {reason}; it is retried after it changes",
            logging.ERROR,
        )
        self.cache.mark_refused(change, sha, reason)
        report.refused += 1

    async def _deletes(self, report: PassReport, *, final: bool) -> None:
        cache = self.cache
        if not cache.tombstones:
            return
        if self.deletions == "disabled":
            return
        if self.deletions == "log_only":
            for stone in list(cache.tombstones.values()):
                if stone.memory_id not in self._logged_deletes:
                    log.warning(
                        "%s was deleted here; not deleted in the store (deletions: log_only)",
                        stone.path,
                    )
                    self._logged_deletes.add(stone.memory_id)
            return
        now = self.clock()
        for memory_id in list(self._first_missing):
            if memory_id not in cache.tombstones:
                del self._first_missing[memory_id]
        for stone in cache.tombstones.values():
            seen = self._first_missing.get(stone.memory_id)
            if seen is None or seen[0] != stone.deleted_at:
                # A delete made again after a re-create starts a window of its own.
                self._first_missing[stone.memory_id] = (stone.deleted_at, now)

        def held(memory_id: str) -> bool:
            hold = self._delete_holds.get(memory_id)
            return hold is not None and now < hold.retry_at and not final

        due = [
            s
            for s in cache.tombstones.values()
            if (final or now - self._first_missing[s.memory_id][1] >= self.delete_window)
            and not held(s.memory_id)
        ]
        cap = delete_cap(cache.file_count() + len(cache.tombstones))
        chosen = sorted(due, key=lambda s: self._first_missing[s.memory_id][1])[:cap]
        await self._each(chosen, lambda s: self._delete(s, report), final=final)
        if len(due) > cap:
            log.info("%d deletes wait for the next pass (at most %d a pass)", len(due) - cap, cap)

    async def _delete(self, stone, report: PassReport) -> None:
        cache = self.cache
        current = cache.tombstones.get(stone.memory_id)
        if current is None or self._node_for(stone.memory_id) is not None:
            return
        try:
            await self.client.delete_memory(
                self.store_id, stone.memory_id, expected_content_sha256=stone.base_sha or None
            )
        except NotFound:
            pass
        except StoreError as e:
            if whole_store(e):
                raise
            if isinstance(e, (PreconditionFailed, Conflict)) or e.status in (409, 412):
                await self._restore(stone, report)
                return
            hold = self._delete_holds.get(stone.memory_id)
            attempts = hold.attempts + 1 if hold is not None else 1
            wait = min(HOLD_MAX, HOLD_FIRST * 2 ** (attempts - 1))
            self._delete_holds[stone.memory_id] = _Hold(0, self.clock() + wait, attempts, str(e))
            self._log_once(
                stone.memory_id,
                f"{stone.path} is not deleted in the store: it refused ({e}); tried again later",
            )
            report.refused += 1
            return
        cache.tombstone_done(stone.memory_id)
        self._delete_holds.pop(stone.memory_id, None)
        self._logged.pop(stone.memory_id, None)
        report.deleted_remote += 1

    async def _restore(self, stone, report: PassReport) -> None:
        """A delete the store refused because the memory changed: show its version."""
        log.warning(
            "%s was deleted here but changed in the store: the store's version is restored",
            stone.path,
        )
        self.cache.tombstone_done(stone.memory_id)
        try:
            m = await self.client.get_memory(self.store_id, stone.memory_id, view="basic")
        except NotFound:
            return
        await self._place(
            _Remote(m.id, m.path, m.content_sha256, m.content_size_bytes), report, fetch=True
        )

    # ---------------------------------------------------------------- status

    def pending(self) -> list[str]:
        """Paths whose local state the store does not hold yet."""
        out = [c.path for c in self.cache.changes()]
        out += (
            [f"{s.path} (deleted)" for s in self.cache.tombstones.values()]
            if self.deletions == "enabled"
            else []
        )
        return out

    def refused(self) -> dict[str, str]:
        """Files the store refused or memfs holds back, with the reason: path -> reason."""
        out: dict[str, str] = {}
        for node in self.cache.files():
            if not node.changed:
                continue
            if node.too_large:
                out[node.path] = (
                    f"too large: a write past {MAX_CONTENT_BYTES:,} bytes was refused (EFBIG)"
                )
            elif node.refused_reason:
                out[node.path] = node.refused_reason
            elif (hold := self._holds.get(node.id)) is not None and hold.gen == node.gen:
                out[node.path] = hold.reason
        for memory_id, hold in self._delete_holds.items():
            stone = self.cache.tombstones.get(memory_id)
            if stone is not None:
                out[f"{stone.path} (deleted)"] = hold.reason
        return out


def backoff_delay(interval: float, failures: int, cap: float = 120.0) -> float:
    """The wait before the next pass after `failures` failed passes in a row."""
    if failures <= 0:
        return interval
    return min(cap, interval * math.pow(2, min(failures, 10)))
