"""What is agreed with the store, and what the store must still be told: each
file's base (`memory_id`, `base_sha`, `base_path`) and the index by memory
id, the pending files, and the pending deletes (`tombstones`, each a row of
the journal too). Changed here only; the node's row is the caller's to save.
"""

from __future__ import annotations

import time

from ._journal import Journal
from ._node import Node, Tombstone


class Agreements:
    """The bases, the pending files and the pending deletes of one store."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self.tombstones: dict[str, Tombstone] = {}
        """memory id -> a pending delete."""
        self.pending: set[int] = set()
        """Ids of the files with local changes the store has not agreed to."""
        self._holders: dict[str, Node] = {}

    def load(self, files: list[Node], tombstones: list[Tombstone]) -> None:
        for node in files:
            if node.pending:
                self.pending.add(node.id)
            if node.memory_id is not None:
                self._holders[node.memory_id] = node
        self.tombstones = {t.memory_id: t for t in tombstones}

    # -------------------------------------------------------------- bases

    def bind(self, node: Node, memory_id: str | None, sha: str | None, path: str | None) -> None:
        """Set the base a file agrees on with the store, and index it by memory id."""
        if node.memory_id is not None and self._holders.get(node.memory_id) is node:
            del self._holders[node.memory_id]
        node.memory_id, node.base_sha, node.base_path = memory_id, sha, path
        if memory_id is not None:
            self._holders[memory_id] = node

    def holder(self, memory_id: str) -> Node | None:
        """The file that holds this memory here, if any."""
        return self._holders.get(memory_id)

    def holders(self) -> dict[str, Node]:
        return dict(self._holders)

    def memory_count(self) -> int:
        """Files here that hold a memory of the store."""
        return len(self._holders)

    # ------------------------------------------------------ pending files

    def set_pending(self, node: Node) -> None:
        """Something of the file (content, path, the file itself) is not agreed yet."""
        node.pending = True
        self.pending.add(node.id)

    def settle(self, node: Node) -> None:
        """The store holds the file as it is here."""
        node.pending = False
        self.pending.discard(node.id)

    def forget(self, node: Node) -> None:
        """The file left the tree: it is nothing the store must be told of (its
        memory becomes a pending delete first, when it is one: `add_tombstone`)."""
        self.pending.discard(node.id)
        self.bind(node, None, node.base_sha, node.base_path)
        node.pending = False

    # ---------------------------------------------------- pending deletes

    def add_tombstone(self, memory_id: str, path: str, base_sha: str) -> None:
        stone = Tombstone(memory_id, path, base_sha, time.time())
        self.tombstones[memory_id] = stone
        self.journal.add_tombstone(stone)

    def drop_tombstone(self, memory_id: str) -> None:
        self.tombstones.pop(memory_id, None)
        self.journal.drop_tombstone(memory_id)

    def tombstone_at(self, path: str) -> Tombstone | None:
        """The pending delete of the memory that was at `path`, if any."""
        if not self.tombstones:
            return None
        return next((s for s in self.tombstones.values() if s.path == path), None)

    def take_back(self, path: str) -> Tombstone | None:
        """A file deleted and written again at the same path before the store saw
        the delete is one update of the same memory: its pending delete goes."""
        stone = self.tombstone_at(path)
        if stone is not None:
            self.drop_tombstone(stone.memory_id)
        return stone
