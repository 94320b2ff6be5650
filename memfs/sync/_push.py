"""Pushing local changes: creates, updates with the base as precondition, moves. Every upload is
journalled before it is sent, so that a pass can recognise it in the store when its answer is
lost. A refusal of one memory is that memory's alone: content refusals (an update's 400, 413, not
UTF-8) wait for the file to change or a person's ask; a failed precondition makes the next pass
list the store; other refusals (402, 403, 409, a create's 400, unknown) are held and tried again
later or when the file changes; a 404 on an update that a read by the id confirms creates the
memory again at once. Only whole-store failures escape.

A path the store still gives another memory is cleared first when memfs
can: that memory's pending delete is sent, or its own move here is pushed
first. In a ring of moves (a swap of two names, each memory going where
the next one stands) one memory steps aside to `STEP_ASIDE` for a moment.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
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
    StoreError,
)
from ..api import MAX_CONTENT_BYTES, Memory, content_sha256
from ..cache import Change, Node, Upload
from ._deletes import DeletePacer
from ._shared import Hold, Part, PassReport, Shared, log, whole_store

NOT_UTF8 = "its content is not UTF-8 text"
STEP_ASIDE = "/.memfs-moving-{memory_id}"
"""Where a memory of a ring of moves waits while the others move: a path of
its own (no memory id repeats); should the store refuse it, the moves are
held as any path conflict is."""


def _note_refusal(node: Node, reason: str, edits: int, *, local: bool) -> None:
    """What the file's state shows (`memfs.cache.file_state`) while it is not changed again."""
    live = node.live
    live.refusal, live.refusal_local, live.refused_at = reason, local, edits


class Pusher(Part):
    """Sends what changed here to the store, file by file."""

    def __init__(self, shared: Shared, pacer: DeletePacer) -> None:
        super().__init__(shared)
        self.pacer = pacer
        self._waiting: set[str] = set()
        """Memories whose push waits for another memory to leave their path."""
        self._clearing = trio.Lock()

    async def push(
        self,
        change: Change,
        report: PassReport,
        *,
        final: bool,
        asked: bool = False,
        clearing: bool = False,
    ) -> None:
        """Push the file `change` names, as it is now. `asked`: a person asked, and a refused
        file is tried again at once. `clearing`: to clear another push's path (`_clear_path`)."""
        cache = self.cache
        node = cache.nodes.get(change.node_id)
        if node is None or node.orphan or not node.pending:
            return
        if node.memory_id in self.ledger.deferred:
            return  # the store's newer version waits (writers, a copy): a push would fail
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
                cleared = await self._after_conflict(e, send, node, memory_id, report, clearing)
                if cleared is None:
                    return  # pushed meanwhile, to clear another push's path
                memory = cleared
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
            await self._refused_by_store(
                change, node, sha, e, report, final=final, asked=asked, clearing=clearing
            )
            return
        report.pushed += 1
        # An update's answer at another path is the store's own move: the next pull follows it.
        stored_at = memory.path if memory_id is None else path
        try:
            with cache.transaction():
                cache.upload_answered(node.id)
                cache.mark_pushed(
                    change, memory_id=memory.id, sha=memory.content_sha256, path=stored_at
                )
        except CacheDiskFull:
            return  # the store holds it: the upload's record tells the next pass so
        self._cleared(node.id, path)

    async def _after_conflict(
        self,
        e: PathConflict,
        send: Callable[[], Awaitable[Memory]],
        node: Node,
        mover: str | None,
        report: PassReport,
        clearing: bool,
    ) -> Memory | None:
        """Send again once the memory standing in the way left, or raise `e`; None
        when the file was pushed meanwhile. The pushes of a pass run at once;
        the clearing of paths goes one at a time."""
        taker = e.conflicting_memory_id
        if await self.pacer.send_now(taker):
            return await send()
        if self._moving_away(taker) is None:
            raise e
        async with contextlib.nullcontext() if clearing else self._clearing:
            if not clearing:
                if not node.pending:
                    return None
                try:
                    return await send()  # another push may have cleared the path meanwhile
                except PathConflict as again:
                    taker = again.conflicting_memory_id
                    if self._moving_away(taker) is None:
                        raise
            await self._clear_path(taker, mover, report)
            return await send()

    def _moving_away(self, memory_id: str | None) -> Node | None:
        """The file here holding `memory_id` with a change still to push (a move
        away from where the store has it, most often), if any."""
        holder = self.cache.node_of_memory(memory_id or "")
        if holder is None or holder.orphan or not holder.pending:
            return None
        return holder

    async def _clear_path(self, taker: str | None, mover: str | None, report: PassReport) -> None:
        """Push the move of the memory `taker`, which stands where `mover` goes; or,
        when it closes a ring of moves that waits for `mover`, move it aside."""
        holder = self._moving_away(taker)
        if taker is None or holder is None:
            return
        if taker in self._waiting:
            await self._step_aside(holder, taker)
            return
        if mover is not None:
            self._waiting.add(mover)
        try:
            await self.push(Change.of(holder), report, final=True, clearing=True)
        finally:
            self._waiting.discard(mover or "")

    async def _step_aside(self, node: Node, memory_id: str) -> None:
        """Move the memory to its `STEP_ASIDE` path, its base following (journalled
        first, as every upload is); nothing when the store refuses."""
        change = Change.of(node)
        aside = STEP_ASIDE.format(memory_id=memory_id)
        sha = change.base_sha or ""
        try:
            self.cache.record_upload(Upload(node.id, memory_id, aside, sha))
            memory = await self.client.update_memory(
                self.store_id, memory_id, path=aside, precondition_sha256=sha or None
            )
        except (StoreError, CacheDiskFull) as e:
            if isinstance(e, StoreError) and whole_store(e):
                raise
            return
        with self.cache.transaction():
            self.cache.upload_answered(node.id)
            self.cache.mark_pushed(
                change, memory_id=memory.id, sha=memory.content_sha256, path=memory.path
            )
        log.info(
            "%s stands at %s in the store for a moment: the names it is moved between are swapped",
            node.path,
            aside,
            extra={"event": "stepped_aside", "path": node.path},
        )

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
        asked: bool,
        clearing: bool,
    ) -> None:
        """One memory refused: decide what it means for that memory alone
        (`clearing`: as `push` says)."""
        if isinstance(e, NotFound) and change.memory_id is not None:
            if node.memory_id != change.memory_id:
                return  # the file took another memory while this one went: it is pushed next
            try:  # gone once its id answers 404 too, as for a listing; else held below
                await self.client.get_memory(self.store_id, change.memory_id, view="basic")
            except NotFound:
                log.warning(
                    "%s was deleted in the store; it is created again",
                    change.path,
                    extra={"event": "recreated", "path": change.path},
                )
                self.cache.forget_memory(node)
                await self.push(
                    Change.of(node), report, final=final, asked=asked, clearing=clearing
                )
                return
        if isinstance(e, PreconditionFailed):
            log.info("%s changed in the store meanwhile; the next pass pulls it", change.path)
            self.ledger.need_listing = True
            return
        if isinstance(e, RequestTooLarge):
            self._refuse(change, sha, f"the store refused it as too large: {e.message}")
            return
        if isinstance(e, InvalidRequest) and change.memory_id is not None:
            self._refuse(change, sha, f"the store refused it: {e.message}")
            return  # a create's 400 is the store's (full, archived): it is held below
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
        once, retried once it changes or when asked; no stop leaves it behind."""
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
