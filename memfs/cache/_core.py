"""The parts of a store's cache that every job shares: the journal (which
holds the contents too), the tree, the pending deletes, the memory-id index,
and the few primitives that keep them in step (insert, save, detach, bind a
memory).

`StoreCache` (memfs/cache/_cache.py) adds the two faces on top: local changes
(what the filesystem does) and agreement with the store (what the sync does).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
from collections.abc import Awaitable, Callable, Iterator

import trio

from .._exceptions import CacheCorrupt, CacheDiskFull
from .._private import ensure_private_dir
from ..api import MAX_MEMORIES, check_store_id
from ._conflicts import ConflictCopies
from ._contents import EvictingLRU
from ._journal import Journal
from ._legacy import import_content_files
from ._node import ROOT_ID, Gone, Node, NodeKind, Tombstone
from ._tree import Tree

log = logging.getLogger("memfs.cache")

DEFAULT_BUDGET_BYTES = 256 * 1024 * 1024

DROP_BATCH = 64
"""Content rows of deleted files dropped per idle tick (~1 ms): a request that
comes meanwhile never waits long."""

ContentSource = Callable[[str], Awaitable[tuple[bytes, str]]]
"""Fetches a memory's content by id: returns (content, content_sha256)."""


def now_ns() -> int:
    return time.time_ns()


