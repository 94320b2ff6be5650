"""Deleting in the store what was deleted here: slowly, and never a wipe.

A tool that deletes and re-creates a tree (`git checkout`, `rsync --delete`)
must not empty a shared store. So a delete is sent only once a pass at least
`delete_window` seconds after the first pass that saw it still finds the file
missing (a delete made again after a re-create starts a window of its own),
at most max(8, min(50, n/4)) a pass, re-checked just before sending and sent
with `expected_content_sha256`; a 409 or 412 restores the store's version.
When every file of a store that had more than one is missing at once, that
is a wipe: nothing is deleted and the files are restored.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from .._exceptions import Conflict, NotFound, PreconditionFailed, StatusError, StoreError
from ..cache import Tombstone
from ._ledger import (
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
from ._pull import Puller


class DeletePacer(Part):
    """Sends local deletes to the store, paced, capped and corroborated."""

    def __init__(
        self, shared: Shared, puller: Puller, *, deletions: Deletions, delete_window: float
    ) -> None:
        super().__init__(shared)
        self.puller = puller
        self.deletions = deletions
        self.delete_window = delete_window
        self._first_missing: dict[str, tuple[float, float]] = {}
        """memory id -> (its pending delete's time, the first pass that saw that delete)."""
        self._logged_only: set[str] = set()

    # ---------------------------------------------------------------- wipes

    def is_wipe(self) -> bool:
        """Every file of a store that had more than one is missing at once."""
        if self.deletions is not Deletions.ENABLED or len(self.cache.tombstones) < 2:
            return False
        return not any(n.memory_id is not None for n in self.cache.files())

    async def undo_wipe(self, relist: Callable[[], Awaitable[None]], report: PassReport) -> None:
        """Delete nothing; forget the pending deletes and `relist` the store so that
        its files come back."""
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
        await relist()

    # -------------------------------------------------------------- deletes

    async def run(self, report: PassReport, *, final: bool, limit: int) -> None:
        cache = self.cache
        if not cache.tombstones or self.deletions is Deletions.DISABLED:
            return
        if self.deletions is Deletions.LOG_ONLY:
            for stone in list(cache.tombstones.values()):
                if stone.memory_id not in self._logged_only:
                    log.warning(
                        "%s was deleted here; not deleted in the store (deletions: log_only)",
                        stone.path,
                        extra={"event": "delete_logged", "path": stone.path},
                    )
                    self._logged_only.add(stone.memory_id)
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
            hold = self.ledger.delete_holds.get(memory_id)
            return hold is not None and now < hold.retry_at and not final

        due = [
            s
            for s in cache.tombstones.values()
            if (final or now - self._first_missing[s.memory_id][1] >= self.delete_window)
            and not held(s.memory_id)
        ]
        cap = delete_cap(cache.file_count() + len(cache.tombstones))
        chosen = sorted(due, key=lambda s: self._first_missing[s.memory_id][1])[:cap]
        await each(chosen, lambda s: self._delete(s, report), limit)
        if len(due) > cap:
            log.info(
                "%d deletes wait for the next pass (at most %d a pass)",
                len(due) - cap,
                cap,
                extra={"event": "deletes_capped"},
            )

    async def _delete(self, stone: Tombstone, report: PassReport) -> None:
        cache = self.cache
        if stone.memory_id not in cache.tombstones or cache.node_of_memory(stone.memory_id):
            return  # taken back since
        try:
            await self.client.delete_memory(
                self.store_id, stone.memory_id, expected_content_sha256=stone.base_sha or None
            )
        except NotFound:
            pass
        except StoreError as e:
            if whole_store(e):
                raise
            if isinstance(e, (PreconditionFailed, Conflict)) or (
                isinstance(e, StatusError) and e.status in (409, 412)
            ):
                await self._restore(stone, report)
                return
            self.ledger.delete_holds[stone.memory_id] = Hold.after(
                self.ledger.delete_holds.get(stone.memory_id), 0, self.clock(), str(e)
            )
            self.ledger.log_once(
                stone.memory_id,
                f"{stone.path} is not deleted in the store: it refused ({e}); tried again later",
                event="delete_refused",
                path=stone.path,
            )
            report.refused += 1
            return
        cache.deleted_in_store(stone.memory_id)
        self.ledger.delete_holds.pop(stone.memory_id, None)
        self.ledger.logged.pop(stone.memory_id, None)
        report.deleted_remote += 1

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
        await self.puller.place(
            RemoteMemory(m.id, m.path, m.content_sha256, m.content_size_bytes), report, fetch=True
        )
