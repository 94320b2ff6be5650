"""Local changes: what the filesystem does to a store's cache.

A file's content is a file of the cache (memfs/cache/_contents.py), and an
open file's content is held in memory as well (`Live.data`), so reads never
touch the disk. A write commits the journal's "edited" mark first (once, when
a clean file is first written), then writes its bytes to the content file
before it returns (a SIGKILL loses nothing); the file's size and times are
the content file's, and its row follows while the filesystem is idle.
`fsync()` flushes the content file and the journal's WAL.
"""

from __future__ import annotations

import time

from .._exceptions import (
    CacheCorrupt,
    ContentUnavailable,
    DirectoryNotEmpty,
    EntryExists,
    FileTooLarge,
    IsADirectory,
    NotADirectory,
    StoreFull,
)
from ..api import MAX_CONTENT_BYTES, join_path
from ._core import CacheParts, log, now_ns
from ._node import Node, NodeKind, Owner


class LocalChanges(CacheParts):
    """The filesystem's face of the cache (see `FilesystemFace`)."""

    # ------------------------------------------------------------ names

    def _new(self, kind: NodeKind, parent_id: int, name: str, mode: int, owner: Owner) -> Node:
        """A node for a new name made here (not inserted yet), or the rule it breaks."""
        path = self.check_new_name(self.node(parent_id), name, folder=kind is NodeKind.DIR)
        now = now_ns()
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
        """A new empty file, changed locally, content cached (and empty)."""
        node = self._new(NodeKind.FILE, parent_id, name, mode, owner)
        node.edited = node.pending = node.cached = True
        path = node.path
        stone = self.agreed.tombstone_at(path)
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
        with self.transaction():
            adopted = self.agreed.take_back(path) if stone is not None else None
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
        with self.transaction():
            self._detach(node)
        return node

    def rmdir(self, parent_id: int, name: str) -> None:
        node = self.lookup(parent_id, name)
        if not node.is_dir:
            raise NotADirectory(f"{node.path} is not a folder")
        if self.children[node.id]:
            raise DirectoryNotEmpty(f"{node.path} is not empty")
        with self.transaction():
            self._detach(node)

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
        target = self.entry(new_parent, new_name)
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
                    # The moved file takes the target's memory over (an editor's save is one
                    # update of the target); the memory it had itself is deleted instead.
                    inherit = (target.memory_id, target.base_sha, target.base_path)
                    self.agreed.bind(target, None, None, None)
                    if node.memory_id is not None:
                        self.agreed.add_tombstone(
                            node.memory_id, node.base_path or node.path, node.base_sha or ""
                        )
                self._detach(target)
            elif not node.is_dir and node.memory_id is None:
                stone = self.agreed.take_back(join_path(dest.path, new_name))
                if stone is not None:
                    inherit = (stone.memory_id, stone.base_sha, stone.path)
            self.move(node, new_parent, new_name)
            now = now_ns()
            node.ctime_ns = now
            for folder in (self.nodes[old_parent], self.nodes[new_parent]):
                folder.mtime_ns = folder.ctime_ns = now
            if inherit is not None:
                self.agreed.bind(node, *inherit)
                node.edited = True
            if node.is_dir:
                node.made_here = True
                self.journal.save(node)
                for f in self.files_under(node):
                    if f.memory_id is not None:
                        self._record_change(f, content=False)
            else:
                node.live.edits += 1
                self.agreed.set_pending(node)
                self.journal.save(node)
        return node

    def _attributes_changed(self, node: Node) -> None:
        """The change time is now, and the row says so (an orphan has none)."""
        node.ctime_ns = now_ns()
        if not node.orphan:
            self.journal.save(node)

    def chmod(self, node_id: int, mode: int) -> None:
        node = self.node(node_id)
        node.mode = mode & 0o7777
        self._attributes_changed(node)

    def chown(self, node_id: int, uid: int | None, gid: int | None) -> None:
        """Give a file or folder an owner and group (None: leave it as it is).
        Kept in the journal only: the store has no owners."""
        self._set_given(node_id, uid=uid, gid=gid)

    def set_times(self, node_id: int, mtime_ns: int | None, atime_ns: int | None = None) -> None:
        """Set a node's times (None: leave it); the change time is now."""
        self._set_given(node_id, mtime_ns=mtime_ns, atime_ns=atime_ns)

    def _set_given(self, node_id: int, **attributes: int | None) -> None:
        """Set the node's attributes given (None: leave that one as it is)."""
        node = self.node(node_id)
        for name, value in attributes.items():
            if value is not None:
                setattr(node, name, value)
        self._attributes_changed(node)
        if attributes.get("mtime_ns") is not None and node.cached:
            self.contents.stamp(node)

    # ----------------------------------------------------------- content

    async def open(self, node_id: int, *, truncate: bool = False, writable: bool = False) -> Node:
        """Make a file's content available locally (fetching it if need be) and hold it open.
        A `writable` open counts as a writer until its `release(writable=True)`: a file
        with writers is pushed only once no write touched it for a while."""
        node = self.node(node_id)
        if node.is_dir:
            raise IsADirectory(f"{node.path} is a folder")
        if truncate:
            self.truncate_content(node, 0)
        elif not node.cached and node.live.data is None:
            await self._fetch(node)
        return self._hold(node, writable)

    def create_open(
        self, parent_id: int, name: str, mode: int, owner: Owner, *, writable: bool
    ) -> Node:
        """`create`, then `open` of the new file (whose content is here: it is empty)."""
        return self._hold(self.create(parent_id, name, mode, owner), writable)

    def _hold(self, node: Node, writable: bool) -> Node:
        """Hold a file whose content is here open (see `open`)."""
        live = node.live
        if live.data is None:
            live.data = bytearray(self.read_content(node) if node.size else b"")
        live.open_count += 1
        if writable:
            live.writers += 1
        return node

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
        live.data = None
        self.contents.closed(node)
        if live.orphan:
            self._drop(node)

    def read(self, node: Node, offset: int, size: int) -> bytes:
        content = node.live.data
        if content is None:
            raise CacheCorrupt(f"{node.path} is not open")
        return bytes(memoryview(content)[offset : offset + size])

    def write(self, node: Node, offset: int, data: bytes) -> int:
        end = offset + len(data)
        self.check_size(node, end)
        content = node.live.data
        if content is None:
            raise CacheCorrupt(f"{node.path} is not open")
        old_size, old = len(content), bytes(content[offset:end])
        times = node.mtime_ns, node.ctime_ns
        now = node.mtime_ns = node.ctime_ns = now_ns()
        try:
            if not node.orphan:
                self._record_change(node, content=True)
                self.contents.write(node, offset, data, old, old_size)
        except BaseException:
            node.mtime_ns, node.ctime_ns = times
            raise
        if offset > len(content):
            content.extend(bytes(offset - len(content)))
        content[offset:end] = data
        node.size = len(content)
        self._written(node, now)
        return len(data)

    def check_size(self, node: Node, size: int) -> None:
        """Refuse a content past the limit (FileTooLarge); the file is then
        remembered as `too_large` and not pushed until a write within the limit."""
        if size <= MAX_CONTENT_BYTES:
            return
        if not node.too_large and not node.orphan:
            node.too_large = True
            self.journal.save(node)
        raise FileTooLarge(
            f"{node.path} would be {size} bytes; a memory holds at most {MAX_CONTENT_BYTES}"
        )

    def _written(self, node: Node, now: int) -> None:
        """The file's content changed at `now` (its row follows, `save_written`)."""
        node.mtime_ns = node.ctime_ns = now
        node.live.last_write = time.monotonic()
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
                self._written(node, now_ns())
            return
        if not node.cached and size != 0:
            raise ContentUnavailable(f"{node.path} has no content here to truncate")
        now = node.mtime_ns = node.ctime_ns = now_ns()
        if not node.orphan:
            with self.transaction():
                node.cached = True
                self._record_change(node, content=True)
                self.journal.save(node)
            self.contents.truncate(node, size)
        node.cached = True
        content = node.live.data
        if content is not None:
            del content[size:]
            content.extend(bytes(size - len(content)))
        node.size = size
        self._written(node, now)

    def fsync(self, node: Node | None) -> None:
        """Make the file's content, its row and the rest of the journal durable:
        the content file (the truth for its size and times), then the WAL."""
        self.contents.sync(node)
        self.journal.make_durable()
