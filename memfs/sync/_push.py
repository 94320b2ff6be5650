"""Pushing local changes: creates, updates with the base as precondition, moves;
and confirmed saves (`memfs sync FILE`), which push named files now.

Every upload is recorded in the journal before it is sent, so that a pass
can recognise it in the store when its answer is lost. A refusal of one
memory is that memory's alone: content refusals (400, 413, not UTF-8) wait
for the file to change; other refusals (402, 403, 409 of any type, 412,
unknown) are held and tried again later or when the file changes; a 404 on
an update creates the memory again at once. Only whole-store failures escape.

A confirmed save pushes as a pass does, with the quiet time and the backoff of
refused files waived (a person asked); a file a 409 stops is settled by one
full pass. Whatever is not answered within the timeout, or meets a failure of
the whole store, stays pending: later passes push it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass
from functools import partial

import trio

from .._exceptions import (
    CacheCorrupt,
    CacheDiskFull,
    Conflict,
    InvalidRequest,
    NotFound,
    PathConflict,
    PreconditionFailed,
    RequestTooLarge,
    StatusError,
    StoreError,
    SyncError,
)
from ..api import MARKER_NAME, MAX_CONTENT_BYTES, Confirmation, Outcome, content_sha256
from ..cache import (
    READ_ONLY_REASON,
    Change,
    Node,
    SyncFace,
    SyncState,
    Upload,
    file_state,
    marker_state,
    overruled_copy,
)
from ._deletes import DeletePacer
from ._shared import Hold, Ledger, Part, PassReport, Shared, log, whole_store

STILL_PENDING = "it is still pending: a later pass pushes it"
NOT_UTF8 = "its content is not UTF-8 text"


def _note_refusal(node: Node, reason: str, edits: int, *, local: bool) -> None:
    """What the file's state shows (`memfs.cache.file_state`) while it is not changed again."""
    live = node.live
    live.refusal, live.refusal_local, live.refused_at = reason, local, edits


class Pusher(Part):
    """Sends what changed here to the store, file by file."""

    def __init__(self, shared: Shared, pacer: DeletePacer) -> None:
        super().__init__(shared)
        self.pacer = pacer

    async def push(
        self, change: Change, report: PassReport, *, final: bool, asked: bool = False
    ) -> None:
        """Push one changed file. `change` names the file; what is sent is the
        file's state now (the filesystem may have moved on since the pass began).
        `asked`: a pass a person asked for tries a refused file again at once."""
        cache = self.cache
        node = cache.nodes.get(change.node_id)
        if node is None or node.orphan or not node.pending:
            return
        change = Change.of(node)
        if node.too_large:
            self.ledger.log_once(
                node.id,
                f"{change.path} is not uploaded: a write past {MAX_CONTENT_BYTES:,} bytes was "
                "refused (EFBIG); the store keeps its version until the file is written again "
                "within the limit",
                event="too_large",
                path=change.path,
            )
            return
        hold = self.ledger.holds.get(node.id)
        if hold is not None and hold.edits != node.live.edits:
            del self.ledger.holds[node.id]
        elif hold is not None and self.clock() < hold.retry_at and not (final or asked):
            return
        path = change.path
        try:
            raw = cache.read_content(node) if node.cached else None
        except (OSError, CacheCorrupt) as e:
            log.error(
                f"cannot read {path} from the cache: {e}",
                extra={"event": "cache_unreadable", "path": path},
            )
            return
        if raw is None:
            if change.memory_id is None:
                return
            sha = change.base_sha or ""
            text = None
        else:
            sha = content_sha256(raw)
            if node.refused_sha == sha and node.refused_reason and not asked:
                self.ledger.refused[node.id] = change.edits
                _note_refusal(
                    node, node.refused_reason, change.edits, local=node.refused_reason == NOT_UTF8
                )
                return
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                self._refuse(change, sha, NOT_UTF8, local=True)
                return
        memory_id = change.memory_id
        if memory_id is None:
            upload = Upload(node.id, None, path, sha)
            send = partial(self.client.create_memory, self.store_id, path, text or "")
        else:
            content = text if change.edited and sha != change.base_sha else None
            if content is None and path == change.base_path:
                cache.mark_pushed(change, memory_id=memory_id, sha=sha, path=path)
                self._cleared(node.id, path)
                return
            upload = Upload(
                node.id, memory_id, path, sha if content is not None else change.base_sha or sha
            )
            send = partial(
                self.client.update_memory,
                self.store_id,
                memory_id,
                content=content,
                path=path if path != change.base_path else None,
                precondition_sha256=change.base_sha or None,
            )
        try:
            cache.record_upload(upload)
            try:
                memory = await send()
            except PathConflict as e:
                # A path taken by a memory deleted here: that delete goes first.
                if not await self.pacer.send_now(e.conflicting_memory_id):
                    raise
                memory = await send()
        except CacheDiskFull as e:  # not sent: the cache said so once itself
            log.info(
                f"{path} is not uploaded now: {e}", extra={"event": "push_disk_full", "path": path}
            )
            return
        except StoreError as e:
            if whole_store(e):
                raise  # the upload may have landed: its record stays
            with contextlib.suppress(CacheDiskFull):
                cache.upload_answered(node.id)
            await self._refused_by_store(change, node, sha, e, report, final=final, asked=asked)
            return
        report.pushed += 1
        try:
            with cache.transaction():
                cache.upload_answered(node.id)
                cache.mark_pushed(
                    change, memory_id=memory.id, sha=memory.content_sha256, path=memory.path
                )
        except CacheDiskFull:
            return  # the store holds it: the upload's record tells the next pass so
        self._cleared(node.id, path)

    def _cleared(self, node_id: int, path: str) -> None:
        node = self.cache.nodes.get(node_id)
        if node is not None:
            node.live.refusal = None
        self.ledger.holds.pop(node_id, None)
        self.ledger.refused.pop(node_id, None)
        if self.ledger.logged.pop(node_id, None) is not None:
            log.info("%s is uploaded", path, extra={"event": "refusal_cleared", "path": path})

    async def _refused_by_store(
        self,
        change: Change,
        node: Node,
        sha: str,
        e: StoreError,
        report: PassReport,
        *,
        final: bool,
        asked: bool = False,
    ) -> None:
        """One memory refused: decide what it means for that memory alone."""
        if isinstance(e, NotFound) and change.memory_id is not None:
            if node.memory_id != change.memory_id:
                return  # the file took another memory while this one went: it is pushed next
            log.warning(
                "%s was deleted in the store; it is created again",
                change.path,
                extra={"event": "recreated", "path": change.path},
            )
            self.cache.forget_memory(node)
            await self.push(Change.of(node), report, final=final, asked=asked)
            return
        if isinstance(e, PreconditionFailed):
            log.info("%s changed in the store meanwhile; the next pass pulls it", change.path)
            self.ledger.need_listing = True
            return
        if isinstance(e, RequestTooLarge):
            self._refuse(change, sha, f"the store refused it as too large: {e.message}")
            return
        if isinstance(e, InvalidRequest):
            self._refuse(change, sha, f"the store refused it: {e.message}")
            return
        if isinstance(e, (PathConflict, Conflict)):
            self.ledger.need_listing = True
        reason = (
            f"the path conflicts with {e.conflicting_path or 'another memory'}"
            if isinstance(e, PathConflict)
            else f"the store refused it ({e})"
        )
        self.ledger.holds[node.id] = Hold.after(
            self.ledger.holds.get(node.id), node.live.edits, self.clock(), reason
        )
        _note_refusal(node, reason, node.live.edits, local=False)
        self.ledger.log_once(
            node.id,
            f"{change.path} is not uploaded: {reason}; it is tried again later or after it changes",
            event="held",
            path=change.path,
        )

    def _refuse(self, change: Change, sha: str, reason: str, *, local: bool = False) -> None:
        """The store refused this content (`local`: memfs cannot send it): said
        once, as a warning, and retried only after it changes. It is no failure:
        no stop leaves it behind."""
        self.ledger.log_once(
            change.node_id,
            f"{change.path} is not uploaded: {reason}; it is retried after it changes",
            event="refused",
            path=change.path,
        )
        self.cache.mark_refused(change, sha, reason)
        self.ledger.refused[change.node_id] = change.edits
        node = self.cache.nodes.get(change.node_id)
        if node is not None:
            _note_refusal(node, reason, change.edits, local=local)


