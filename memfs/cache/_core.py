"""The parts of one store's cache, and the steps that change several at once.

Each part owns one kind of state and its indexes: the tree of names (`Tree`,
which the cache is), the contents (`Contents`), what is agreed with the store
(`Agreements`), durability (`Journal`) and conflict copies
(`ConflictCopies`). `CacheParts` holds them and does the steps that span
parts: a node made (`_insert`), a local change recorded (`_record_change`),
a node taken out of the tree (`_detach`). The faces `LocalChanges` and
`SyncChanges` use these only; `StoreCache` is both.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
from collections.abc import Awaitable, Callable

import trio

from .._exceptions import CacheDiskFull
from .._private import ensure_private_dir
from ..api import MAX_MEMORIES, check_store_id
from ._agreed import Agreements
from ._conflicts import ConflictCopies
from ._contents import Contents
from ._journal import Journal
from ._node import ROOT_ID, Gone, Node, NodeKind, Tombstone
from ._tree import Tree

log = logging.getLogger("memfs.cache")

DEFAULT_BUDGET_BYTES = 256 * 1024 * 1024
"""The clean contents a cache keeps before it evicts (`--cache-size`)."""

HOUSEKEEPING_QUIET = 5.0
"""Seconds between housekeeping's looks at most, while nothing is committed."""

ContentSource = Callable[[str], Awaitable[tuple[bytes, str]]]
"""Fetches a memory's content by id: returns (content, content_sha256)."""


def now_ns() -> int:
    return time.time_ns()


