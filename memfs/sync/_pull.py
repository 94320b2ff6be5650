"""Applying the store's changes here, memory by memory, as `decide` says; the kernel is told to
forget exactly what changed. A change that would replace or remove a file open for writing waits
until no writer is half way through it; one whose conflict copy cannot be written whole waits too,
the local version kept as it is."""

from __future__ import annotations

import contextlib

from .._exceptions import CacheDiskFull, CacheError, ConflictCopyFailed, NotFound, StoreError
from ..api import MARKER_PATH, MAX_NAME_BYTES, content_sha256, listed_path_problem
from ..cache import Node, StoredMemory, Tombstone, Upload
from ._decide import Action, Local, Remote, decide, remote_state
from ._shared import (
    KernelNotifier,
    NoKernel,
    Part,
    PassReport,
    RemoteMemory,
    Shared,
    each,
    log,
    whole_store,
)

WAITS_FOR_WRITERS = frozenset({Action.PULL, Action.PULL_KEEP_LOCAL, Action.REMOVE_LOCAL})
"""Actions that replace or remove a file's content: they wait until no writer holds it
open, since a writer goes on at its own offsets and would write into the store's version."""


class Puller(Part):
    """Shows the store's state in the cache (and tells the kernel)."""

    def __init__(self, shared: Shared, *, read_only: bool) -> None:
        super().__init__(shared)
        self.read_only = read_only
        self.kernel: KernelNotifier = NoKernel()
        self._fetched: dict[str, tuple[bytes, str]] = {}
        self._sent_by_memory: dict[str, Upload] = {}
        self._sent_creates: dict[tuple[str, str], Upload] = {}
        self.not_shown: dict[str, tuple[str, str]] = {}
        """id -> (path, reason): memories this folder does not show, for `memfs status`."""
        self.waiting: dict[str, tuple[str, str]] = {}
        """id -> (path, reason): changes that wait for a conflict copy to be written."""

    async def fetch_content(self, memory_id: str) -> tuple[bytes, str]:
        memory = await self.client.get_memory(self.store_id, memory_id, view="full")
        content = (memory.content or "").encode("utf-8")
        return content, content_sha256(content)

    def expect_own_writes(self, sent: list[Upload]) -> None:
        """The uploads in flight at the start of the pass, to recognise in the store."""
        self._sent_by_memory = {u.memory_id: u for u in sent if u.memory_id is not None}
        self._sent_creates = {(u.path, u.sha): u for u in sent if u.memory_id is None}

    def done(self) -> None:
        self._fetched.clear()
        self._sent_by_memory, self._sent_creates = {}, {}

    async def apply_all(
        self,
        remote: dict[str, RemoteMemory],
        report: PassReport,
        *,
        limit: int,
        in_one_commit: bool = False,
    ) -> None:
        """Fetch what must be pulled in parallel, then decide memory by memory;
        `in_one_commit` before the mount, when nothing else uses the cache."""
        wanted = [r for r in remote.values() if self._wants_content(r)]
        await each(wanted, self._fetch_ahead, limit)
        with self.cache.batch() if in_one_commit else contextlib.nullcontext():
            for r in remote.values():
                try:
                    await self.apply(r, report)
                except StoreError as e:
                    if whole_store(e):
                        raise
                    self.ledger.log_once(
                        r.memory_id,
                        f"cannot pull {r.path or r.memory_id} from the store: {e}",
                        event="pull_failed",
                        path=r.path,
                    )
                    self.ledger.need_listing = True
                except CacheDiskFull as e:  # the cache said so once itself
                    log.info(
                        f"cannot place {r.path or r.memory_id} from the store now: {e}",
                        extra={"event": "pull_disk_full", "path": r.path},
                    )
                    self.ledger.need_listing = True
                except (CacheError, OSError) as e:
                    self._cannot_show(r, e)
                    self.ledger.need_listing = True

    def _cannot_show(self, r: RemoteMemory, e: Exception) -> None:
        path = r.path or r.memory_id
        log.warning(
            "cannot show %s from the store here: %s",
            path,
            e,
            extra={"event": "not_shown", "path": r.path},
        )
        self.not_shown[r.memory_id] = (path, str(e))

    def _unshowable(self, r: RemoteMemory) -> bool:
        """Whether the store's path for `r` cannot stand for a file here: not a clean memory
        path (`listed_path_problem`), the marker's, or a name over 255 bytes. Such a memory
        is never shown, written or deleted; it is recorded in `not_shown` and logged once."""
        path = r.path
        key = ("not_shown", r.memory_id)
        problem = listed_path_problem(path)
        if path == MARKER_PATH:
            self.ledger.log_once(
                key,
                f"the store holds a memory at {MARKER_PATH}, the marker's path; it is not shown",
                event="marker_taken",
                path=MARKER_PATH,
            )
            self.not_shown[r.memory_id] = (MARKER_PATH, "the marker's path, which memfs keeps")
        elif problem is None and path is not None:
            if all(len(part.encode("utf-8")) <= MAX_NAME_BYTES for part in path.split("/")):
                self.not_shown.pop(r.memory_id, None)
                return False
            self.ledger.log_once(
                key,
                f"the store holds {path}, with a name over {MAX_NAME_BYTES} bytes that no "
                "folder here can show; it is not shown, and left as it is in the store",
                event="name_unshowable",
                path=path,
            )
            self.not_shown[r.memory_id] = (path, f"a name over {MAX_NAME_BYTES} bytes")
        else:
            shown = path if isinstance(path, str) else repr(path)
            reason = problem or "it has no path"
            self.ledger.log_once(
                key,
                f"the store lists the memory {r.memory_id} at {shown!r}, which is not shown: "
                f"{reason}; it is left as it is in the store",
                event="path_unshowable",
                path=shown,
            )
            self.not_shown[r.memory_id] = (shown, reason)
        return True

    def _wants_content(self, r: RemoteMemory) -> bool:
        """Whether applying `r` will likely pull its content (fetched ahead, in parallel)."""
        if r.deleted or listed_path_problem(r.path) is not None:
            return False
        sent = self._sent_by_memory.get(r.memory_id)
        if sent is not None and sent.sha == r.sha:
            return False
        stone = self.cache.tombstones.get(r.memory_id)
        if stone is not None:
            return r.sha != stone.base_sha
        node = self.cache.node_of_memory(r.memory_id)
        return (
            node is not None
            and r.sha != node.base_sha
            and (node.cached or node.live.open_count > 0)
            and not node.live.writers
            and self.cache.local_sha(node) != r.sha
        )

    async def _fetch_ahead(self, r: RemoteMemory) -> None:
        try:
            self._fetched[r.memory_id] = await self.fetch_content(r.memory_id)
        except StoreError as e:
            if whole_store(e):
                raise
            # Applying `r` fetches again and decides what the failure means.

    def _states(
        self, r: RemoteMemory, node: Node | None, stone: Tombstone | None
    ) -> tuple[Local, Remote]:
        if node is not None:
            if self.cache.changed_here(node):
                local = Local.EDITED
            else:
                local = Local.MOVED if node.path != node.base_path else Local.UNCHANGED
            return local, remote_state(node.base_sha, node.base_path, r.sha, r.path)
        if stone is not None:
            return Local.DELETED, remote_state(stone.base_sha, stone.path, r.sha, r.path)
        return Local.ABSENT, Remote.DELETED if r.deleted else Remote.CHANGED

    def _own_write(self, r: RemoteMemory, node: Node | None, stone: Tombstone | None) -> bool:
        if r.deleted:
            return False
        sent = self._sent_by_memory.get(r.memory_id)
        if sent is not None and (node is not None or stone is not None):
            return sent.sha == r.sha and sent.path == r.path
        return node is None and stone is None and (r.path, r.sha) in self._sent_creates

    async def apply(self, r: RemoteMemory, report: PassReport) -> None:
        """The decision table, for one memory the store reports changed."""
        cache = self.cache
        node = cache.node_of_memory(r.memory_id)
        stone = cache.tombstones.get(r.memory_id)
        listed = r
        if r.deleted:
            self.not_shown.pop(r.memory_id, None)
        elif self._unshowable(r):
            if node is None and stone is None:
                return
            # What is here of it goes as if the store had deleted it, and nothing
            # is ever sent for it (it is not at a path memfs may use).
            r = RemoteMemory(r.memory_id, deleted=True)
        self.waiting.pop(r.memory_id, None)
        local, remote = self._states(r, node, stone)
        action = decide(
            local,
            remote,
            read_only=self.read_only,
            own_write=self._own_write(r, node, stone),
            same_bytes=node is not None and r.sha is not None and cache.local_sha(node) == r.sha,
        )
        if action in (Action.NOTHING, Action.PUSH, Action.DELETE_REMOTE):
            return
        if node is not None and action in WAITS_FOR_WRITERS and node.live.writers:
            self._wait_for_writers(listed, node)
            return
        if action is Action.AGREE:
            self._agree(r, node)
            return
        if action is Action.FORGET_DELETE:
            cache.tombstone_done(r.memory_id)
            return
        if action is Action.RESTORE:
            log.warning(
                "%s was deleted here but changed in the store: the store's version is restored",
                r.path,
                extra={"event": "delete_undone", "path": r.path},
            )
            cache.tombstone_done(r.memory_id)
            await self.place(r, report, fetch=True)
            return
        if action is Action.SHOW:
            await self.place(r, report, fetch=False)
            return
        assert node is not None
        if action is Action.ADOPT:
            await self._adopt(r, node, report)
        elif action is Action.REMOVE_LOCAL:
            await self.remove_local(node, report)
        elif action is Action.RECREATE:
            log.warning(
                "%s was deleted in the store but changed here: it will be created again",
                node.path,
                extra={"event": "recreated", "path": node.path},
            )
            cache.forget_memory(node)
        elif action is Action.KEEP_LOCAL:
            log.warning(
                f"{node.path} was deleted in the store; the local copy is kept",
                extra={"event": "remote_delete_kept", "path": node.path},
            )
            cache.forget_memory(node)
        elif action is Action.FOLLOW_MOVE:
            assert r.path is not None
            await self._follow_move(node, r.path, report)
        elif action is Action.PULL_KEEP_LOCAL:
            try:
                copy = cache.keep_conflict_copy(node)
            except ConflictCopyFailed as e:
                self._wait_for_copy(listed, node.path, e)
                return
            log.warning(
                "conflict on %s: changed here and in the store; the store's version wins, "
                "the local version is kept at %s",
                node.path,
                copy,
                extra={"event": "conflict_copy", "path": node.path},
            )
            report.conflicts += 1
            placed = await self.place(r, report, fetch=node.cached or node.live.open_count > 0)
            if placed is not None:
                self.cache.note_overruled(placed, copy)
        else:
            assert action is Action.PULL
            await self.place(r, report, fetch=node.cached or node.live.open_count > 0)

    def _wait_for_writers(self, r: RemoteMemory, node: Node) -> None:
        self.ledger.deferred[r.memory_id] = r
        log.info(
            "%s changed in the store while open for writing here; the change waits "
            "until it is closed",
            node.path,
            extra={"event": "pull_waits_for_writer", "path": node.path},
        )

    def _wait_for_copy(self, r: RemoteMemory, path: str, e: ConflictCopyFailed) -> None:
        self.ledger.deferred[r.memory_id] = r
        self.waiting[r.memory_id] = (
            path,
            f"the store's version waits: {e}; the local version is kept as it is",
        )
        self.ledger.log_once(
            ("waiting", r.memory_id),
            f"the store's version of {path} waits: {e}; the local version is kept as it is",
            event="conflict_copy_failed",
            path=path,
        )

    async def _adopt(self, r: RemoteMemory, node: Node, report: PassReport) -> None:
        """The store's path wins unless only this side moved the file."""
        await self.place(r, report, fetch=False)
        log.info(
            "%s already holds the store's version: agreed",
            node.path,
            extra={"event": "agreed", "path": node.path},
        )

    def _agree(self, r: RemoteMemory, node: Node | None) -> None:
        """The store holds exactly what memfs sent (the answer was lost): agree on it."""
        assert r.path is not None and r.sha is not None
        cache = self.cache
        if node is None and r.memory_id not in cache.tombstones:
            sent = self._sent_creates[(r.path, r.sha)]
            owner = cache.nodes.get(sent.node_id)
            if owner is not None and not owner.orphan and not owner.is_dir and not owner.memory_id:
                node = owner
        if node is not None:
            cache.adopt_own_write(node, r.memory_id, r.sha, r.path)
        else:
            cache.retarget_tombstone(r.memory_id, r.path, r.sha)
        log.info(
            "%s: the store holds memfs's own upload (its answer was lost)",
            r.path,
            extra={"event": "own_write", "path": r.path},
        )

    async def _follow_move(self, node: Node, path: str, report: PassReport) -> None:
        mine = node.path if node.path not in (node.base_path, path) else None
        try:
            gone = self.cache.follow_remote_move(node, path)
        except CacheError as e:
            log.warning(
                "cannot follow the move of %s to %s: %s",
                node.path,
                path,
                e,
                extra={"event": "move_not_followed", "path": path},
            )
            self.ledger.need_listing = True  # the next pass places it from a whole listing
            return
        report.moved += 1
        if mine is not None:
            log.warning(
                "conflict on %s: moved here and in the store; the store's name %s wins",
                mine,
                path,
                extra={"event": "move_conflict", "path": mine},
            )
            report.conflicts += 1
        for parent, name in gone:
            await self.kernel.forget_entry(parent, name)

    async def place(self, r: RemoteMemory, report: PassReport, *, fetch: bool) -> Node | None:
        """Show the store's memory `r` here, a local file in its way with changes the
        store has not seen kept as a conflict copy; None: it waits, is unshown or gone (404)."""
        if self._unshowable(r):
            return None
        assert r.path is not None and r.sha is not None
        old = self.cache.node_of_memory(r.memory_id)
        in_way = self.cache.in_the_way(r.path, old)
        if busy := [f for f in in_way if f.live.writers]:
            self._wait_for_writers(r, busy[0])
            return None
        again = [  # memories taken out of the way, still at their own paths in the store
            RemoteMemory(f.memory_id, f.base_path, f.base_sha, f.size)
            for f in in_way
            if f.memory_id not in (None, r.memory_id)
        ]
        content = None
        if fetch:
            try:
                ahead = self._fetched.pop(r.memory_id, None)
                content, sha = ahead or await self.fetch_content(r.memory_id)
            except NotFound:
                return None
            r.sha, r.size = sha, len(content)
        old_place = (old.parent, old.name) if old is not None else None
        try:
            stored = StoredMemory(r.memory_id, r.path, r.sha, r.size)
            placed = self.cache.place_remote(stored, content, node=old)
        except ConflictCopyFailed as e:
            self._wait_for_copy(r, r.path, e)
            return None
        except CacheError as e:
            self._cannot_show(r, e)
            return None
        node = placed.node
        report.pulled += 1
        self.ledger.deferred.update((m.memory_id, m) for m in again)  # shown next pass
        for local, copy in placed.copies:
            if local == r.path:
                self.cache.note_overruled(node, copy)
            log.warning(
                "conflict on %s: changed here while the store put %s there; the store's "
                "version wins, the local version is kept at %s",
                local,
                r.path,
                copy,
                extra={"event": "conflict_copy", "path": local},
            )
            report.conflicts += 1
        for parent, name in placed.gone:
            await self.kernel.forget_entry(parent, name)
        if old_place is None:
            return node
        if old_place != (node.parent, node.name):
            report.moved += 1
        await self.kernel.forget_content(node.id)
        return node

    async def remove_local(self, node: Node, report: PassReport) -> None:
        parent = node.parent
        gone = self.cache.remove_remote(node)
        report.removed_local += 1
        for folder, name in gone:
            await self.kernel.forget_entry(folder, name)
        await self.kernel.forget_content(parent)
