"""Confirmed saves (`memfs sync FILE`): push the named files now and say, file
by file, whether the store holds them.

They are pushed as a pass pushes them, with the quiet time and the backoff of
refused files waived (a person asked). A file refused because another version
stands in its way (a 409) is settled as a pass settles it, by one full pass.
Whatever is not answered within the timeout, or meets a failure of the whole
store, stays pending: later passes push it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass

import trio

from .._exceptions import StatusError, StoreError, SyncError
from ..api import MARKER_NAME, Confirmation, Outcome
from ..cache import (
    READ_ONLY_REASON,
    Change,
    SyncFace,
    SyncState,
    file_state,
    marker_state,
    overruled_copy,
)
from ._push import Pusher
from ._shared import Ledger, PassReport

STILL_PENDING = "it is still pending: a later pass pushes it"


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