class CacheParts(Tree):
    """The parts of one store's cache, under `<cache_dir>/<store_id>/`."""

    def __init__(
        self,
        root_dir: str,
        store_id: str,
        *,
        budget_bytes: int = DEFAULT_BUDGET_BYTES,
        source: ContentSource | None = None,
        max_memories: int = MAX_MEMORIES,
    ) -> None:
        super().__init__()
        self.store_id = check_store_id(store_id)
        self.dir = os.path.join(root_dir, store_id)
        self.source = source
        """Where content that is not here yet comes from (the composition root sets it)."""
        self.budget_bytes = budget_bytes
        self.max_memories = max_memories
        self._said_full = False
        self._writes = 0
        """Writes and truncates since the cache opened (housekeeping looks more
        often while they come)."""
        self._unsaved: set[Node] = set()
        """Files written since their row was last saved (their sizes and times:
        the content files hold them meanwhile)."""
        ensure_private_dir(root_dir, "cache folder", follow=True)
        ensure_private_dir(self.dir, "cache folder")
        self.conflicts = ConflictCopies(os.path.join(self.dir, "conflicts"))
        self.journal = Journal(os.path.join(self.dir, "journal.sqlite3"), store_id=store_id)
        self.contents = Contents(self.journal, budget_bytes, self.nodes.get)
        self.agreed = Agreements(self.journal)
        self._load()

    def _load(self) -> None:
        nodes = list(self.journal.nodes())
        self.load(nodes)
        files = [n for n in nodes if n.kind is NodeKind.FILE]
        self.journal.files.sweep({n.id for n in files if n.cached or n.edited})
        # Contents are the truth for sizes, and for an edited file's times (a kill
        # may have left its row behind); a cached file without a content file is empty.
        for node in files:
            if node.cached or node.edited:
                st = self.journal.files.stat(node.id)
                node.cached, node.size = True, st.st_size if st is not None else 0
                if st is not None and node.edited and st.st_mtime_ns > node.mtime_ns:
                    node.mtime_ns = st.st_mtime_ns
                    node.ctime_ns = max(node.ctime_ns, node.mtime_ns)
            if node.cached and not node.edited:
                self.contents.evictable(node)
        self.agreed.load(files, list(self.journal.tombstones()))

    # ------------------------------------------------------------- views

    @property
    def tombstones(self) -> dict[str, Tombstone]:
        """memory id -> a memory deleted here and not yet in the store."""
        return self.agreed.tombstones

    @property
    def db(self) -> sqlite3.Connection:
        """The journal's connection (for tests and counters)."""
        return self.journal.db

    @property
    def conflicts_dir(self) -> str:
        return self.conflicts.dir

    @property
    def full(self) -> bool:
        """The store will hold as many memories as it may once pending changes land."""
        return self.file_total + len(self.tombstones) >= self.max_memories

    @property
    def disk_full(self) -> bool:
        """The cache's disk is full: changes to the files are refused (ENOSPC)."""
        return self.journal.disk_full

    def cached_bytes(self) -> int:
        return sum(n.size for n in self.files() if n.cached)

    def node_of_memory(self, memory_id: str) -> Node | None:
        """The file that holds this memory here, if any (the memory-id index)."""
        return self.agreed.holder(memory_id)

    def by_memory_id(self) -> dict[str, Node]:
        return self.agreed.holders()

    def memory_count(self) -> int:
        """Files here that hold a memory of the store."""
        return self.agreed.memory_count()

    def read_content(self, node: Node) -> bytes:
        """The whole local content of a cached file."""
        return self.contents.read(node)

    def get_meta(self, key: str) -> str | None:
        return self.journal.get_meta(key)

    def set_meta(self, key: str, value: str | None) -> None:
        self.journal.set_meta(key, value)

    def transaction(self) -> contextlib.AbstractContextManager[None]:
        """Group several changes in one journal transaction (one commit)."""
        return self.journal.transaction()

    def batch(self) -> contextlib.AbstractContextManager[None]:
        """One commit for many changes while nothing else runs (see `Journal.batch`)."""
        return self.journal.batch()

    def keep_conflict_copy(self, node: Node) -> str:
        """Copy the local content of a file outside the mount before the store's
        wins, whole and durably; returns the copy's path (see `ConflictCopies`)."""
        return self.conflicts.keep(node.path, self.read_content(node) if node.cached else b"")

    def tombstone_done(self, memory_id: str) -> None:
        """The pending delete of this memory is settled (sent, undone or moot)."""
        self.agreed.drop_tombstone(memory_id)

    # -------------------------------------------------------- background

    async def housekeeping(
        self, every: float = 0.2, busy: Callable[[], bool] = lambda: False
    ) -> None:
        """Runs while mounted: while the filesystem is idle (`busy` says whether
        requests came since the last call), does `drop_contents`, so that no
        request pays for it. It looks every `every` seconds while changes come,
        less often (up to `HOUSEKEEPING_QUIET` apart) while none does."""
        pause = every
        seen = -1
        while True:
            try:
                if not busy():
                    self.drop_contents()
            except (OSError, sqlite3.Error, CacheDiskFull) as e:
                log.warning(
                    "housekeeping of %s: %s", self.store_id, e, extra={"event": "housekeeping"}
                )
            committed = self.journal.committed + self._writes
            pause = min(2 * pause, HOUSEKEEPING_QUIET) if committed == seen else every
            seen = committed
            await trio.sleep(pause)

    def save_written(self) -> None:
        """Save the rows of the files written since (their sizes and times), in
        one commit."""
        if not self._unsaved or self.journal.disk_full:
            return
        with self.batch():
            while self._unsaved:
                node = self._unsaved.pop()
                if not node.orphan and node.id in self.nodes:
                    self.journal.save(node)

    def drop_contents(self) -> None:
        """What housekeeping does while the filesystem is idle, now: look for room
        on a full disk, save the rows of the files written, then the journal's
        pass (`Journal.when_idle`: the content files let go go too)."""
        self.journal.look_for_room()
        self.save_written()
        self.journal.when_idle()

    def close(self) -> None:
        with contextlib.suppress(CacheDiskFull, sqlite3.Error):
            self.save_written()
        for node in self.nodes.values():
            node.live.data = None
        self.journal.close()

    # ------------------------------------------- steps that span the parts

    def _insert(self, node: Node) -> Node:
        """A new node: its row, its place in the tree, its memory and whether it is
        pending in the indexes."""
        node.id = self.journal.insert(node)
        self.attach(node)
        if node.memory_id is not None:
            self.agreed.bind(node, node.memory_id, node.base_sha, node.base_path)
        if node.pending:
            self.agreed.set_pending(node)
        parent = self.nodes[node.parent]
        parent.mtime_ns = parent.ctime_ns = node.ctime_ns
        return node

    def _record_change(self, node: Node, *, content: bool) -> None:
        """Record a local change durably before the caller touches the content:
        the file is pending (and edited, for its `content`), never evicted."""
        node.live.edits += 1
        was = (node.edited, node.pending, node.kept_copy)
        if content:
            node.edited = True
        node.kept_copy = None
        self.agreed.set_pending(node)
        self.contents.kept(node)
        if (node.edited, node.pending, node.kept_copy) != was:
            self.journal.save(node)

    def _detach(self, node: Node, *, gone: Gone | None = None, tombstone: bool = True) -> None:
        """Take a node out of the tree; a file still open lives on as an orphan until
        released. A file with a memory becomes a pending delete (`tombstone`),
        unless the store itself took it away. `gone` collects the names taken
        out, for the kernel to forget."""
        if gone is not None:
            gone.append((node.parent, node.name))
        self.detach(node)
        parent = self.nodes[node.parent]
        parent.mtime_ns = parent.ctime_ns = now_ns()
        self.journal.delete(node.id)
        if node.is_dir:
            return
        self.contents.deleted(node)
        if node.memory_id is not None and tombstone:
            self.agreed.add_tombstone(
                node.memory_id, node.base_path or node.path, node.base_sha or ""
            )
        self.agreed.forget(node)
        node.edited = False
        if node.live.open_count > 0:
            node.live.orphan = True
        else:
            self._drop(node)

    def _drop(self, node: Node) -> None:
        self.forget(node)
        self._unsaved.discard(node)
        node.live.data = None

    def _prune_empty(self, dir_id: int, gone: Gone | None = None) -> None:
        """Folders the store implied go once nothing is left in them."""
        while dir_id != ROOT_ID:
            d = self.nodes.get(dir_id)
            if d is None or d.made_here or self.children.get(dir_id):
                return
            parent = d.parent
            self._detach(d, gone=gone)
            dir_id = parent
