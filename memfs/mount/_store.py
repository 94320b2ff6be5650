"""One store's parts, wired (the sync engine over the client and the cache,
the filesystem over the cache), and what they do while the store is mounted;
the store process decides when each starts and stops."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import logging
import math
import os
import time
from collections.abc import Callable
from typing import Any

import trio

from .._exceptions import MemfsError, MountError, StoreError, SyncError, TransportError
from .._logging import ProgressReport
from .._private import libc_function
from ..cache import StoreCache
from ..client import StoreClient
from ..control import MIN_SYNC_INTERVAL, StoreSpec, StoreStatus
from ..fs import MemoryStoreFS
from ..sync import FINAL_CONCURRENCY, QUIET_SECONDS, EndOfSession, SyncEngine, backoff_delay
from . import start_refusal

log = logging.getLogger("memfs.mount")

PROGRESS_MIN_FILES = 200
"""A first download of more contents than this shows its progress on a terminal."""
PROGRESS_AFTER = 1.0
"""A final sync that takes longer than this shows its progress on a terminal."""
PROGRESS_EVERY = 0.2
WRITE_BEHIND_LOOK = 0.5
"""How often the write-behind looks at the cache for local changes (no request)."""
QUIET_AFTER = 5.0
"""Seconds without a FUSE request after which freed memory is given back."""

Changes = frozenset[tuple[int, int]]
"""The local changes of a mount at one moment: (node id, its edits) of each changed file."""

_MALLOC_TRIM = libc_function("malloc_trim", [ctypes.c_size_t])


def _give_back_freed_memory() -> None:
    """Return the C allocator's free pages to the system (glibc only)."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def store_client(spec: StoreSpec, on_wait: Callable[[str], None] | None = None) -> StoreClient:
    """The client of one store process: few retries, since the sync loop has
    its own backoff; a pool that holds what the final sync sends at once."""
    return StoreClient(
        spec.api_url,
        spec.token,
        auth=spec.auth,
        max_retries=3,
        backoff_max=2.0,
        max_connections=max(spec.sync_concurrency, _final_concurrency(spec)),
        start_timeout=spec.start_timeout,
        on_wait=on_wait,
    )


LISTING_AT_LEAST = 4