@dataclass
class Confirmer:
    """Pushes named files now and tells what the store made of each."""

    cache: SyncFace
    ledger: Ledger
    pusher: Pusher
    _: KW_ONLY
    read_only: bool
    lock: trio.Lock
    full_pass: Callable[[], Awaitable[object]]

    async def confirm(self, paths: list[str], timeout: float) -> list[Confirmation]:
        """Each of `paths` (memory paths, `/a/b.md`) pushed and answered within
        `timeout` seconds; a read-only store answers at once."""
        if self.read_only:
            return [Confirmation(p, Outcome.REFUSED, reason=READ_ONLY_REASON) for p in paths]
        failure: StoreError | None = None
        cause = STILL_PENDING
        with trio.move_on_after(timeout) as scope:
            try:
                await self._push_all(paths)
                if any(self._unsettled(p) for p in paths):
                    await self.full_pass()
                    await self._push_all(paths)
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
        return [self._outcome(p, refused, cause) for p in paths]

    async def _push_all(self, paths: list[str]) -> None:
        async with self.lock:
            for path in paths:
                node = self.cache.find(path)
                if node is None or node.is_dir or not node.pending:
                    continue
                await self.pusher.push(Change.of(node), PassReport(), final=True, asked=True)

    def _unsettled(self, path: str) -> bool:
        """Whether the file is still pending for a reason a listing of the
        store may settle (a conflict), not for its content or size."""
        node = self.cache.find(path)
        if node is None or node.is_dir or not node.pending or node.too_large:
            return False
        return not self.ledger.content_refused(node) and overruled_copy(node) is None

    def _outcome(self, path: str, refused: bool, cause: str) -> Confirmation:
        if path == "/" + MARKER_NAME:
            return Confirmation(path, Outcome.REFUSED, reason=marker_state().reason)
        node = self.cache.find(path)
        if node is None or node.is_dir:
            return Confirmation(
                path, Outcome.NOT_CONFIRMED, reason="the file was moved or removed meanwhile"
            )
        state = file_state(node)
        if state.state is SyncState.OVERRULED:
            return Confirmation(
                path, Outcome.OVERRULED, state.memory_id, state.sha256, kept_copy=state.kept_copy
            )
        if state.state is SyncState.SYNCED:
            return Confirmation(path, Outcome.SAVED, state.memory_id, state.sha256)
        if state.state is SyncState.PENDING:
            outcome = Outcome.REFUSED if refused else Outcome.NOT_CONFIRMED
            return Confirmation(path, outcome, state.memory_id, state.sha256, cause)
        return Confirmation(path, Outcome.REFUSED, state.memory_id, state.sha256, state.reason)
