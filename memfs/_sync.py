"""The sync pass: keep one store's cache and the Memory Store in step.

Each pass (`SyncEngine.run_pass`) does, in order:

1. Remote changes. Normally the version feed since the last version seen (one
   request when nothing happened); at mount, when the feed is not available,
   and every `full_listing_every` passes, a full listing in the basic view
   heals anything the feed could miss.
2. The decision table of `design.md` for every memory that changed remotely,
   against its base (B) and the local state (L). The store wins conflicts; the
   local version is kept as a conflict copy under the cache folder.
3. Local changes, taken from what the filesystem recorded (`StoreCache.changes`
   and the pending deletes): pushes with the base as precondition, moves,
   creates, and corroborated deletes (the window, the per-pass cap, a re-check
   just before sending, `expected_content_sha256`).

The base advances only on success. A store that cannot be reached ends the
pass early with everything kept; the loop retries with backoff. Content the
store refuses is reported once and retried only after it changes.

This layer never touches FUSE: what the kernel must forget goes through the
`KernelNotifier` the composition root hands in.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import trio

from ._api import MARKER_PATH, Memory, MemoryVersion, content_sha256
from ._cache import Change, Node, StoreCache
from ._client import StoreClient
from ._exceptions import (
    AuthenticationFailed,
    CacheError,
    InvalidRequest,
    NotFound,
    PathConflict,
    PermissionDenied,
    PreconditionFailed,
    RequestTooLarge,
    StoreError,
    SyncError,
)

log = logging.getLogger("memfs.sync")

DELETE_WINDOW = 30.0
PREFETCH_BY_LISTING = 20
"""Above this many missing contents, prefetch reads full-view listing pages."""
FEED_START = "1970-01-01T00:00:00Z"
"""The feed position of a store that has no versions yet: every later version is new."""
DELETIONS_MODES = ("enabled", "log_only", "disabled")


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


@dataclass
class _Remote:
    """What the store holds for one memory; `deleted` when it holds nothing."""

    memory_id: str
    path: str | None = None
    sha: str | None = None
    size: int = 0
    deleted: bool = False


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
    refused: dict[str, str] = field(default_factory=dict)


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
        self.clock = clock
        self.status = SyncStatus()
        self._lock = trio.Lock()
        self._passes_since_listing = 0
        self._need_listing = True
        self._feed_usable = True
        self._logged_deletes: set[str] = set()
        self._index: dict[str, Node] = {}
        self._index_stale = False
        cache.on_change = self._local_change
        self._first_missing: dict[str, float] = {}
        """memory id -> when a pass first found it deleted here (the window starts then)."""
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
            finally:
                report.requests = self.client.stats.requests - before
                report.finished_at = self.clock()
                self.status.passes += 1
                self.status.last = report
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
        listing = (
            full
            or self._need_listing
            or not self._feed_usable
            or self._passes_since_listing >= self.full_listing_every
        )
        if listing:
            remote, head = await self._full_listing()
            report.full_listing = True
        else:
            remote, head = await self._feed()
        for r in remote.values():
            await self._apply_remote(r, report)
        self._save_feed(*head)
        if listing:
            self._need_listing = False
            self._passes_since_listing = 0
        if self.read_only:
            return
        for change in self.cache.changes():
            await self._push(change, report)
        await self._deletes(report, final=final)

    # ------------------------------------------------------ remote changes

    async def _feed_head(self) -> tuple[str | None, list[str]]:
        page = await self.client.list_versions_page(self.store_id, limit=1)
        if not page.data:
            return FEED_START, []
        return page.data[0].created_at, [page.data[0].id]

    async def _full_listing(self) -> tuple[dict[str, _Remote], tuple[str | None, list[str]]]:
        """Everything the store holds, against everything the cache knows."""
        try:
            head = await self._feed_head()
            self._feed_usable = True
        except (NotFound, PermissionDenied, InvalidRequest) as e:
            log.info(
                "the version feed of %s is not available (%s); using full listings",
                self.store_id,
                e,
            )
            head = (None, [])
            self._feed_usable = False
        remote: dict[str, _Remote] = {}
        async for item in self.client.iter_memories(self.store_id, view="basic", limit=100):
            if isinstance(item, Memory):
                remote[item.id] = _Remote(
                    item.id, item.path, item.content_sha256, item.content_size_bytes
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
                old = (node.parent, node.name)
                try:
                    cache.follow_remote_move(node, r.path)
                except CacheError as e:
                    log.warning("cannot follow the move of %s to %s: %s", node.path, r.path, e)
                    return
                report.moved += 1
                await self.kernel.forget_entry(*old)
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

    async def _place(self, r: _Remote, report: PassReport, *, fetch: bool) -> None:
        content = None
        if fetch:
            try:
                content, sha = await self.fetch_content(r.memory_id)
            except NotFound:
                return
            r.sha, r.size = sha, len(content)
        old = self._node_for(r.memory_id)
        old_place = (old.parent, old.name, old.id) if old is not None else None
        taken = self.cache.find(r.path)
        if taken is not None and taken is not old and not taken.is_dir and taken.changed:
            # Another local file stands where the store puts this memory, with
            # changes the store has not seen: the store wins, the local one is kept.
            copy = self.cache.keep_conflict_copy(taken)
            log.warning(
                "conflict on %s: changed here while the store put another memory there; "
                "the store's version wins, the local version is kept at %s",
                r.path,
                copy,
            )
            report.conflicts += 1
        try:
            node, touched = self.cache.place_remote(
                r.memory_id, r.path, r.sha, r.size, content, node=old
            )
        except CacheError as e:
            log.warning("cannot show %s from the store here: %s", r.path, e)
            return
        self._index[r.memory_id] = node
        report.pulled += 1
        if old_place is None:
            return
        if (old_place[0], old_place[1]) != (node.parent, node.name):
            report.moved += 1
            await self.kernel.forget_entry(old_place[0], old_place[1])
        await self.kernel.forget_content(node.id)

    async def _remove_local(self, node: Node, report: PassReport) -> None:
        parent, name = node.parent, node.name
        self.cache.remove_remote(node)
        report.removed_local += 1
        await self.kernel.forget_entry(parent, name)
        await self.kernel.forget_content(parent)

    # ------------------------------------------------------- local changes

    async def _push(self, change: Change, report: PassReport) -> None:
        cache = self.cache
        node = cache.nodes.get(change.node_id)
        if node is None or node.orphan or not node.changed:
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
                memory = await self._create(change, text or "")
            else:
                content = text if change.dirty and sha != change.base_sha else None
                path = change.path if change.path != change.base_path else None
                if content is None and path is None:
                    cache.mark_pushed(change, memory_id=change.memory_id, sha=sha, path=change.path)
                    return
                memory = await self._update(change, content, path)
        except PreconditionFailed:
            log.info("%s changed in the store meanwhile; the next pass pulls it", change.path)
            self._need_listing = True
            return
        except NotFound:
            log.warning("%s was deleted in the store; it will be created again", change.path)
            if node is not None and not node.orphan:
                cache.forget_memory(node)
            return
        except PathConflict as e:
            log.warning(
                "cannot put %s in the store: the path conflicts with %s; retried next pass",
                change.path,
                e.conflicting_path or "another memory",
            )
            self._need_listing = True
            return
        except RequestTooLarge as e:
            self._refuse(change, sha, f"the store refused it as too large: {e.message}", report)
            return
        except InvalidRequest as e:
            self._refuse(change, sha, f"the store refused it: {e.message}", report)
            return
        cache.mark_pushed(change, memory_id=memory.id, sha=memory.content_sha256, path=memory.path)
        report.pushed += 1

    async def _create(self, change: Change, text: str) -> Memory:
        try:
            return await self.client.create_memory(self.store_id, change.path, text)
        except PathConflict as e:
            if not await self._clear_pending_delete(e):
                raise
            return await self.client.create_memory(self.store_id, change.path, text)

    async def _update(self, change: Change, content: str | None, path: str | None) -> Memory:
        assert change.memory_id is not None
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
        except PreconditionFailed:
            return False
        self.cache.tombstone_done(stone.memory_id)
        return True

    def _refuse(self, change: Change, sha: str, reason: str, report: PassReport) -> None:
        log.error("%s is not uploaded: %s; it is retried after it changes", change.path, reason)
        self.cache.mark_refused(change, sha, reason)
        self.status.refused[change.path] = reason
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
        for memory_id in cache.tombstones:
            self._first_missing.setdefault(memory_id, now)
        due = [
            s
            for s in cache.tombstones.values()
            if final or now - self._first_missing[s.memory_id] >= self.delete_window
        ]
        cap = delete_cap(cache.file_count() + len(cache.tombstones))
        for stone in sorted(due, key=lambda s: self._first_missing[s.memory_id])[:cap]:
            current = cache.tombstones.get(stone.memory_id)
            if current is None or self._node_for(stone.memory_id) is not None:
                continue
            try:
                await self.client.delete_memory(
                    self.store_id, stone.memory_id, expected_content_sha256=stone.base_sha or None
                )
            except NotFound:
                pass
            except PreconditionFailed:
                log.warning(
                    "%s was deleted here but changed in the store: the store's version is restored",
                    stone.path,
                )
                cache.tombstone_done(stone.memory_id)
                m = await self.client.get_memory(self.store_id, stone.memory_id, view="basic")
                await self._place(
                    _Remote(m.id, m.path, m.content_sha256, m.content_size_bytes),
                    report,
                    fetch=True,
                )
                continue
            cache.tombstone_done(stone.memory_id)
            report.deleted_remote += 1
        if len(due) > cap:
            log.info("%d deletes wait for the next pass (at most %d a pass)", len(due) - cap, cap)

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


def backoff_delay(interval: float, failures: int, cap: float = 120.0) -> float:
    """The wait before the next pass after `failures` failed passes in a row."""
    if failures <= 0:
        return interval
    return min(cap, interval * math.pow(2, min(failures, 10)))
