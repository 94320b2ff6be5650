"""The sync pass: read the store's changes (`_remote`), apply them (`_pull`), restore a wipe instead
of deleting it, push local changes (`_push`), send the deletes that are due (`_deletes`). Only
whole-store conditions end a pass early, with everything kept; no failure of a pass ends the store
process."""

from __future__ import annotations

import time
from collections.abc import Callable

import trio

from .._exceptions import (
    AuthenticationFailed,
    NotFound,
    PermissionDenied,
    StatusError,
    StoreError,
    SyncError,
)
from ..api import MARKER_NAME, MAX_CONTENT_BYTES, Confirmation, Outcome
from ..cache import (
    READ_ONLY_REASON,
    Change,
    SyncFace,
    SyncState,
    file_state,
    marker_state,
    overruled_copy,
)
from ..client import StoreClient
from ._deletes import DeletePacer, EndOfSession
from ._prefetch import Download
from ._pull import Puller
from ._push import Pusher
from ._remote import RemoteChanges
from ._shared import (
    DEFAULT_CONCURRENCY,
    FINAL_CONCURRENCY,
    QUIET_SECONDS,
    Deletions,
    Ledger,
    PassReport,
    Shared,
    SyncStatus,
    each,
    log,
)


class SyncEngine:
    """Runs sync passes for one store; one pass at a time."""

    def __init__(
        self,
        client: StoreClient,
        cache: SyncFace,
        *,
        read_only: bool = False,
        deletions: Deletions | str = Deletions.ENABLED,
        concurrency: int = DEFAULT_CONCURRENCY,
        final_concurrency: int = FINAL_CONCURRENCY,
        listing_concurrency: int = FINAL_CONCURRENCY,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.cache = cache
        self.store_id = cache.store_id
        self.read_only = read_only
        self.concurrency = max(1, concurrency)
        self.final_concurrency = max(1, final_concurrency)
        self.clock = clock
        self.status = SyncStatus()
        self.ledger = Ledger()
        self._lock = trio.Lock()
        self._download: Download | None = None
        shared = Shared(client, cache, self.ledger, self.status, clock)
        self.remote = RemoteChanges(shared, listing_concurrency=max(1, listing_concurrency))
        self.puller = Puller(shared, read_only=read_only)
        self.pacer = DeletePacer(shared, self.puller, deletions=Deletions(deletions))
        self.pusher = Pusher(shared, self.pacer)

    @property
    def deletions(self) -> Deletions:
        return self.pacer.deletions

    @deletions.setter
    def deletions(self, mode: Deletions | str) -> None:
        self.pacer.deletions = Deletions(mode)

    async def fetch_content(self, memory_id: str) -> tuple[bytes, str]:
        """A memory's content and its sha (the cache's content source): from the
        background download's pages while it runs, or one GET."""
        if self._download is not None:
            content = await self._download.content(memory_id)
            if content is not None:
                return content
        return await self.puller.fetch_content(memory_id)

    async def prefetch(
        self,
        concurrency: int = 4,
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """Every content not cached yet, in the background (`Download`); how many were fetched."""
        download = Download(self.client, self.cache, concurrency=concurrency, progress=progress)
        self._download = download
        try:
            return await download.run()
        finally:
            self._download = None

    def set_aside_local_changes(self) -> None:
        """A read-only mount keeps aside as conflict copies what an earlier
        read-write mount of this cache did not upload."""
        for path, copy in self.cache.set_aside_local_changes():
            log.warning(
                "%s is mounted read-only: the local change to %s that an earlier read-write "
                "mount did not upload is kept at %s",
                self.store_id,
                path,
                copy,
                extra={"event": "set_aside", "path": path},
            )

    async def run_pass(
        self,
        *,
        final: bool = False,
        full: bool = False,
        end: EndOfSession | None = None,
        asked: bool = False,
        before_mount: bool = False,
        push_only: bool = False,
    ) -> PassReport:
        """One whole pass; SyncError (its cause the StoreError that ended the pass, if one
        did) when the store could not be reached, refused us, or the pass failed unexpectedly.
        `final`: a pass of the final sync, which pushes files still being
        written and sends deletes as `end` (shared by its passes) says.
        `asked`: a person asked (`memfs sync`): refused files and deletes are
        tried again at once. `before_mount`: the store's state is placed in one
        commit, a failure left to the caller to tell. `push_only`: the local
        changes alone, but for uploads still unanswered."""
        async with self._lock:
            report = PassReport(push_only=push_only)
            before = self.client.stats.requests
            started = time.monotonic()
            cause: StoreError | None = None
            try:
                if push_only:
                    await self._push_only(report)
                else:
                    end = (end or EndOfSession()) if final else None
                    await self._pass(report, end, full=full, asked=asked, before_mount=before_mount)
            except StoreError as e:
                cause = e
                report.error = _failure(e, self.store_id)
            except Exception as e:  # noqa: BLE001 - no failure of a pass may end the store process
                log.exception(
                    "sync pass of %s failed unexpectedly",
                    self.store_id,
                    extra={"event": "pass_bug"},
                )
                report.error = (
                    f"the pass failed unexpectedly ({type(e).__name__}: {e}); "
                    "local changes are kept"
                )
            finally:
                report.refused = len(self.refused())
                report.requests = self.client.stats.requests - before
                report.finished_at = self.clock()
                report.duration_s = time.monotonic() - started
                report.result = "failed" if report.error else "ok"
                status = self.status
                status.passes += 1
                status.results[report.result] += 1
                status.durations.observe(report.duration_s)
                status.conflicts += report.conflicts
                status.last = report
                self.puller.done()
            self.status.last_error = report.error
            self.status.failures_in_a_row = self.status.failures_in_a_row + 1 if report.error else 0
            if report.error:
                if not before_mount:
                    log.error(
                        "sync of %s failed: %s",
                        self.store_id,
                        report.error,
                        extra={"event": "pass_failed"},
                    )
                raise SyncError(report.error) from cause
            return report

    async def _pass(
        self,
        report: PassReport,
        end: EndOfSession | None,
        *,
        full: bool,
        asked: bool,
        before_mount: bool,
    ) -> None:
        final = end is not None
        limit = self.final_concurrency if final else self.concurrency
        # A wipe is judged on the folder as this pass finds it, before the store's
        # changes come in; the n of the delete cap is what was last agreed.
        wiped = not self.read_only and self.pacer.is_wipe()
        known = self.cache.memory_count() + len(self.cache.tombstones)
        sent = self.cache.uploads()
        self.puller.expect_own_writes(sent)
        remote, head, listed = await self.remote.read(full=full)
        report.full_listing = listed
        for memory_id, waiting in self.ledger.deferred.items():
            remote.setdefault(memory_id, waiting)
        self.ledger.deferred.clear()
        await self.puller.apply_all(remote, report, limit=limit, in_one_commit=before_mount)
        self.remote.applied(head, listed)
        # Every upload in flight at the start has now met the store's state: a
        # record kept longer would claim another writer's identical bytes.
        self.cache.forget_uploads([u.node_id for u in sent])
        self.puller.expect_own_writes([])
        if self.read_only:
            return
        if wiped:
            self.pacer.undo_wipe()
            listing, _ = await self.remote.listing()
            await self.puller.apply_all(listing, report, limit=limit)
        changes = self.cache.changes(quiet_for=0.0 if final else QUIET_SECONDS)
        await each(changes, lambda c: self.pusher.push(c, report, final=final, asked=asked), limit)
        await self.pacer.run(report, end=end, limit=limit, asked=asked, known=known)

    async def _push_only(self, report: PassReport) -> None:
        if self.read_only:
            return
        unanswered = {u.node_id for u in self.cache.uploads()}
        changes = [
            c for c in self.cache.changes(quiet_for=QUIET_SECONDS) if c.node_id not in unanswered
        ]
        await each(changes, lambda c: self.pusher.push(c, report, final=False), self.concurrency)

    def pending(self) -> list[str]:
        """Paths whose local state the store does not hold yet, but for the files
        whose content the store refused (`refused` lists those)."""
        nodes = self.cache.nodes
        out = [
            c.path
            for c in self.cache.changes()
            if c.node_id not in nodes or not self.ledger.content_refused(nodes[c.node_id])
        ]
        if self.deletions is Deletions.ENABLED:
            out += [f"{s.path} (deleted)" for s in self.cache.tombstones.values()]
        return out

    def left_behind(self) -> dict[str, str]:
        """What the store does not hold yet, path -> what will become of it; a
        file whose content the store refused was told then, and is not in it."""
        out: dict[str, str] = {}
        for change in self.cache.changes():
            node = self.cache.nodes.get(change.node_id)
            if node is None or self.ledger.content_refused(node):
                continue
            hold = self.ledger.current_hold(node)
            if node.too_large:
                out[node.path] = (
                    f"a write past {MAX_CONTENT_BYTES:,} bytes was refused (EFBIG): it stays in "
                    "the cache and is uploaded only once it is written again within the limit"
                )
            elif hold is not None:
                out[node.path] = (
                    f"{hold.reason}: it stays in the cache; the next mount of the store tries again"
                )
            else:
                out[node.path] = "it stays in the cache; the next mount of the store uploads it"
        if self.deletions is Deletions.ENABLED:
            for stone in self.cache.tombstones.values():
                why = self.pacer.held_at_end.get(stone.memory_id)
                hold = self.ledger.delete_holds.get(stone.memory_id)
                if why is None:
                    why = f"the store refused it ({hold.reason})" if hold else "not sent"
                out[f"{stone.path} (deleted)"] = (
                    f"the delete is {why}; it stays pending in the cache and the next mount of "
                    "the store with this cache sends it"
                )
        return out

    def not_shown(self) -> dict[str, str]:
        """Memories of the store this folder does not show: path -> reason."""
        return dict(self.puller.not_shown.values())

    def refused(self) -> dict[str, str]:
        """Files and deletes the store refused or memfs holds back: path -> reason."""
        out: dict[str, str] = {}
        for node in self.cache.files():
            if not node.pending:
                continue
            hold = self.ledger.current_hold(node)
            if node.too_large:
                out[node.path] = (
                    f"too large: a write past {MAX_CONTENT_BYTES:,} bytes was refused (EFBIG)"
                )
            elif self.ledger.content_refused(node) and node.refused_reason:
                out[node.path] = node.refused_reason
            elif hold is not None:
                out[node.path] = hold.reason
        out.update(self.puller.waiting.values())
        for memory_id, hold in self.ledger.delete_holds.items():
            stone = self.cache.tombstones.get(memory_id)
            if stone is not None:
                out[f"{stone.path} (deleted)"] = hold.reason
        return out

    async def confirm(self, paths: list[str], timeout: float) -> list[Confirmation]:
        """Push `paths` (memory paths, `/a/b.md`) now and say what the store made
        of each within `timeout` seconds (`memfs sync FILE`): as a pass pushes,
        the quiet time and the backoff of refused files waived; a file a 409
        stops, or a clean one whose memory the store changed or deleted since, is
        settled by one full pass; what is not answered stays pending."""
        if self.read_only:
            return [Confirmation(p, Outcome.REFUSED, reason=READ_ONLY_REASON) for p in paths]
        failure: StoreError | None = None
        cause = "it is still pending: a later pass pushes it"
        moved_on: set[str] = set()
        with trio.move_on_after(timeout) as scope:
            try:
                await self._push_now(paths)
                moved_on = {p for p in paths if await self._store_moved_on(p)}
                if moved_on or any(self._unsettled(p) for p in paths):
                    await self.run_pass(full=True, asked=True)
                    await self._push_now(paths)
            except StoreError as e:
                failure = e
            except SyncError as e:
                failure = e.__cause__ if isinstance(e.__cause__, StoreError) else None
                cause = str(e)
        refused = False
        if scope.cancelled_caught:
            cause = f"no answer from the store within {timeout:g} s"
        elif isinstance(failure, StatusError):
            cause = f"the store answered {failure.status}: {failure.message}"
            # A 401 or a 403 of the store refuses the push; a 5xx, 408 or 429 leaves it pending.
            refused = failure.status < 500 and failure.status not in (408, 429)
        elif failure is not None:
            cause = f"the store could not be reached: {failure}"
        return [self._outcome(p, refused, cause, p in moved_on) for p in paths]

    async def _store_moved_on(self, path: str) -> bool:
        """Whether the store no longer holds what a clean file holds (a move alone keeps it)."""
        node = self.cache.find(path)
        if node is None or node.is_dir or node.pending or node.memory_id is None:
            return False
        r = await self.remote.one(node.memory_id)
        return r.deleted or r.sha != node.base_sha

    async def _push_now(self, paths: list[str]) -> None:
        async with self._lock:
            for path in paths:
                node = self.cache.find(path)
                if node is not None and not node.is_dir and node.pending:
                    await self.pusher.push(Change.of(node), PassReport(), final=True, asked=True)

    def _unsettled(self, path: str) -> bool:
        """Whether the file is pending for a reason a listing of the store may
        settle (a conflict), not for its content or size."""
        node = self.cache.find(path)
        if node is None or node.is_dir or not node.pending or node.too_large:
            return False
        return not self.ledger.content_refused(node) and overruled_copy(node) is None

    def _outcome(self, path: str, refused: bool, cause: str, moved_on: bool) -> Confirmation:
        if path == "/" + MARKER_NAME:
            return Confirmation(path, Outcome.REFUSED, reason=marker_state().reason)
        node = self.cache.find(path)
        if node is None or node.is_dir:
            return Confirmation(
                path, Outcome.NOT_CONFIRMED, reason="the file was moved or removed meanwhile"
            )
        state = file_state(node)
        if state.state is SyncState.OVERRULED or (moved_on and state.state is SyncState.SYNCED):
            return Confirmation(
                path, Outcome.OVERRULED, state.memory_id, state.sha256, kept_copy=state.kept_copy
            )
        if state.state is SyncState.SYNCED:
            return Confirmation(path, Outcome.SAVED, state.memory_id, state.sha256)
        if state.state is SyncState.PENDING:
            outcome = Outcome.REFUSED if refused else Outcome.NOT_CONFIRMED
            return Confirmation(path, outcome, state.memory_id, state.sha256, cause)
        return Confirmation(path, Outcome.REFUSED, state.memory_id, state.sha256, state.reason)


def _failure(e: StoreError, store_id: str) -> str:
    if isinstance(e, AuthenticationFailed):
        return f"the store refused the token (401); local changes are kept: {e.message}"
    if isinstance(e, NotFound):
        return f"store {store_id} was not found (404): {e.message}"
    if isinstance(e, PermissionDenied):
        return f"the token may not use store {store_id} (403): {e.message}"
    return f"the store could not be reached or failed; local changes are kept: {e}"
