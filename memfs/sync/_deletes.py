"""Deleting in the store what was deleted here: slowly, and never a wipe, so that a tool that
deletes and re-creates a tree (`git checkout`) cannot empty a shared store. A delete is sent once a
pass `DELETE_WINDOW` seconds after the first that saw it still finds the file missing, at most
`delete_cap` a pass, with `expected_content_sha256`; a 409 or 412 restores the store's version."""

from __future__ import annotations

from dataclasses import dataclass

from .._exceptions import NotFound, StatusError, StoreError
from ..cache import Tombstone
from ._pull import Puller
from ._shared import (
    DELETE_WINDOW,
    Deletions,
    Hold,
    Part,
    PassReport,
    RemoteMemory,
    Shared,
    delete_cap,
    each,
    log,
    whole_store,
)


@dataclass
class EndOfSession:
    """How the final sync sends deletes: whether it waives the window, and how
    many of one pass's cap are left for all its passes (None: not counted yet)."""

    waive_window: bool = True
    deletes_left: int | None = None
    cap: int = 0


class DeletePacer(Part):
    """Sends local deletes to the store, paced, capped and corroborated."""

    def __init__(self, shared: Shared, puller: Puller, *, deletions: Deletions) -> None:
        super().__init__(shared)
        self.puller = puller
        self.deletions = deletions
        self._first_missing: dict[str, tuple[float, float]] = {}
        """memory id -> (its pending delete's time, the first pass that saw that delete)."""
        self._dry_run_done: set[str] = set()
        """log_only: the pending deletes a dry run counts as sent."""
        self.held_at_end: dict[str, str] = {}
        """memory id -> why the final sync held its delete back."""

    def is_wipe(self) -> bool:
        """No file at all is left here of a store that had two or more."""
        if self.deletions is Deletions.DISABLED or len(self.cache.tombstones) < 2:
            return False
        return self.cache.file_count() == 0

    def undo_wipe(self) -> None:
        """Forget the pending deletes (the caller lists the store again)."""
        stones = list(self.cache.tombstones.values())
        log.warning(
            "every file of %s was deleted here at once (%d files): that looks like a wipe, "
            "not a request; nothing is deleted in the store and the files are restored from it",
            self.store_id,
            len(stones),
            extra={"event": "wipe"},
        )
        with self.cache.transaction():
            for stone in stones:
                self.cache.tombstone_done(stone.memory_id)
        self._first_missing.clear()

    async def run(
        self,
        report: PassReport,
        *,
        end: EndOfSession | None,
        limit: int,
        asked: bool,
        known: int,
    ) -> None:
        """Send the deletes due this pass (`asked`: a person asked, holds are
        waived); `known`, the n of the cap: the store's memories as last agreed."""
        cache = self.cache
        self.held_at_end.clear()
        if not cache.tombstones or self.deletions is Deletions.DISABLED:
            return
        now = self.clock()
        for memory_id in list(self._first_missing):
            if memory_id not in cache.tombstones:
                del self._first_missing[memory_id]
        self._dry_run_done &= set(cache.tombstones)
        for stone in cache.tombstones.values():
            seen = self._first_missing.get(stone.memory_id)
            if seen is None or seen[0] != stone.deleted_at:
                # A delete made again after a re-create starts a window of its own.
                self._first_missing[stone.memory_id] = (stone.deleted_at, now)
                self._dry_run_done.discard(stone.memory_id)
        waive = end is not None and end.waive_window
        pending = [s for s in cache.tombstones.values() if s.memory_id not in self._dry_run_done]
        due = []
        for stone in pending:
            hold = self.ledger.delete_holds.get(stone.memory_id)
            if hold is not None and now < hold.retry_at and end is None and not asked:
                continue
            if waive or now - self._first_missing[stone.memory_id][1] >= DELETE_WINDOW:
                due.append(stone)
        # A dry run counts its logged deletes as sent.
        cap = delete_cap(known - (len(cache.tombstones) - len(pending)))
        if end is not None:
            if end.deletes_left is None:
                end.deletes_left = end.cap = cap
            cap = end.deletes_left
        chosen = sorted(due, key=lambda s: self._first_missing[s.memory_id][1])[:cap]
        if self.deletions is Deletions.LOG_ONLY:
            for stone in chosen:
                log.warning(
                    "%s was deleted here; not deleted in the store: memfs would delete it now "
                    "(deletions: log_only)",
                    stone.path,
                    extra={"event": "delete_logged", "path": stone.path},
                )
                self._dry_run_done.add(stone.memory_id)
        else:
            await each(chosen, lambda s: self._delete(s, report), limit)
        if end is not None:
            end.deletes_left = max(0, cap - len(chosen))
            sent = {s.memory_id for s in chosen}
            due_ids = {s.memory_id for s in due}
            for stone in pending:
                if stone.memory_id in sent:
                    continue
                if stone.memory_id in due_ids:
                    why = f"held back: the end of a session sends at most {end.cap} deletes"
                elif not end.waive_window:
                    why = (
                        f"held back: deleted less than {DELETE_WINDOW:.0f} s before a stop "
                        "that writers may outlive"
                    )
                else:
                    why = "held back: the store refused it"
                self.held_at_end[stone.memory_id] = why
        if len(due) > cap:
            log.info(
                "%d deletes wait for the next pass (at most %d a pass)",
                len(due) - cap,
                cap,
                extra={"event": "deletes_capped"},
            )

    async def send_now(self, memory_id: str | None) -> bool:
        """Whether the pending delete of `memory_id`, whose path a push needs,
        was sent now (the push corroborates it: no window)."""
        stone = self.cache.tombstones.get(memory_id or "")
        if stone is None or self.deletions is not Deletions.ENABLED:
            return False
        return await self._send(stone) is None

    async def _send(self, stone: Tombstone) -> StoreError | None:
        """Send one delete; the store's refusal of that memory, if it refused."""
        try:
            await self.client.delete_memory(
                self.store_id, stone.memory_id, expected_content_sha256=stone.base_sha or None
            )
        except NotFound:
            pass
        except StoreError as e:
            if whole_store(e):
                raise
            return e
        self.cache.deleted_in_store(stone.memory_id)
        return None

    async def _delete(self, stone: Tombstone, report: PassReport) -> None:
        cache = self.cache
        if stone.memory_id not in cache.tombstones or cache.node_of_memory(stone.memory_id):
            return  # taken back since
        e = await self._send(stone)
        if e is None:
            self.ledger.delete_holds.pop(stone.memory_id, None)
            self.ledger.logged.pop(stone.memory_id, None)
            report.deleted_remote += 1
        elif isinstance(e, StatusError) and e.status in (409, 412):
            await self._restore(stone, report)
        else:
            self.ledger.delete_holds[stone.memory_id] = Hold.after(
                self.ledger.delete_holds.get(stone.memory_id), 0, self.clock(), str(e)
            )
            self.ledger.log_once(
                stone.memory_id,
                f"{stone.path} is not deleted in the store: it refused ({e}); tried again later",
                event="delete_refused",
                path=stone.path,
            )

    async def _restore(self, stone: Tombstone, report: PassReport) -> None:
        """A delete the store refused because the memory changed: show its version."""
        log.warning(
            "%s was deleted here but changed in the store: the store's version is restored",
            stone.path,
            extra={"event": "delete_undone", "path": stone.path},
        )
        self.cache.tombstone_done(stone.memory_id)
        try:
            m = await self.client.get_memory(self.store_id, stone.memory_id, view="basic")
        except NotFound:
            return
        await self.puller.place(RemoteMemory.of(m), report, fetch=True)
