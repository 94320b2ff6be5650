"""What the files hold: one part of a store's cache.

Each cached content is a file of its own in the cache's `contents` folder,
named by the node's id and reached through that folder's checked descriptor.
A write is a `pwrite` at the offset the program wrote, done before `write()`
returns (the kernel then keeps it across a SIGKILL of memfs); `sync` flushes
one file (and the folder, once a file was made in it), for `fsync()`. A
content the store sent replaces a file whole, by a rename. The content file
is the truth for a cached file's size, and for an edited file's times: what
a kill left unsaved in its row. An open file's content is held in memory as
well (`Live.data`), so reads never touch the disk.

A file's `cached` flag and its content file go together: a cached file
without one reads as empty, a file that is not cached has none (opening
takes away any a kill left).

The content files of deleted files go while the filesystem is idle
(`drop_deleted`).
"""

from __future__ import annotations

import contextlib
import errno
import os

from .._exceptions import CacheCorrupt
from .._private import open_file_at, open_private_dir
from ._disk_space import DiskSpace
from ._node import Node

_NEW = ".new"
"""The suffix of a content being written whole, before its rename."""


class Contents:
    """The content files of one store's files, in the folder `path`."""

    def __init__(self, path: str, space: DiskSpace) -> None:
        self.fd = open_private_dir(path, "cache folder")
        self.space = space
        self._open: dict[int, int] = {}
        """Descriptors of the content files being written, by node id."""
        self._made = False
        """A content file was made since the folder was last flushed."""
        self._unflushed: set[int] = set()
        """Ids of the content files changed since their last flush."""
        self.dropped: list[int] = []
        """Ids of deleted files whose content files go while the filesystem is
        idle (ids are never reused; a kill leaves them to the next open's sweep)."""

    def close(self) -> None:
        for fd in self._open.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._open.clear()
        with contextlib.suppress(OSError):
            os.close(self.fd)

    # -------------------------------------------------------------- reading

    def stat(self, node_id: int) -> os.stat_result | None:
        """The content file of a node, None when it has none."""
        try:
            return os.stat(str(node_id), dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def read(self, node: Node) -> bytes:
        """The whole local content of a cached file."""
        if node.live.data is not None:
            return bytes(node.live.data)
        if not node.cached:
            raise CacheCorrupt(f"{node.path} has no content in the cache")
        try:
            fd = open_file_at(self.fd, str(node.id), os.O_RDONLY)
        except FileNotFoundError:
            return b""
        try:
            return os.pread(fd, os.fstat(fd).st_size, 0)
        finally:
            os.close(fd)

    def sweep(self, keep: set[int]) -> None:
        """Take away the content files of nodes not in `keep` (and halves of
        contents being written whole) that a kill left."""
        for name in os.listdir(self.fd):
            if not (name.isdigit() and int(name) in keep):
                self._remove(name)

    def _remove(self, name: str) -> None:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=self.fd)

    def _made_as(self, name: str, flags: int) -> int:
        """Make and open the new content file `name`."""
        self._made = True
        return open_file_at(self.fd, name, flags | os.O_CREAT)

    # -------------------------------------------------------------- writing

    def _fd(self, node: Node) -> int:
        fd = self._open.get(node.id)
        if fd is None:
            try:
                fd = open_file_at(self.fd, str(node.id), os.O_RDWR)
            except FileNotFoundError:
                fd = self.space.run(self._made_as, str(node.id), os.O_RDWR)
            self._open[node.id] = fd
        return fd

    def write(self, node: Node, offset: int, data: bytes, old: bytes, old_size: int) -> None:
        """Write `data` at `offset` (zeros fill a gap), and stamp the file with the
        node's times. On failure the file is put back as it was (`old`: the bytes
        `data` replaced, `old_size`: the file's size)."""
        fd = self._fd(node)
        self._unflushed.add(node.id)
        try:
            self.space.run(_pwrite, fd, data, offset)
            os.utime(fd, ns=(node.mtime_ns, node.mtime_ns))
        except BaseException:
            with contextlib.suppress(OSError):
                os.pwrite(fd, old, offset)
                os.ftruncate(fd, old_size)
            raise

    def truncate(self, node: Node, size: int) -> None:
        fd = self._fd(node)
        self._unflushed.add(node.id)
        self.space.run(os.ftruncate, fd, size)
        os.utime(fd, ns=(node.mtime_ns, node.mtime_ns))
        if not node.live.open_count:
            self.closed(node)

    def stamp(self, node: Node) -> None:
        """Give the content file the node's modification time (set by `utimensat`)."""
        with contextlib.suppress(OSError):
            os.utime(str(node.id), ns=(node.mtime_ns, node.mtime_ns), dir_fd=self.fd)

    def put(self, node: Node, content: bytes) -> None:
        """Replace a file's content whole (a rename: a kill leaves the old one or
        the new one); an open file shows the new content."""
        self.closed(node)
        self.space.run(self._replace, str(node.id), content)
        self._made = True
        self._unflushed.add(node.id)
        if node.live.data is not None:
            node.live.data = bytearray(content)

    def _replace(self, name: str, content: bytes) -> None:
        fd = self._made_as(name + _NEW, os.O_WRONLY)
        try:
            view = memoryview(content)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.rename(name + _NEW, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def sync(self, node: Node | None) -> None:
        """Make a file's content (and the folder's new names) durable."""
        with self.space.as_cache_disk_full():
            if node is not None and node.id in self._unflushed:
                fd = self._open.get(node.id)
                if fd is not None:
                    os.fdatasync(fd)
                elif self.stat(node.id) is not None:
                    fd = open_file_at(self.fd, str(node.id), os.O_RDONLY)
                    try:
                        os.fdatasync(fd)
                    finally:
                        os.close(fd)
                self._unflushed.discard(node.id)
            if self._made:
                os.fsync(self.fd)
                self._made = False

    def closed(self, node: Node) -> None:  # no longer written: its descriptor goes
        fd = self._open.pop(node.id, None)
        if fd is not None:
            os.close(fd)

    def uncache(self, node: Node) -> None:
        """Forget a clean, closed file's content (the caller saves the file's row)."""
        if node.cached and node.live.open_count == 0:
            self.closed(node)
            self._remove(str(node.id))
            node.cached = False

    # ------------------------------------------------------ deleted files

    def deleted(self, node: Node) -> None:
        """The file left the tree: its content file goes while the filesystem is
        idle."""
        self.closed(node)
        self.dropped.append(node.id)
        self._unflushed.discard(node.id)

    def drop_deleted(self, most: int | None = None) -> None:
        """Remove the content files of deleted files (`most` of them at a time)."""
        ids = self.dropped[:most]
        del self.dropped[: len(ids)]
        for node_id in ids:
            self._remove(str(node_id))


def _pwrite(fd: int, data: bytes, offset: int) -> None:
    """Write all of `data` at `offset` (a short write is a full disk)."""
    if os.pwrite(fd, data, offset) != len(data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
