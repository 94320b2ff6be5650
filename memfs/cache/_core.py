"""`CacheParts`: the tree of one store's cache, holding its contents, journal
and conflict copies, keeping what is agreed with the store (bases, the
memory-id index, pending files and deletes), and doing the steps that change
several parts at once. `LocalChanges` and `SyncChanges` build on it.
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
from ..api import MAX_MEMORIES, check_store_id, content_sha256
from ._conflicts import ConflictCopies
from ._contents import Contents
from ._journal import Journal
from ._node import ROOT_ID, Gone, Node, NodeKind, Tombstone
from ._tree import Tree

log = logging.getLogger("memfs.cache")

DEFAULT_BUDGET_BYTES = 256 * 1024 * 1024
"""The clean contents a cache keeps before it evicts (`--cache-size`)."""
DEFAULT_MEMORY_BYTES = 8 * 1024 * 1024
"""The whole contents a cache keeps in memory (`--cache-memory`)."""

HOUSEKEEPING_QUIET = 5.0
"""Seconds between housekeeping's looks at most, while nothing is committed."""

ContentSource = Callable[[str], Awaitable[tuple[bytes, str]]]
"""Fetches a memory's content by id: returns (content, content_sha256)."""


class CacheParts(Tree):
    """The parts of one store's cache, under `<cache_dir>/<store_id>/`."""

    def __init__(
        self,
        root_dir: str,
        store_id: str,
        *,
        budget_bytes: int = DEFAULT_BUDGET_BYTES,
        memory_bytes: int = DEFAULT_MEMORY_BYTES,
        source: ContentSource | None = None,
        max_memories: int = MAX_MEMORIES,
    ) -> None:
        super().__init__()
        self.store_id = check_store_id(store_id)
        self.dir = os.path.join(root_dir, store_id)
        self.source = source
        self.budget_bytes = budget_bytes
        self.max_memories = max_memories
        self._said_full = False
        self._writes = 0
        self._unsaved: set[Node] = set()
        """Files written since their row was saved (the content files hold their
        sizes and times meanwhile)."""
        ensure_private_dir(root_dir, "cache folder", follow=True)
        ensure_private_dir(self.dir, "cache folder")
        self.conflicts = ConflictCopies(os.path.join(self.dir, "conflicts"))
        self.journal = Journal(
            os.path.join(self.dir, "journal.sqlite3"), store_id=store_id, memory_bytes=memory_bytes
        )
        self.contents = Contents(self.journal, budget_bytes, self.nodes.get)
        self.pending: set[int] = set()
        """Ids of the files with local changes the store has not agreed to."""
        self._holders: dict[str, Node] = {}
        self._load()

    def _load(self) -> None:
        nodes = list(self.journal.nodes())
        self.load(nodes)
        files = [n for n in nodes if n.kind is NodeKind.FILE]
        self.journal.files.sweep({n.id for n in files if n.cached or n.edited})
        # Contents are the truth for sizes, and for an edited file's times (a kill
        # may have left its row behind); a cached file without a content file is empty.
        crashed = self.journal.after_crash
        for node in files:
            if crashed and node.cached and not node.edited and self._lost(node):
                node.cached = False  # a power cut took what the store sent: fetched again
                self.journal.drop_content(node.id)
                self.journal.save(node)
            if node.cached or node.edited:
                st = self.journal.files.stat(node.id)
                node.cached, node.size = True, st.st_size if st is not None else 0
                if st is not None and node.edited and st.st_mtime_ns > node.mtime_ns:
                    node.mtime_ns = st.st_mtime_ns
                    node.ctime_ns = max(node.ctime_ns, node.mtime_ns)
            if node.cached and not node.edited:
                self.contents.evictable(node)
            if node.pending:
                self.pending.add(node.id)
            if node.memory_id is not None:
                self._holders[node.memory_id] = node
        if crashed:  # what the last process left unflushed is made durable now
            self.journal.files.changed({n.id for n in files if n.cached})
            self.journal.flush_all()
        self.tombstones: dict[str, Tombstone] = {t.memory_id: t for t in self.journal.tombstones()}
        """memory id -> a memory deleted here and not yet in the store."""

    def _lost(self, node: Node) -> bool:
        """Whether a clean file's content file holds other bytes than its base's."""
        found = self.journal.files.read_file(node.id) or b""
        return node.base_sha is not None and content_sha256(found) != node.base_sha

    @property
    def full(self) -> bool:
        """Files here and memories with a delete pending (held until sent) reach the limit."""
        return self.file_total + len(self.tombstones) >= self.max_memories

    @property
    def disk_full(self) -> bool:
        """The cache's disk is full: changes to the files are refused (ENOSPC)."""
        return self.journal.disk_full

    def cached_bytes(self) -> int:
        return sum(n.size for n in self.files() if n.cached)

    def node_of_memory(self, memory_id: str) -> Node | None:
        """The file that holds this memory here, if any (the memory-id index)."""
        return self._holders.get(memory_id)

    def by_memory_id(self) -> dict[str, Node]:
        return dict(self._holders)

    def memory_count(self) -> int:
        """Files here that hold a memory of the store."""
        return len(self._holders)

    def read_content(self, node: Node) -> bytes:
        return self.contents.read(node)

    def open_content(self, node: Node) -> bytearray:
        """An open file's content, held in memory from its first read or write."""
        if node.live.data is None:
            node.live.data = bytearray(self.read_content(node) if node.size else b"")
        return node.live.data

    def get_meta(self, key: str) -> str | None:
        return self.journal.get_meta(key)

    def set_meta(self, key: str, value: str | None) -> None:
        self.journal.set_meta(key, value)

    def transaction(self) -> contextlib.AbstractContextManager[None]:
        return self.journal.transaction()

    def batch(self) -> contextlib.AbstractContextManager[None]:
        return self.journal.batch()

    def keep_conflict_copy(self, node: Node) -> str:
        """Keep the local content of a file outside the mount, whole and durably,
        before the store's wins; returns the copy's path."""
        return self.conflicts.keep(node.path, self.read_content(node) if node.cached else b"")

    # ------------------------------------------- what is agreed with the store

    def bind(self, node: Node, memory_id: str | None, sha: str | None, path: str | None) -> None:
        """Set the base a file agrees on with the store, and index it by memory id
        (the node's row is the caller's to save)."""
        if node.memory_id is not None and self._holders.get(node.memory_id) is node:
            del self._holders[node.memory_id]
        node.memory_id, node.base_sha, node.base_path = memory_id, sha, path
        if memory_id is not None:
            self._holders[memory_id] = node

    def set_pending(self, node: Node) -> None:
        """Something of the file (content, path, the file itself) is not agreed yet."""
        node.pending = True
        self.pending.add(node.id)

    def settle(self, node: Node) -> None:
        """The store holds the file as it is here."""
        node.pending = False
        self.pending.discard(node.id)

    def add_tombstone(self, memory_id: str, path: str, sha: str, node_id: int = 0) -> None:
        """A pending delete of `memory_id`, kept in the row `node_id` (a deleted
        file's) if given; one already pending is changed where it is kept."""
        old = self.tombstones.get(memory_id)
        if not node_id:
            node_id = old.node_id if old is not None else self.journal.new_id()
        elif old is not None and old.node_id != node_id:
            self.journal.delete(old.node_id)
        stone = Tombstone(memory_id, path, sha, time.time(), node_id)
        self.tombstones[memory_id] = stone
        self.journal.add_tombstone(stone)

    def tombstone_done(self, memory_id: str) -> None:
        """The pending delete of this memory is settled (sent, undone or moot)."""
        stone = self.tombstones.pop(memory_id, None)
        if stone is not None:
            self.journal.delete(stone.node_id)

    def tombstone_at(self, path: str) -> Tombstone | None:
        """The pending delete of the memory that was at `path`, if any."""
        return next((s for s in self.tombstones.values() if s.path == path), None)

    def take_back(self, path: str) -> Tombstone | None:
        """A file deleted and written again at the same path before the store saw
        the delete is one update of the same memory: its pending delete goes."""
        stone = self.tombstone_at(path)
        if stone is not None:
            self.tombstone_done(stone.memory_id)
        return stone

    # -------------------------------------------------------- background

    async def housekeeping(
        self, every: float = 0.2, busy: Callable[[], bool] = lambda: False
    ) -> None:
        """Runs while mounted: `drop_contents` while no request came since (`busy`),
        so that none pays for it; every `every` seconds while changes come."""
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
        """Save the rows of the files written since, in one commit."""
        if not self._unsaved or self.journal.disk_full:
            return
        with self.batch():
            while self._unsaved:
                node = self._unsaved.pop()
                if not node.orphan and node.id in self.nodes:
                    self.journal.save(node)

    def drop_contents(self) -> None:
        """Housekeeping's idle pass, now: look for room on a full disk, save the
        rows of the files written, then `Journal.when_idle`."""
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
        """A new node: its row, its place in the tree, and the indexes."""
        node.id = self.journal.insert(node)
        self.attach(node)
        if node.memory_id is not None:
            self._holders[node.memory_id] = node
        if node.pending:
            self.set_pending(node)
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
        self.set_pending(node)
        self.contents.kept(node)
        if (node.edited, node.pending, node.kept_copy) != was:
            self.journal.save(node)

    def _detach(self, node: Node, *, gone: Gone | None = None, tombstone: bool = True) -> None:
        """Take a node out of the tree (an open file lives on as an orphan); its
        memory becomes a pending delete if `tombstone`; `gone` collects names."""
        if gone is not None:
            gone.append((node.parent, node.name))
        self.detach(node)
        parent = self.nodes[node.parent]
        parent.mtime_ns = parent.ctime_ns = time.time_ns()
        if not node.is_dir and node.memory_id is not None and tombstone:
            path = node.base_path or node.path
            self.add_tombstone(node.memory_id, path, node.base_sha or "", node.id)
        else:
            self.journal.delete(node.id)
        if node.is_dir:
            return
        if node.live.open_count and node.cached:
            self.open_content(node)  # what an orphan shows once its content file goes
        self.contents.deleted(node)
        self.pending.discard(node.id)
        self.bind(node, None, node.base_sha, node.base_path)
        node.edited = node.pending = False
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