class CacheCore:
    """The state of one store's cache, under `<cache_dir>/<store_id>/`."""

    def __init__(
        self,
        root_dir: str,
        store_id: str,
        *,
        budget_bytes: int = DEFAULT_BUDGET_BYTES,
        source: ContentSource | None = None,
        max_memories: int = MAX_MEMORIES,
    ) -> None:
        self.store_id = check_store_id(store_id)
        self.dir = os.path.join(root_dir, store_id)
        self.source = source
        """Where content that is not here yet comes from (the composition root sets it)."""
        self.budget_bytes = budget_bytes
        self.max_memories = max_memories
        self.tree = Tree()
        self.tombstones: dict[str, Tombstone] = {}
        self.pending_ids: set[int] = set()
        """Files with local changes the store has not agreed to."""
        self._by_memory: dict[str, Node] = {}
        self.readers_waiting = 0
        """Opens waiting for a content to come from the store."""
        self._dropped: list[int] = []
        """Ids of deleted files whose content rows go while the filesystem is idle
        (ids are never reused; a kill leaves them to the next open's sweep)."""
        self._said_full = False
        self._lru: EvictingLRU = EvictingLRU(budget_bytes, self._evict)
        ensure_private_dir(root_dir, "cache folder", follow=True)
        ensure_private_dir(self.dir, "cache folder")
        self.conflicts = ConflictCopies(os.path.join(self.dir, "conflicts"))
        self.journal = Journal(os.path.join(self.dir, "journal.sqlite3"), store_id=store_id)
        self._load()

    # ------------------------------------------------------------- views

    @property
    def nodes(self) -> dict[int, Node]:
        return self.tree.nodes

    @property
    def children(self) -> dict[int, dict[str, int]]:
        return self.tree.children

    @property
    def db(self) -> sqlite3.Connection:
        """The journal's connection (for tests and counters)."""
        return self.journal.db

    @property
    def conflicts_dir(self) -> str:
        return self.conflicts.dir

    def node(self, node_id: int) -> Node:
        return self.tree.node(node_id)

    def get(self, node_id: int) -> Node | None:
        """The node with this id, or None."""
        return self.tree.nodes.get(node_id)

    def lookup(self, parent_id: int, name: str) -> Node:
        return self.tree.lookup(parent_id, name)

    def child(self, parent_id: int, name: str) -> Node | None:
        """The entry `name` of a folder, None when it has none (no exception to pay
        for: most lookups of a name that is not there come before a create)."""
        return self.tree.child(parent_id, name)

    def find(self, path: str) -> Node | None:
        return self.tree.find(path)

    def list_dir(self, node_id: int) -> list[tuple[str, Node]]:
        return self.tree.list_dir(node_id)

    def subdir_count(self, node_id: int) -> int:
        return self.tree.subdir_count(node_id)

    def files(self) -> Iterator[Node]:
        return self.tree.files()

    def file_count(self) -> int:
        return self.tree.file_total

    def cached_bytes(self) -> int:
        return sum(n.size for n in self.files() if n.cached)

    @property
    def full(self) -> bool:
        """The store will hold as many memories as it may once pending changes land."""
        return self.tree.file_total + len(self.tombstones) >= self.max_memories

    def node_of_memory(self, memory_id: str) -> Node | None:
        """The file that holds this memory here, if any (the memory-id index)."""
        return self._by_memory.get(memory_id)

    def memory_count(self) -> int:
        """Files here that hold a memory of the store."""
        return len(self._by_memory)

    def by_memory_id(self) -> dict[str, Node]:
        return dict(self._by_memory)

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

    # ------------------------------------------------------------ loading

    def _load(self) -> None:
        nodes = list(self.journal.nodes())
        self.tree.load(nodes)
        import_content_files(self.dir, self.journal, self.nodes, self.conflicts)
        self.journal.drop_stray_contents()
        # Contents are the truth for sizes; a cached file without a row is empty.
        sizes = self.journal.content_sizes()
        for node in nodes:
            if node.kind is not NodeKind.FILE:
                continue
            if node.cached or node.edited:
                node.size = sizes.get(node.id, 0)
                node.cached = True
            if node.pending:
                self.pending_ids.add(node.id)
            if node.memory_id is not None:
                self._by_memory[node.memory_id] = node
            if node.cached and not node.edited:
                self._lru[node.id] = node.size
        self.tombstones = {t.memory_id: t for t in self.journal.tombstones()}

    # -------------------------------------------------------- background

    async def housekeeping(
        self, every: float = 0.2, busy: Callable[[], bool] = lambda: False
    ) -> None:
        """Runs while mounted: while the filesystem is idle (`busy` says whether
        requests came since the last call), drops the content rows of deleted
        files (a batch at a time), applies the journal's redo log and copies the
        WAL into the database, so that no request pays for any of it."""
        while True:
            try:
                if not busy():
                    self.journal.note_log_filled()
                    self.drop_contents(DROP_BATCH)
                    self.journal.apply_log()
                    if self.journal.unsaved_commits:
                        self.journal.checkpoint()
            except (OSError, sqlite3.Error, CacheDiskFull) as e:
                log.warning(
                    "housekeeping of %s: %s", self.store_id, e, extra={"event": "housekeeping"}
                )
            await trio.sleep(every)

    def drop_contents(self, most: int | None = None) -> None:
        """Delete the content rows of deleted files (`most` of them at a time), in
        one SQLite commit of their own: nothing else runs meanwhile, and a kill
        leaves them to the next open's sweep, so they need no record of the redo
        log (nor the flush that applying one costs)."""
        if self._dropped:
            ids = self._dropped[:most]
            with self.batch():
                self.journal.drop_contents(ids)
            del self._dropped[: len(ids)]

    def close(self) -> None:
        self.drop_contents()
        for node in self.nodes.values():
            node.live.data = None
        self.journal.close()

    # --------------------------------------------------------- primitives

    def _insert(self, node: Node) -> Node:
        node.id = self.journal.insert(node)
        self.tree.attach(node)
        if node.memory_id is not None:
            self._by_memory[node.memory_id] = node
        parent = self.nodes[node.parent]
        parent.mtime_ns = parent.ctime_ns = node.ctime_ns
        return node

    def _save(self, node: Node) -> None:
        self.journal.save(node)

    def _bind(self, node: Node, memory_id: str | None, sha: str | None, path: str | None) -> None:
        """Set the base a file agrees on with the store, and index it by memory id."""
        if node.memory_id is not None and self._by_memory.get(node.memory_id) is node:
            del self._by_memory[node.memory_id]
        node.memory_id, node.base_sha, node.base_path = memory_id, sha, path
        if memory_id is not None:
            self._by_memory[memory_id] = node

    def _mark_pending(self, node: Node, *, content: bool) -> None:
        """Record a local change durably before the caller touches the content."""
        node.live.edits += 1
        was = (node.edited, node.pending)
        if content:
            node.edited = True
        node.pending = True
        self.pending_ids.add(node.id)
        self._lru.pop(node.id, None)
        if (node.edited, node.pending) != was:
            self._save(node)

    def _detach(self, node: Node, *, gone: Gone | None = None, tombstone: bool = True) -> None:
        """Take a node out of the tree; a file still open lives on as an orphan until
        released. A file with a memory becomes a pending delete (`tombstone`),
        unless the store itself took it away. `gone` collects the names taken
        out, for the kernel to forget."""
        if gone is not None:
            gone.append((node.parent, node.name))
        self.tree.detach(node)
        parent = self.nodes[node.parent]
        parent.mtime_ns = parent.ctime_ns = now_ns()
        self.journal.delete(node.id)
        if node.is_dir:
            return
        self._dropped.append(node.id)
        if node.memory_id is not None and tombstone:
            self._add_tombstone(node.memory_id, node.base_path or node.path, node.base_sha or "")
        self.pending_ids.discard(node.id)
        self._lru.pop(node.id, None)
        self._bind(node, None, node.base_sha, node.base_path)
        node.pending = node.edited = False
        if node.live.open_count > 0:
            node.live.orphan = True
        else:
            self._drop(node)

    def _drop(self, node: Node) -> None:
        self.tree.forget(node)
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

    def _add_tombstone(self, memory_id: str, path: str, base_sha: str) -> None:
        stone = Tombstone(memory_id, path, base_sha, time.time())
        self.tombstones[memory_id] = stone
        self.journal.add_tombstone(stone)

    def tombstone_done(self, memory_id: str) -> None:
        self.tombstones.pop(memory_id, None)
        self.journal.drop_tombstone(memory_id)

    def _adopt_tombstone(self, path: str) -> Tombstone | None:
        """A file deleted and written again at the same path before the store saw the
        delete is one update of the same memory: take its pending delete back."""
        for stone in self.tombstones.values():
            if stone.path == path:
                self.tombstone_done(stone.memory_id)
                return stone
        return None

    # ------------------------------------------------------------ contents

    def _put_content(self, node: Node, content: bytes) -> None:
        """Replace a file's cached content (committed before this returns, unless the
        caller holds a transaction); an open file shows the new content."""
        self.journal.put_content(node.id, content)
        if node.live.data is not None:
            node.live.data = bytearray(content)

    def read_content(self, node: Node) -> bytes:
        """The whole local content of a cached file."""
        if node.live.data is not None:
            return bytes(node.live.data)
        content = self.journal.content(node.id)
        if content is None:
            if not node.cached:
                raise CacheCorrupt(f"{node.path} has no content in the cache")
            return b""
        return content

    def keep_conflict_copy(self, node: Node) -> str:
        """Copy the local content of a file outside the mount before the store's
        wins; returns the copy's path (see `ConflictCopies`)."""
        return self.conflicts.keep(node.path, self.read_content(node) if node.cached else b"")

    def _touch(self, node: Node) -> None:
        if node.id in self._lru:
            self._lru[node.id] = self._lru[node.id]

    def _evict(self, node_id: int) -> None:
        node = self.nodes.get(node_id)
        if node is None or node.edited or node.live.open_count > 0 or not node.cached:
            return
        node.cached = False
        # Together: a cached file without a content row reads as empty.
        with self.transaction():
            self.journal.drop_content(node.id)
            self._save(node)

    def _uncache(self, node: Node) -> None:
        """Forget a clean file's content (the caller saves the row in the same
        transaction: a cached file without a content row reads as empty)."""
        if node.cached and node.live.open_count == 0:
            self.journal.drop_content(node.id)
            node.cached = False
            self._lru.pop(node.id, None)
