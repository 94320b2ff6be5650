"""The FUSE filesystem of one store: pyfuse3 Operations over the cache.

What is promised:

- Every handler raises only `pyfuse3.FUSEError`; the one place that turns
  memfs's exceptions (and stray OSErrors) into errno values is `errno_for` (memfs/fs/_errno.py).
  Anything unexpected is logged with its traceback and answered with EIO,
  so one bad request never ends the mount.
- Handlers talk only to the cache. The only handler that may wait on the
  network is the first open of a file whose content is not cached yet.
- A read-only store refuses every change with EROFS, whatever the route.
- While the cache's disk is full, every change is refused with ENOSPC
  (reads go on): the room its journal has left goes to the sync, which
  uploads what the cache holds.
- The store's marker `.anthropic-memory-store` is served from memory, never
  written, renamed or removed (EPERM).
- Kernel caching follows `pyfuse3-notes.md`: long entry and attribute
  timeouts, `keep_cache` on open, FLUSH switched off with ENOSYS once, and
  `KernelCache` to invalidate exactly what a pull changed, from outside the
  handlers.
"""

from __future__ import annotations

import collections
import errno
import functools
import os
import stat as statmod
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import pyfuse3
import trio

from .._histogram import FUSE_BUCKETS, Histogram
from ..api import MARKER_NAME, MAX_NAME_BYTES, marker_content
from ..cache import ROOT_ID, FilesystemFace, Node
from ._errno import errno_for
from ._owners import Owners

MARKER_INODE = 2
CACHE_TIMEOUT = 300.0
"""Seconds the kernel may keep entries and attributes: pulls invalidate what they change."""
WRITEBACK_AFTER_FSYNC = 1.0
"""For this many seconds after an `fsync()`, each write's change is handed to the
disk right after the write is answered (see `MemoryStoreFS.write_back`)."""

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])

_HANDLERS: list[str] = []
"""The name of every handler `_handler` wrapped: each mount keeps a histogram of each."""


def _handler(fn: F) -> F:
    """Wrap a handler so that nothing but FUSEError leaves it, and time it."""

    name = fn.__name__
    _HANDLERS.append(name)
    clock = time.perf_counter

    @functools.wraps(fn)
    async def wrapper(self: MemoryStoreFS, *args: Any) -> Any:
        self.last_request = started = clock()
        try:
            return await fn(self, *args)
        except pyfuse3.FUSEError:
            raise
        except Exception as e:  # noqa: BLE001 - the mount must survive any bug
            raise pyfuse3.FUSEError(errno_for(e)) from None
        finally:
            self._latency[name].observe(clock() - started)

    return wrapper  # type: ignore[return-value]


def _fail(code: int) -> pyfuse3.FUSEError:
    return pyfuse3.FUSEError(code)


@dataclass
class _Handle:
    node: Node | None  # None: the marker
    writable: bool


