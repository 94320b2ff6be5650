"""Local changes: what the filesystem does to a store's cache.

An open file's content is held in memory from its first read or write
(`Live.data`), so later reads never touch the disk. `write()` commits the
"edited" mark first, then puts its bytes in the content file before it
returns (a SIGKILL loses nothing, and never leaves changed content called
clean); the row follows while idle.
`fsync()` is one durable commit (`Journal.make_durable`).
"""

from __future__ import annotations

import contextlib
import time

import trio

from .._exceptions import (
    CacheDiskFull,
    ContentUnavailable,
    DirectoryNotEmpty,
    EntryExists,
    FileTooLarge,
    IsADirectory,
    MemfsError,
    NotADirectory,
    StoreFull,
)
from ..api import MAX_CONTENT_BYTES, join_path
from ._core import CacheParts, log
from ._node import Node, NodeKind, Owner

_ALONE = contextlib.nullcontext()


class LocalChanges(CacheParts):
    """The filesystem's face of the cache (see `FilesystemFace`)."""

    def _new(self, kind: NodeKind, parent_id: int, name: str, mode: int, owner: Owner) -> Node:
        """A node for a new name made here (not inserted yet), or the rule it breaks."""
        path = self.check_new_name(self.node(parent_id), name, folder=kind is NodeKind.DIR)
        now = time.time_ns()
        return Node(
            id=0, kind=kind, parent=parent_id, name=name, path=path, mode=mode & 0o7777,
            mtime_ns=now, ctime_ns=now, uid=owner[0], gid=owner[1],
        )  # fmt: skip

    def mkdir(self, parent_id: int, name: str, mode: int, owner: Owner = (None, None)) -> Node:
        """A new folder; `owner` (uid, gid) None for the mount's default."""
        node = self._new(NodeKind.DIR, parent_id, name, mode, owner)
        node.made_here = True
        return self._insert(node)

    def create(self, parent_id: int, name: str, mode: int, owner: Owner = (None, None)) -> Node:
        """A new empty file, changed locally."""
        node = self._new(NodeKind.FILE, parent_id, name, mode, owner)
        node.edited = node.pending = node.cached = True
        path = node.path
        stone = self.tombstone_at(path)
        if stone is None and self.full:
            if not self._said_full:
                log.warning(
                    "store %s will hold %d memories, its limit: new files are refused (ENOSPC) "
                    "until some are deleted",
                    self.store_id,
                    self.max_memories,
                    extra={"event": "store_full", "path": path},
                )
                self._said_full = True
            raise StoreFull(
                f"{path}: the store holds at most {self.max_memories} memories; delete some first"
            )
        self._said_full = False
        # Adopting a pending delete changes two tables, in one transaction.
        with self.transaction() if stone is not None else _ALONE:
            adopted = self.take_back(path) if stone is not None else None
            if adopted is not None:
                node.memory_id, node.base_sha = adopted.memory_id, adopted.base_sha
                node.base_path = adopted.path
            self._insert(node)
        node.live.edits = 1
        return node

    def unlink(self, parent_id: int, name: str) -> Node:
        node = self.lookup(parent_id, name)
        if node.is_dir:
            raise IsADirectory(f"{node.path} is a folder")
        # A file never stored is one row deleted; a pending delete may take two.
        with self.transaction() if node.memory_id is not None else _ALONE:
            self._detach(node)
        return node

    def rmdir(self, parent_id: int, name: str) -> None:
        node = self.lookup(parent_id, name)
        if not node.is_dir:
            raise NotADirectory(f"{node.path} is not a folder")
        if self.children[node.id]:
            raise DirectoryNotEmpty(f"{node.path} is not empty")
        self._detach(node)  # one row deleted

    def rename(
        self,
        old_parent: int,
        old_name: str,
        new_parent: int,
        new_name: str,
        *,
        noreplace: bool = False,
    ) -> Node:
        """Move a file or folder; over an existing file, the moved file takes the
        target's place in the store (an editor's save is one update of the target)."""
        node = self.lookup(old_parent, old_name)
        dest = self.node(new_parent)
        if not dest.is_dir:
            raise NotADirectory(f"{dest.path} is not a folder")
        self.check_move(node, dest, new_name)
        target = self.child(new_parent, new_name)
        if target is node:
            return node
        if target is None:
            self.check_new_name(dest, new_name, folder=node.is_dir)
        else:
            if noreplace:
                raise EntryExists(f"{join_path(dest.path, new_name)} already exists")
            if target.is_dir and not node.is_dir:
                raise IsADirectory(f"{target.path} is a folder")
            if node.is_dir and not target.is_dir:
                raise NotADirectory(f"{target.path} is not a folder")
            if target.is_dir and self.children[target.id]:
                raise DirectoryNotEmpty(f"{target.path} is not empty")
        with self.transaction():
            inherit = None
            if target is not None:
                if not target.is_dir and target.memory_id is not None:
                    # The memory the moved file had is deleted instead.
                    inherit = (target.memory_id, target.base_sha, target.base_path)
                    self.bind(target, None, None, None)
                    if node.memory_id is not None:
                        self.add_tombstone(
                            node.memory_id, node.base_path or node.path, node.base_sha or ""
                        )
                self._detach(target)
            elif not node.is_dir and node.memory_id is None:
                stone = self.take_back(join_path(dest.path, new_name))
                if stone is not None:
                    inherit = (stone.memory_id, stone.base_sha, stone.path)
            self.move(node, new_parent, new_name)
            now = time.time_ns()
            node.ctime_ns = now
            for folder in (self.nodes[old_parent], self.nodes[new_parent]):
                folder.mtime_ns = folder.ctime_ns = now
            if inherit is not None:
                self.bind(node, *inherit)
                node.edited = True
            if node.is_dir:
                node.made_here = True
                self.journal.save(node)
                for f in self.files_under(node):
                    if f.memory_id is not None:
                        self._record_change(f, content=False)
            else:
                node.live.edits += 1
                self.set_pending(node)
                self.journal.save(node)
        return node

    def chmod(self, node_id: int, mode: int) -> None:
        self._set_given(node_id, mode=mode & 0o7777)

    def chown(self, node_id: int, uid: int | None, gid: int | None) -> None:
        """Kept in the journal only: the store has no owners."""
        self._set_given(node_id, uid=uid, gid=gid)

    def set_times(self, node_id: int, mtime_ns: int | None, atime_ns: int | None = None) -> None:
        self._set_given(node_id, mtime_ns=mtime_ns, atime_ns=atime_ns)

    def _set_given(self, node_id: int, **attributes: int | None) -> None:
        """Set the attributes given (None: leave it), clamped to SQLite's INTEGER; ctime is now."""
        node = self.node(node_id)
        for name, value in attributes.items():
            if value is not None:
                setattr(node, name, max(-(2**63), min(value, 2**63 - 1)))
        node.ctime_ns = time.time_ns()
        if not node.orphan:
            self.journal.save(node)

    async def open(self, node_id: int, *, truncate: bool = False, writable: bool = False) -> Node:
        """Hold a file open, its content fetched if need be; a `writable` open is a
        writer (pushed once idle) until `release(writable=True)`."""
        node = self.node(node_id)
        if node.is_dir:
            raise IsADirectory(f"{node.path} is a folder")
        if truncate:
            self.truncate_content(node, 0)
        elif not node.cached:
            await self._fetch(node)
        return self._hold(node, writable)

    def create_open(
        self, parent_id: int, name: str, mode: int, owner: Owner, *, writable: bool
    ) -> Node:
        """`create`, then `open` of the new file."""
        return self._hold(self.create(parent_id, name, mode, owner), writable)

    def _hold(self, node: Node, writable: bool) -> Node:
        live = node.live
        live.open_count += 1
        if writable:
            live.writers += 1
        self.contents.touch(node)
        return node

    async def _fetch(self, node: Node, *, newer: bool = True) -> None:
        """Wait for the content of a file (one at a time); cache it past its base if `newer`."""
        live = node.live
        if live.fetching is not None:
            await live.fetching.wait()
            if node.cached:
                return
        if node.memory_id is None or self.source is None:
            raise ContentUnavailable(
                f"{node.path} has no content here and no store to fetch it from"
            )
        live.fetching = trio.Event()
        try:
            memory_id = node.memory_id
            try:
                content, sha = await self.source(memory_id)
            except MemfsError as e:
                raise ContentUnavailable(f"cannot fetch {node.path}: {e}")
            if node.cached or node.memory_id != memory_id or node.orphan:
                return
            try:
                if newer or sha == node.base_sha:
                    self.install_content(node, content, sha)
            except CacheDiskFull:
                live.data = bytearray(content)  # shown while open, kept once there is room
        finally:
            live.fetching.set()
            live.fetching = None

    def install_content(self, node: Node, content: bytes, sha: str) -> None:
        """Cache the store's content of a clean file. Content newer than the base
        is shown, but the base stays: the next pass pulls it properly."""
        if node.cached or node.edited or node.orphan:
            return
        with self.transaction():
            self._install(node, content)

    def install_listed(self, node: Node, memory_id: str, content: bytes) -> bool:
        """Cache a content a listing page carried for a clean file, unchanged and
        not being fetched; True when installed. The caller holds a transaction."""
        unchanged = node.memory_id == memory_id and node.live.fetching is None
        if node.cached or node.edited or node.orphan or not unchanged:
            return False
        self._install(node, content)
        return True

    def _install(self, node: Node, content: bytes) -> None:
        self.contents.put(node, content)
        node.cached, node.size = True, len(content)
        self.journal.save(node)
        self.contents.evictable(node)

    async def ensure_cached(self, node_id: int) -> bool:
        """Cache a file's content if it is not here yet and still its base's (whose size the
        kernel knows; the pass pulls a newer one and tells it); True when cached."""
        node = self.nodes.get(node_id)
        if node is None or node.is_dir or node.cached or node.orphan:
            return False
        await self._fetch(node, newer=False)
        return node.cached

    def release(self, node_id: int, *, writable: bool = False) -> None:
        node = self.nodes.get(node_id)
        if node is None:
            return
        live = node.live
        live.open_count = max(0, live.open_count - 1)
        if writable:
            live.writers = max(0, live.writers - 1)
        if live.open_count:
            return
        if live.data is not None and node.cached and not live.orphan:
            self.journal.files.remember(node.id, live.data)
        live.data = None
        if live.orphan:
            self._drop(node)
            return
        if not node.edited and node.cached:
            self.contents.evictable(node)

    def read(self, node: Node, offset: int, size: int) -> bytes:
        return bytes(memoryview(self.open_content(node))[offset : offset + size])

    def write(self, node: Node, offset: int, data: bytes) -> int:
        end = offset + len(data)
        self.check_size(node, end)
        content = self.open_content(node)
        old_size, old = len(content), bytes(content[offset:end])
        if offset > len(content):
            content.extend(bytes(offset - len(content)))
        content[offset:end] = data
        now = time.time_ns()
        if not node.orphan:
            try:
                self._record_change(node, content=True)  # committed before the bytes go
                self.journal.write(
                    node.id, offset, data, len(content), now, (offset, old, old_size)
                )
            except BaseException:
                # Not committed: what the file shows stays what the journal holds.
                content[offset:end] = old
                del content[old_size:]
                raise
        node.size = len(content)
        self._written(node, now)
        return len(data)

    def check_size(self, node: Node, size: int) -> None:
        """Refuse a content past the limit (FileTooLarge); the file is `too_large`,
        not pushed, until a write within the limit."""
        if size <= MAX_CONTENT_BYTES:
            return
        if not node.too_large and not node.orphan:
            node.too_large = True
            self.journal.save(node)
        raise FileTooLarge(
            f"{node.path} would be {size} bytes; a memory holds at most {MAX_CONTENT_BYTES}"
        )

    def _written(self, node: Node, now: int) -> None:
        node.mtime_ns = node.ctime_ns = now
        node.live.last_write = time.monotonic()
        self._writes += 1
        if node.orphan:
            return
        if node.too_large:
            node.too_large = False
            self.journal.save(node)
        else:
            self._unsaved.add(node)

    def truncate(self, node_id: int, size: int) -> None:
        node = self.node(node_id)
        if node.is_dir:
            raise IsADirectory(f"{node.path} is a folder")
        self.truncate_content(node, size)

    def truncate_content(self, node: Node, size: int) -> None:
        self.check_size(node, size)
        if size == node.size and node.cached:
            if node.too_large:
                self._written(node, time.time_ns())
            return
        current = node.live.data
        if current is not None:
            content = bytearray(current)
        elif size == 0:
            content = bytearray()
        elif node.cached:
            content = bytearray(self.read_content(node))
        else:
            raise ContentUnavailable(f"{node.path} has no content here to truncate")
        old = bytes(content)
        del content[size:]
        content.extend(bytes(size - len(content)))
        now = time.time_ns()
        with self.transaction():
            if not node.cached:
                node.cached = True
                self.journal.save(node)
            if not node.orphan:
                self._record_change(node, content=True)
        if not node.orphan:
            self.journal.write(node.id, size, b"", size, now, (0, old, len(old)))
        if node.live.data is not None:
            node.live.data = content
        node.size = size
        self._written(node, now)

    def fsync(self, node: Node | None) -> None:
        """Make the file's content and row and every commit before them durable
        (a folder: every commit, names among them; None: every content and commit)."""
        if node is None:
            self.save_written()
            self.journal.flush_all()
        elif node.orphan or not node.cached or node.id not in self.nodes:
            self.journal.make_durable()
        else:
            self.journal.make_durable(node, self.read_content(node))