def listing_concurrency(spec: StoreSpec) -> int:
    """Requests at once while a pass lists the whole store by folder:
    `FINAL_CONCURRENCY` shared out among the stores mounted together (bench/README.md)."""
    return max(LISTING_AT_LEAST, FINAL_CONCURRENCY // max(1, spec.stores_mounted))


def _final_concurrency(spec: StoreSpec) -> int:
    return min(FINAL_CONCURRENCY, 2 * spec.sync_concurrency)


class MountedStore:
    """One store's cache, client, sync engine and filesystem."""

    def __init__(self, spec: StoreSpec, cache: StoreCache, client: StoreClient) -> None:
        self.spec = spec
        self.cache = cache
        self.client = client
        self.engine = SyncEngine(
            client,
            cache,
            read_only=spec.read_only,
            deletions=spec.sync_deletions,
            concurrency=spec.sync_concurrency,
            final_concurrency=_final_concurrency(spec),
            listing_concurrency=listing_concurrency(spec),
        )
        cache.source = self.engine.fetch_content
        self.fs = MemoryStoreFS(
            cache,
            read_only=spec.read_only,
            uid=spec.uid,
            gid=spec.gid,
            kernel_checks=spec.allow_other,
        )
        self.prefetched = False
        self.next_pass_at: float | None = None
        self._pending_at_start = 0
        self.final_sync_error: str | None = None
        """Why the final sync's pass failed or did not finish; None when it ran."""
        self._fs_requests_seen = 0
        self._push_asked = trio.Event()

    async def first_pass(self) -> None:
        """One full pass before mounting; a store out of reach mounts from its cache, if any."""
        if self.spec.read_only:
            self.engine.set_aside_local_changes()
        try:
            await self.engine.run_pass(full=True, before_mount=True)
        except SyncError as e:
            cause = e.__cause__
            refusal = None
            if isinstance(cause, StoreError):
                refusal = start_refusal(
                    cause, api_url=self.spec.api_url, credential_source=self.spec.credential_source
                )
            if refusal or (self.cache.get_meta("feed_ts") is None and not self.cache.file_count()):
                # Refused for good (a token), or nothing cached: nothing mounts; the cause alone.
                reason = cause if isinstance(cause, TransportError) else e
                raise MountError(f"cannot mount {self.spec.store_id}: {refusal or reason}")
            log.warning(
                "mounting %s from the cache alone: %s",
                self.spec.store_id,
                refusal or e,
                extra={"event": "cache_only"},
            )

    def fs_busy(self) -> bool:
        """Whether the filesystem answered requests since the last call."""
        total = self.fs.request_total()
        busy, self._fs_requests_seen = total != self._fs_requests_seen, total
        return busy

    async def periodic(self) -> None:
        """A pass every sync interval, backing off while the store fails."""
        delay = self.spec.sync_interval
        while True:
            self.next_pass_at = time.time() + delay
            await trio.sleep(delay)
            self.next_pass_at = None
            try:
                await self.engine.run_pass()
                delay = self.spec.sync_interval
            except SyncError:
                delay = backoff_delay(self.spec.sync_interval, self.engine.status.failures_in_a_row)

    def ask_push(self) -> None:
        """Push now, whatever the mount's quiet time, the interval and `--write-behind`."""
        self._push_asked.set()

    def _local_changes(self) -> Changes:
        return frozenset((c.node_id, c.edits) for c in self.cache.changes())

    async def write_behind(self) -> None:
        """Push-only passes between the periodic ones: once the mount has been
        quiet for `QUIET_SECONDS` after a local change not tried yet, at most
        once per `MIN_SYNC_INTERVAL`, and at once when asked; unless asked, none
        while passes fail (the periodic pass's backoff tries again)."""
        seen = tried = self._local_changes()
        changed_at = time.monotonic()
        pushed_at = -math.inf
        look = WRITE_BEHIND_LOOK if self.spec.write_behind else math.inf
        while True:
            with trio.move_on_after(look):
                await self._push_asked.wait()
            asked = self._push_asked.is_set()
            if asked:
                self._push_asked = trio.Event()
            now = time.monotonic()
            changes = self._local_changes()
            if changes - seen:  # a pass settling files is no change of the mount's
                changed_at = now
            seen = changes
            due = (
                bool(changes - tried)
                and now - changed_at >= QUIET_SECONDS
                and now - pushed_at >= MIN_SYNC_INTERVAL
                and not self.engine.status.failures_in_a_row
            )
            if not (asked or due):
                continue
            pushed_at, tried = now, changes
            with contextlib.suppress(SyncError):  # logged; the periodic pass retries
                await self.engine.run_pass(push_only=True)
            seen = self._local_changes()
            if seen - tried:  # written while the push was on the wire
                changed_at = time.monotonic()

    async def prefetch(self) -> None:
        """Every content not cached yet, in the background."""
        shown = ProgressReport(
            f"memfs: downloading {self.spec.store_id}", minimum_total=PROGRESS_MIN_FILES
        )
        try:
            await self.engine.prefetch(self.spec.prefetch_concurrency, progress=shown)
        except MemfsError as e:
            log.warning(
                "prefetch of %s stopped: %s",
                self.spec.store_id,
                e,
                extra={"event": "prefetch_stopped"},
            )
        except Exception:  # noqa: BLE001 - contents are fetched on first read instead
            log.exception(
                "prefetch of %s stopped unexpectedly",
                self.spec.store_id,
                extra={"event": "prefetch_bug"},
            )
        finally:
            shown.finish()
        self.prefetched = True
        gc.collect()  # httpx's answers refer to themselves
        _give_back_freed_memory()

    async def give_back_memory_when_quiet(self) -> None:
        """Give freed memory back whenever the filesystem falls quiet after requests."""
        seen, given_back = self.fs.request_total(), True
        while True:
            await trio.sleep(QUIET_AFTER)
            now = self.fs.request_total()
            if now != seen:
                seen, given_back = now, False
            elif not given_back:
                _give_back_freed_memory()
                given_back = True

    async def final_sync(
        self,
        progress: Callable[[int, int], None],
        *,
        waive_window: bool,
    ) -> dict[str, str]:
        """Two-way passes within the timeout while they make progress and
        something is pending (`waive_window`: deletes younger than the window
        too); what is left, path -> what becomes of it, each logged: an edit the
        store's version overruled meanwhile too, as its copy is in the cache alone.
        `progress(done, total)` hears how many files pending at the start the
        store holds now."""
        spec = self.spec
        end = EndOfSession(waive_window=waive_window)
        kept_before = {node.id: node.kept_copy for node in self.cache.files()}
        with trio.move_on_after(spec.final_sync_timeout) as scope:
            async with trio.open_nursery() as watching:
                watching.start_soon(self._tell_pending, progress)
                try:
                    report = await self.engine.run_pass(final=True, end=end)
                    while self.engine.pending() and (report.pushed or report.deleted_remote):
                        report = await self.engine.run_pass(final=True, end=end)
                except SyncError as e:
                    self.final_sync_error = str(e)
                    log.error(
                        "final sync of %s failed: %s",
                        spec.store_id,
                        e,
                        extra={"event": "final_sync_failed"},
                    )
                watching.cancel_scope.cancel()
        if scope.cancelled_caught:
            self.final_sync_error = f"it did not finish within {spec.final_sync_timeout:.0f} s"
            log.error(
                "final sync of %s did not finish within %.0f s",
                spec.store_id,
                spec.final_sync_timeout,
                extra={"event": "final_sync_timeout"},
            )
        left = self.engine.left_behind()
        if self._pending_at_start:
            progress(max(0, self._pending_at_start - len(left)), self._pending_at_start)
        for node in self.cache.files():
            if (copy := node.kept_copy) and copy != kept_before.get(node.id):
                left[node.path] = f"the store's version won; the edit is kept only at {copy}"
        for path, fate in left.items():
            log.error(
                "not uploaded to %s: %s (%s)",
                spec.store_id,
                path,
                fate,
                extra={"event": "final_sync_incomplete", "path": path},
            )
        return left

    async def _tell_pending(self, progress: Callable[[int, int], None]) -> None:
        self._pending_at_start = total = len(self.engine.pending())
        while True:
            progress(max(0, total - len(self.engine.pending())), total)
            await trio.sleep(PROGRESS_EVERY)

    def status(self) -> StoreStatus:
        st = self.engine.status
        files = list(self.cache.files())
        stats = self.client.stats
        return StoreStatus(
            access="read_only" if self.spec.read_only else "read_write",
            memories=sum(1 for f in files if f.memory_id is not None),
            cached_bytes=sum(f.size for f in files if f.cached),
            dirty=sum(1 for f in files if f.pending and not self.engine.ledger.content_refused(f)),
            pending_deletes=len(self.cache.tombstones),
            conflict_copies=self.cache.conflicts.paths(),
            next_pass_at=self.next_pass_at,
            bytes_up=stats.bytes_up,
            bytes_down=stats.bytes_down,
            store_id=self.spec.store_id,
            name=self.spec.name,
            mount_path=self.spec.mount_path,
            read_only=self.spec.read_only,
            pid=os.getpid(),
            files=len(files),
            cached=sum(1 for f in files if f.cached),
            prefetched=self.prefetched,
            pending=self.engine.pending(),
            refused=self.engine.refused(),
            not_shown=self.engine.not_shown(),
            sync_mode=st.mode,
            store_full=self.cache.full,
            sync_mode_reason=st.mode_reason,
            passes=st.passes,
            last_pass=st.last.as_dict() if st.last else None,
            last_error=st.last_error,
            requests=self.client.stats.requests,
            fuse_requests={op: h.count for op, h in self.fs.times.items()},
            cache_disk_full=self.cache.journal.disk_full_reason,
        )

    def metrics(self) -> dict[str, Any]:
        """Raw counters, gauges and histograms for the metrics endpoint, which names them."""
        st = self.engine.status
        now = self.status()
        return {
            "passes": dict(st.results),
            "pass_seconds": st.durations.to_json(),
            "requests": [
                {"endpoint": endpoint, "outcome": outcome, "count": n}
                for (endpoint, outcome), n in sorted(self.client.stats.by_outcome.items())
            ],
            "bytes_up": now.bytes_up,
            "bytes_down": now.bytes_down,
            "dirty": sum(1 for f in self.cache.files() if f.pending),
            "pending_deletes": now.pending_deletes,
            "conflicts": st.conflicts,
            "refused": len(now.refused),
            "memories": now.memories,
            "cache_bytes": now.cached_bytes,
            "fuse_requests": now.fuse_requests,
            "fuse_seconds": {op: h.to_json() for op, h in self.fs.times.items()},
        }
