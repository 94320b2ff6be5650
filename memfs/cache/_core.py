"""The parts of one store's cache, and the few steps that change several of
them together.

A store's cache is made of parts, each owning one kind of state and the
indexes over it, which nothing else changes:

- the tree of names (`Tree`, which the cache is: nodes by id, each folder's
  entries, the paths; `attach`, `detach`, `move` keep them in step);
- the contents (`Contents`: the files' bytes, which clean ones may go);
- what is agreed with the store and what it must still be told
  (`Agreements`: the bases and the index by memory id, the pending files,
  the pending deletes);
- durability (`Journal`: every change committed before the call that made it
  returns, through its redo log, and the content files; memfs/cache/_journal.py);
- conflict copies (`ConflictCopies`).

`CacheParts` holds them and does the steps that span parts: a node made
(`_insert`), a local change recorded (`_record_change`), a node taken out of
the tree (`_detach`). The two faces on top, `LocalChanges` (what the
filesystem does) and `SyncChanges` (what the sync does), use the parts and
these steps only; `StoreCache` (memfs/cache/_cache.py) is both.
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
"""Seconds between housekeeping's looks at most, while nothing is committed
(an idle mount then costs next to nothing)."""

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
        self.journal.sweep_contents({n.id for n in files if n.cached or n.edited})
        # Contents are the truth for sizes; a cached file without a content file is empty.
        for node in files:
            if node.cached or node.edited:
                node.size = self.journal.content_size(node.id) or 0
                node.cached = True
            if node.cached and not node.edited:
                self.contents.evictable(node)
        self.agreed.load(files, list(self.journal.tombstones()))

    # ------------------------------------------------------------- views

    @property
    def tombstones(self) -> dict[str, Tombstone]:
        """memory id -> a memory deleted here and not yet in the store."""
        return self.agreed.tombstones

    @property
    def pending_ids(self) -> set[int]:
        """Files with local changes the store has not agreed to."""
        return self.agreed.pending

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
        """The cache's disk is full: changes to the files are refused (ENOSPC), and
        the journal's redo log holds what SQLite could not take."""
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
        requests came since the last call), applies the journal's redo log
        (which takes the content files let go away) and copies the WAL into the
        database, so that no request pays for any of it.

        It looks every `every` seconds while changes come, and less often (up to
        `HOUSEKEEPING_QUIET` seconds apart) while none does, so that an idle
        mount costs next to nothing between passes."""
        pause = every
        seen = -1
        while True:
            try:
                if not busy():
                    self.journal.note_log_filled()
                    self.journal.apply_log()
                    if self.journal.unsaved_commits:
                        self.journal.checkpoint()
            except (OSError, sqlite3.Error, CacheDiskFull) as e:
                log.warning(
                    "housekeeping of %s: %s", self.store_id, e, extra={"event": "housekeeping"}
                )
            committed = self.journal.committed
            pause = min(2 * pause, HOUSEKEEPING_QUIET) if committed == seen else every
            seen = committed
            await trio.sleep(pause)

    def drop_contents(self) -> None:
        """Take the content files let go away now (housekeeping does it while idle)."""
        self.journal.apply_log()

    def close(self) -> None:
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