class MemoryStoreFS(pyfuse3.Operations):
    """pyfuse3 Operations for one store."""

    supports_dot_lookup = False
    enable_writeback_cache = False

    def __init__(
        self,
        cache: FilesystemFace,
        *,
        read_only: bool = False,
        uid: int | None = None,
        gid: int | None = None,
        max_files: int = 2000,
        kernel_checks: bool = False,
    ) -> None:
        super().__init__()
        self.cache = cache
        self.read_only = read_only
        self.owners = Owners(cache, uid, gid, kernel_checks=kernel_checks)
        self.max_files = max_files
        self.marker = marker_content(cache.store_id)
        self._handles: dict[int, _Handle] = {}
        self._latency = {name: Histogram(FUSE_BUCKETS) for name in _HANDLERS}
        self.last_request = 0.0
        """time.perf_counter() when the latest request came."""
        self._next_fh = 1
        self._dir_listings: dict[int, list[tuple[bytes, int]]] = {}
        self._next_dir_fh = 1
        self._fsynced_at = -WRITEBACK_AFTER_FSYNC
        self._writeback = trio.lowlevel.ParkingLot()

    @property
    def requests(self) -> collections.Counter[str]:
        """FUSE requests answered, by operation: what the kernel did not cache."""
        return collections.Counter({n: h.count for n, h in self._latency.items() if h.count})

    @property
    def latency(self) -> dict[str, Histogram]:
        """Seconds each kind of request took to answer, by operation answered."""
        return {n: h for n, h in self._latency.items() if h.count}

    def request_total(self) -> int:
        """FUSE requests answered, all operations."""
        return sum(h.count for h in self._latency.values())

    # ------------------------------------------------------------ attributes

    def _attrs(self, node: Node) -> pyfuse3.EntryAttributes:
        a = pyfuse3.EntryAttributes()
        a.st_ino = node.id
        a.generation = 0
        a.entry_timeout = CACHE_TIMEOUT
        a.attr_timeout = CACHE_TIMEOUT
        mode = node.mode & (0o7555 if self.read_only else 0o7777)
        if node.is_dir:
            a.st_mode = statmod.S_IFDIR | mode
            a.st_nlink = 2 + self.cache.subdir_count(node.id)
            a.st_size = 4096
        else:
            a.st_mode = statmod.S_IFREG | mode
            a.st_nlink = 0 if node.orphan else 1
            a.st_size = node.size
        a.st_uid, a.st_gid = self.owners.of(node)
        a.st_rdev = 0
        a.st_blksize = 4096
        a.st_blocks = (a.st_size + 511) // 512
        a.st_mtime_ns = node.mtime_ns
        a.st_atime_ns = node.mtime_ns if node.atime_ns is None else node.atime_ns
        a.st_ctime_ns = node.ctime_ns
        return a

    def _marker_attrs(self) -> pyfuse3.EntryAttributes:
        root = self.cache.node(ROOT_ID)
        a = pyfuse3.EntryAttributes()
        a.st_ino = MARKER_INODE
        a.entry_timeout = a.attr_timeout = CACHE_TIMEOUT
        a.st_mode = statmod.S_IFREG | 0o444
        a.st_nlink = 1
        a.st_size = len(self.marker)
        a.st_uid, a.st_gid = self.owners.of_marker()
        a.st_blksize = 4096
        a.st_blocks = 1
        a.st_atime_ns = a.st_mtime_ns = a.st_ctime_ns = root.ctime_ns
        return a

    def _check_writable(self) -> None:
        if self.read_only:
            raise _fail(errno.EROFS)
        if self.cache.disk_full:
            raise _fail(errno.ENOSPC)

    @staticmethod
    def _is_marker(parent_inode: int, name: str) -> bool:
        return parent_inode == ROOT_ID and name == MARKER_NAME

    # --------------------------------------------------------------- lookups

    @_handler
    async def lookup(
        self, parent_inode: int, name: bytes, ctx: Any = None
    ) -> pyfuse3.EntryAttributes:
        if len(name) > MAX_NAME_BYTES:
            raise _fail(errno.ENAMETOOLONG)
        sname = os.fsdecode(name)
        if self._is_marker(parent_inode, sname):
            return self._marker_attrs()
        if sname == ".":
            return self._attrs(self.cache.node(parent_inode))
        if sname == "..":
            node = self.cache.node(parent_inode)
            return self._attrs(self.cache.node(node.parent if node.id != ROOT_ID else ROOT_ID))
        child = self.cache.child(parent_inode, sname)
        if child is None:
            raise _fail(errno.ENOENT)
        return self._attrs(child)

    @_handler
    async def forget(self, inode_list: Any) -> None:
        # Nodes live as long as the tree holds them (and orphans until their last
        # release), so the kernel's lookup counts decide nothing here.
        return None

    @_handler
    async def getattr(self, inode: int, ctx: Any = None) -> pyfuse3.EntryAttributes:
        if inode == MARKER_INODE:
            return self._marker_attrs()
        return self._attrs(self.cache.node(inode))

    @_handler
    async def setattr(
        self, inode: int, attr: Any, fields: Any, fh: int | None, ctx: Any
    ) -> pyfuse3.EntryAttributes:
        chown = fields.update_uid or fields.update_gid
        uid = attr.st_uid if fields.update_uid else None
        gid = attr.st_gid if fields.update_gid else None
        if inode == MARKER_INODE:
            # Its owner may change (so that `chown -R` of a mount works), nothing else.
            self._check_writable()
            if not chown or fields.update_size or fields.update_mode:
                raise _fail(errno.EPERM)
            self.owners.chown(None, uid, gid, ctx)
            return self._marker_attrs()
        node = self.cache.node(inode)
        changes = (
            fields.update_size
            or fields.update_mode
            or fields.update_mtime
            or fields.update_atime
            or fields.update_uid
            or fields.update_gid
        )
        if changes:
            self._check_writable()
        if chown:
            self.owners.chown(node, uid, gid, ctx)
        if fields.update_size:
            if node.is_dir:
                raise _fail(errno.EISDIR)
            self.cache.check_size(node, attr.st_size)
            if not node.cached and attr.st_size > 0:
                await self.cache.open(node.id)
                self.cache.release(node.id)
            self.cache.truncate(node.id, attr.st_size)
        if fields.update_mode:
            self.cache.chmod(node.id, attr.st_mode)
        if fields.update_mtime or fields.update_atime or fields.update_ctime:
            self.cache.set_times(
                node.id,
                attr.st_mtime_ns if fields.update_mtime else None,
                attr.st_atime_ns if fields.update_atime else None,
            )
        return self._attrs(node)

    @_handler
    async def access(self, inode: int, mode: int, ctx: Any) -> bool:
        if mode & os.W_OK and (self.read_only or inode == MARKER_INODE):
            raise _fail(errno.EROFS if self.read_only else errno.EACCES)
        return True

    # ------------------------------------------------------------ folders

    @_handler
    async def opendir(self, inode: int, ctx: Any) -> int:
        listing = [(os.fsencode(name), node.id) for name, node in self.cache.list_dir(inode)]
        if inode == ROOT_ID:
            listing.insert(0, (MARKER_NAME.encode(), MARKER_INODE))
        fh = self._next_dir_fh
        self._next_dir_fh += 1
        self._dir_listings[fh] = listing
        return fh

    @_handler
    async def readdir(self, fh: int, start_id: int, token: Any) -> None:
        listing = self._dir_listings.get(fh, [])
        for i in range(start_id, len(listing)):
            name, inode = listing[i]
            if inode == MARKER_INODE:
                attrs = self._marker_attrs()
            else:
                node = self.cache.get(inode)
                if node is None or node.orphan:
                    continue
                attrs = self._attrs(node)
            if not pyfuse3.readdir_reply(token, name, attrs, i + 1):
                return

    @_handler
    async def releasedir(self, fh: int) -> None:
        self._dir_listings.pop(fh, None)

    @_handler
    async def mkdir(
        self, parent_inode: int, name: bytes, mode: int, ctx: Any
    ) -> pyfuse3.EntryAttributes:
        self._check_writable()
        sname = os.fsdecode(name)
        if self._is_marker(parent_inode, sname):
            raise _fail(errno.EEXIST)
        owner, mode = self.owners.for_new(parent_inode, ctx, mode, is_dir=True)
        return self._attrs(self.cache.mkdir(parent_inode, sname, mode, owner))

    @_handler
    async def rmdir(self, parent_inode: int, name: bytes, ctx: Any) -> None:
        self._check_writable()
        sname = os.fsdecode(name)
        if self._is_marker(parent_inode, sname):
            raise _fail(errno.ENOTDIR)
        self.cache.rmdir(parent_inode, sname)

    @_handler
    async def fsyncdir(self, fh: int, datasync: bool) -> None:
        return None

    # ----------------------------------------------------- names and links

    @_handler
    async def unlink(self, parent_inode: int, name: bytes, ctx: Any) -> None:
        self._check_writable()
        sname = os.fsdecode(name)
        if self._is_marker(parent_inode, sname):
            raise _fail(errno.EPERM)
        self.cache.unlink(parent_inode, sname)

    @_handler
    async def rename(
        self,
        parent_inode_old: int,
        name_old: bytes,
        parent_inode_new: int,
        name_new: bytes,
        flags: int,
        ctx: Any,
    ) -> None:
        self._check_writable()
        old, new = os.fsdecode(name_old), os.fsdecode(name_new)
        if self._is_marker(parent_inode_old, old) or self._is_marker(parent_inode_new, new):
            raise _fail(errno.EPERM)
        if flags & pyfuse3.RENAME_EXCHANGE:
            raise _fail(errno.EINVAL)
        self.cache.rename(
            parent_inode_old,
            old,
            parent_inode_new,
            new,
            noreplace=bool(flags & pyfuse3.RENAME_NOREPLACE),
        )

    @_handler
    async def symlink(
        self, parent_inode: int, name: bytes, target: bytes, ctx: Any
    ) -> pyfuse3.EntryAttributes:
        raise _fail(errno.EROFS if self.read_only else errno.EPERM)

    @_handler
    async def link(
        self, inode: int, new_parent_inode: int, new_name: bytes, ctx: Any
    ) -> pyfuse3.EntryAttributes:
        raise _fail(errno.EROFS if self.read_only else errno.EPERM)

    @_handler
    async def mknod(
        self, parent_inode: int, name: bytes, mode: int, rdev: int, ctx: Any
    ) -> pyfuse3.EntryAttributes:
        raise _fail(errno.EROFS if self.read_only else errno.EPERM)

    @_handler
    async def readlink(self, inode: int, ctx: Any) -> bytes:
        raise _fail(errno.EINVAL)

    # Returning ENOSYS once makes the kernel stop asking and answer EOPNOTSUPP itself.
    @_handler
    async def getxattr(self, inode: int, name: bytes, ctx: Any) -> bytes:
        raise _fail(errno.ENOSYS)

    @_handler
    async def setxattr(self, inode: int, name: bytes, value: bytes, ctx: Any) -> None:
        raise _fail(errno.ENOSYS)

    @_handler
    async def listxattr(self, inode: int, ctx: Any) -> list[bytes]:
        raise _fail(errno.ENOSYS)

    @_handler
    async def removexattr(self, inode: int, name: bytes, ctx: Any) -> None:
        raise _fail(errno.ENOSYS)

    # ---------------------------------------------------------------- files

    def _new_handle(self, node: Node | None, writable: bool) -> int:
        fh = self._next_fh
        self._next_fh += 1
        self._handles[fh] = _Handle(node, writable)
        return fh

    def _handle(self, fh: int) -> _Handle:
        try:
            return self._handles[fh]
        except KeyError:
            raise _fail(errno.EBADF)

    @_handler
    async def open(self, inode: int, flags: int, ctx: Any) -> pyfuse3.FileInfo:
        writable = (flags & os.O_ACCMODE) != os.O_RDONLY
        truncate = bool(flags & os.O_TRUNC)
        if inode == MARKER_INODE:
            if writable or truncate:
                raise _fail(errno.EROFS if self.read_only else errno.EPERM)
            return pyfuse3.FileInfo(fh=self._new_handle(None, False), keep_cache=True)
        if truncate:
            self._check_writable()
        elif writable and self.read_only:
            raise _fail(errno.EROFS)
        node = await self.cache.open(inode, truncate=truncate and writable, writable=writable)
        return pyfuse3.FileInfo(fh=self._new_handle(node, writable), keep_cache=True)

    @_handler
    async def create(
        self, parent_inode: int, name: bytes, mode: int, flags: int, ctx: Any
    ) -> tuple[pyfuse3.FileInfo, pyfuse3.EntryAttributes]:
        self._check_writable()
        sname = os.fsdecode(name)
        if self._is_marker(parent_inode, sname):
            raise _fail(errno.EEXIST if flags & os.O_EXCL else errno.EPERM)
        if statmod.S_IFMT(mode) not in (0, statmod.S_IFREG):
            raise _fail(errno.EPERM)
        owner, mode = self.owners.for_new(parent_inode, ctx, statmod.S_IMODE(mode), is_dir=False)
        writable = (flags & os.O_ACCMODE) != os.O_RDONLY
        node = self.cache.create_open(parent_inode, sname, mode, owner, writable=writable)
        return pyfuse3.FileInfo(fh=self._new_handle(node, writable), keep_cache=True), self._attrs(
            node
        )

    @_handler
    async def read(self, fh: int, off: int, size: int) -> bytes:
        h = self._handle(fh)
        if h.node is None:
            return self.marker[off : off + size]
        return self.cache.read(h.node, off, size)

    @_handler
    async def write(self, fh: int, off: int, buf: bytes) -> int:
        h = self._handle(fh)
        if h.node is None:
            raise _fail(errno.EPERM)
        if self.read_only:
            raise _fail(errno.EROFS)
        if not h.writable:
            raise _fail(errno.EBADF)
        if self.cache.disk_full:
            raise _fail(errno.ENOSPC)
        written = self.cache.write(h.node, off, buf)
        if self.last_request - self._fsynced_at < WRITEBACK_AFTER_FSYNC:
            self._writeback.unpark()
        return written

    @_handler
    async def flush(self, fh: int) -> None:
        raise _fail(errno.ENOSYS)

    @_handler
    async def fsync(self, fh: int, datasync: bool) -> None:
        h = self._handle(fh)
        self._fsynced_at = self.last_request
        self.cache.fsync(h.node)

    async def write_back(self) -> None:
        """Runs while mounted. While files are being fsynced (one was in the last
        `WRITEBACK_AFTER_FSYNC` seconds), each write's change is handed to the
        disk once the write is answered, while the writer is on its way to the
        `fsync()` that typically follows (an editor's save, git's objects): that
        `fsync()` then has only the disk's cache left to flush (bench/README.md
        has what it saves)."""
        while True:
            await self._writeback.park()
            try:
                self.cache.start_writeback()
            except Exception:  # noqa: BLE001 - a hint; the fsync reports what failed
                pass

    @_handler
    async def release(self, fh: int) -> None:
        h = self._handles.pop(fh, None)
        if h is not None and h.node is not None:
            self.cache.release(h.node.id, writable=h.writable)

    @_handler
    async def statfs(self, ctx: Any) -> pyfuse3.StatvfsData:
        s = pyfuse3.StatvfsData()
        s.f_bsize = s.f_frsize = 4096
        budget = self.cache.budget_bytes
        used = self.cache.cached_bytes()
        s.f_blocks = budget // 4096
        s.f_bfree = s.f_bavail = max(0, budget - used) // 4096
        files = self.cache.file_count()
        s.f_files = self.max_files
        s.f_ffree = s.f_favail = max(0, self.max_files - files)
        s.f_namemax = 255
        return s
