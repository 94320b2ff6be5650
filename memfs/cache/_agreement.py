"""Agreement with the store: what the sync does to a store's cache. The store
wins conflicts: whatever stands where it puts a memory goes, a local file
with changes the store has not seen kept as a conflict copy first.
"""

from __future__ import annotations

import time

from .._exceptions import CacheCorrupt, EntryExists
from ..api import content_sha256, join_path
from ._core import CacheParts
from ._node import ROOT_ID, Change, Gone, Node, NodeKind, Placement, StoredMemory, Upload


class SyncChanges(CacheParts):
    """The sync's face of the cache (see `SyncFace`)."""

    def changes(self, *, quiet_for: float = 0.0) -> list[Change]:
        """The files changed locally since their base. With `quiet_for`, a file open
        for writing is left out until no write touched it for that many seconds, and
        while it is empty (`cmd > file`: the memory never shows the shell's truncate)."""
        out = []
        for nid in sorted(self.pending):
            n = self.nodes.get(nid)
            if n is None or n.orphan or n.is_dir or quiet_for and n.being_written(quiet_for):
                continue
            out.append(Change.of(n))
        return out

    def record_upload(self, upload: Upload) -> None:
        self.journal.record_upload(upload)

    def upload_answered(self, node_id: int) -> None:
        self.journal.upload_answered(node_id)

    def uploads(self) -> list[Upload]:
        return self.journal.uploads()

    def forget_uploads(self, node_ids: list[int]) -> None:
        if not node_ids:
            return
        with self.transaction():
            for node_id in node_ids:
                self.journal.upload_answered(node_id)

    def mark_pushed(self, change: Change, *, memory_id: str, sha: str, path: str) -> Node | None:
        """The store holds this file's content `sha` at `path`: advance its base (it
        stays changed if written again meanwhile). If the file went or took
        another memory, the memory's new base goes to whichever file holds it
        now, or to a pending delete, so memfs's push is not taken for another's."""
        node = self.nodes.get(change.node_id)
        if node is None or node.orphan or node.memory_id != change.memory_id:
            holder = self.node_of_memory(memory_id)
            if holder is not None:
                self.bind(holder, memory_id, sha, path)
                self.set_pending(holder)
                self.journal.save(holder)
            else:
                self.add_tombstone(memory_id, path, sha)
            return None
        self.bind(node, memory_id, sha, path)
        node.refused_sha = node.refused_reason = None
        if node.live.edits == change.edits and node.path == path:
            node.edited = False
            self.settle(node)
            if node.live.open_count == 0:
                self.contents.evictable(node)
        self.journal.save(node)
        # Its folders are now implied by the store: they go when the store empties them.
        parent = self.nodes.get(node.parent)
        while parent is not None and parent.id != ROOT_ID and parent.made_here:
            parent.made_here = False
            self.journal.save(parent)
            parent = self.nodes.get(parent.parent)
        return node

    def mark_refused(self, change: Change, sha: str, reason: str) -> None:
        node = self.nodes.get(change.node_id)
        if node is not None:
            node.refused_sha, node.refused_reason = sha, reason
            self.journal.save(node)

    def adopt_own_write(self, node: Node, memory_id: str, sha: str, path: str) -> None:
        """The store holds what memfs sent for this file (the answer was lost): the
        new base. The file stays changed; the next push sends what differs."""
        self.bind(node, memory_id, sha, path)
        self.set_pending(node)
        self.journal.save(node)

    def retarget_tombstone(self, memory_id: str, path: str, sha: str) -> None:
        """A pending delete whose memory now holds memfs's own lost write, or a memory
        memfs created (answer lost) whose file was deleted here since."""
        self.add_tombstone(memory_id, path, sha)

    def deleted_in_store(self, memory_id: str) -> None:
        """memfs deleted this memory in the store. A file that took it back while
        the delete was on the wire is new again (created, not lost to a 404)."""
        self.tombstone_done(memory_id)
        holder = self.node_of_memory(memory_id)
        if holder is not None:
            self.forget_memory(holder)

    def forget_memory(self, node: Node) -> None:
        """The store no longer has this file's memory, but it changed locally: it is new again."""
        self.bind(node, None, None, None)
        node.edited = True
        node.live.edits += 1
        self.set_pending(node)
        self.contents.kept(node)
        self.journal.save(node)

    def place_remote(
        self, memory: StoredMemory, content: bytes | None, *, node: Node | None = None
    ) -> Placement:
        """Show the store's memory at its path: create the file, or move and update
        `node`, the file holding it (or a file with no memory holding its bytes);
        a `node` moved here alone is updated where it is, its move still to push.
        Whatever else is in the way goes, its local changes (a move here too) kept as
        conflict copies first, whole and durable (ConflictCopyFailed: nothing changed)."""
        path, sha, size = memory.path, memory.sha, memory.size
        if node is not None and not node.orphan and node.path != path == node.base_path:
            path = node.path
        if node is None:
            node = self._new_file_holding(path, sha)
        copies = [
            (f.path, self.keep_conflict_copy(f))
            for f in self.in_the_way(path, node)
            if self.changed_here(f) or f.path != f.base_path
        ]
        with self.transaction():
            placed = Placement(self.nodes[ROOT_ID], copies=copies)
            parent_path, _, name = path.rpartition("/")
            parent = self._ensure_dirs(parent_path or "/", placed)
            if node is not None and (node.id not in self.nodes or node.orphan):
                node = None  # it stood where the store has a folder, and went
            existing = self.child(parent.id, name)
            if existing is not None and existing is not node:
                self._set_aside(existing, placed)
            if node is not None and node.path != path:
                old_parent = node.parent
                placed.gone.append((old_parent, node.name))
                self.move(node, parent.id, name)
                self._prune_empty(old_parent, placed.gone)
            elif node is None:
                placed.node = self._insert_remote(memory, parent, name, content)
                return placed
            placed.node = node
            held = self._cached_sha(node)
            if (held if node.cached else node.base_sha) != sha:
                node.mtime_ns = node.ctime_ns = time.time_ns()  # new bytes, as a write makes
            self.bind(node, memory.memory_id, sha, memory.path)
            node.edited = False
            node.live.edits += 1
            self.settle(node)
            if path != memory.path:
                self.set_pending(node)
            node.refused_sha = node.refused_reason = None
            node.too_large = False
            if content is not None:
                self._cache_remote(node, content)
            elif not (node.cached and node.size == size and held == sha):
                self.contents.uncache(node)
                node.size = size
            elif not node.live.open_count:
                self.contents.evictable(node)
            self.journal.save(node)
        return placed

    def in_the_way(self, path: str, node: Node | None = None) -> list[Node]:
        """The files placing a memory at `path` takes out of the way (a file where a
        folder goes, whatever is at the path unless it is `node`)."""
        here = self.nodes[ROOT_ID]
        parent_path, _, name = path.rpartition("/")
        for part in parent_path.strip("/").split("/") if parent_path else []:
            child = self.child(here.id, part)
            if child is None:
                return []
            if not child.is_dir:
                return [child]
            here = child
        existing = self.child(here.id, name)
        if existing is None or existing is node:
            return []
        return list(self.files_under(existing)) if existing.is_dir else [existing]

    def local_sha(self, node: Node) -> str | None:
        """The sha of the file's bytes here; None when they cannot be read."""
        return node.base_sha if not node.edited else self._cached_sha(node)

    def changed_here(self, node: Node) -> bool:
        """A file with no memory yet, or bytes that differ from its base."""
        if node.is_dir:
            return False
        return node.memory_id is None or self.local_sha(node) != node.base_sha

    def _new_file_holding(self, path: str, sha: str) -> Node | None:
        """The file at `path` when it has no memory and holds exactly the bytes `sha`."""
        found = self.find(path)
        if found is None or found.is_dir or found.memory_id is not None or not found.cached:
            return None
        return found if self._cached_sha(found) == sha else None

    def _insert_remote(
        self, memory: StoredMemory, parent: Node, name: str, content: bytes | None
    ) -> Node:
        """A new clean file for the store's memory, its row inserted whole, once."""
        now = time.time_ns()
        node = Node(
            id=0, kind=NodeKind.FILE, parent=parent.id, name=name, path=memory.path,
            mode=0o644, mtime_ns=now, ctime_ns=now,
            size=memory.size if content is None else len(content), cached=content is not None,
        )  # fmt: skip
        node.memory_id, node.base_sha, node.base_path = memory.memory_id, memory.sha, memory.path
        node.live.edits += 1
        self._insert(node)
        if content is not None:
            self._cache_remote(node, content)
        return node

    def _cache_remote(self, node: Node, content: bytes) -> None:
        self.contents.put(node, content)
        node.cached, node.size = True, len(content)
        if not node.live.open_count:
            self.contents.evictable(node)

    def follow_remote_move(self, node: Node, path: str) -> Gone:
        """The store moved this file's memory, changed here too: move it, keep the
        change. Returns the names the kernel must forget."""
        with self.transaction():
            existing = self.find(path)
            if existing is not None and existing is not node:
                raise EntryExists(f"{path} is taken here")
            placed = Placement(node)
            parent_path, _, name = path.rpartition("/")
            parent = self._ensure_dirs(parent_path or "/", placed)
            old_parent = node.parent
            placed.gone.append((old_parent, node.name))
            self.move(node, parent.id, name)
            node.base_path = path
            self.journal.save(node)
            self._prune_empty(old_parent, placed.gone)
        return placed.gone

    def note_overruled(self, node: Node, copy: str) -> None:
        """The store's version overruled the local edit of `node`, kept at `copy`
        (`file_state` says so until it changes here again)."""
        node.kept_copy = copy
        self.journal.save(node)

    def remove_remote(self, node: Node) -> Gone:
        """The store deleted this clean file: take it out; an open file keeps its
        content until closed. Returns the names the kernel must forget."""
        gone: Gone = []
        parent = node.parent
        with self.transaction():
            self._detach(node, gone=gone, tombstone=False)
            self._prune_empty(parent, gone)
        return gone

    def set_aside_local_changes(self) -> list[tuple[str, str]]:
        """For a read-only mount of a cache left with changes: keep each changed file
        as a conflict copy and take the changes out; returns (path, copy) of them."""
        placed = Placement(self.nodes[ROOT_ID])
        with self.transaction():
            for node in [n for n in self.files() if n.pending]:
                if node.edited or node.memory_id is None:
                    placed.copies.append((node.path, self.keep_conflict_copy(node)))
                self._detach(node, tombstone=False)
            for memory_id in list(self.tombstones):
                self.tombstone_done(memory_id)
            folders = [n for n in self.nodes.values() if n.is_dir and n.made_here]
            for folder in sorted(folders, key=lambda n: -n.path.count("/")):
                if folder.id != ROOT_ID and folder.id in self.nodes:
                    folder.made_here = False
                    self.journal.save(folder)
                    self._prune_empty(folder.id)
        return placed.copies

    def _ensure_dirs(self, path: str, placed: Placement) -> Node:
        """The folder at `path`, made as the store implies it (a file in the way goes)."""
        node = self.nodes[ROOT_ID]
        if path == "/":
            return node
        for name in path.strip("/").split("/"):
            child = self.child(node.id, name)
            if child is not None and not child.is_dir:
                self._set_aside(child, placed)
                child = None
            if child is None:
                now = time.time_ns()
                child = self._insert(Node(
                    id=0, kind=NodeKind.DIR, parent=node.id, name=name,
                    path=join_path(node.path, name), mode=0o755, mtime_ns=now, ctime_ns=now,
                ))  # fmt: skip
            node = child
        return node

    def _set_aside(self, node: Node, placed: Placement) -> None:
        """Take a file, or a folder and all in it, out of the store's way (the
        caller made their conflict copies)."""
        for n in self.subtree(node):
            self._detach(n, gone=placed.gone, tombstone=False)

    def _cached_sha(self, node: Node) -> str | None:
        if not node.cached:
            return None
        try:
            return content_sha256(self.read_content(node))
        except (CacheCorrupt, OSError):
            return None
