"""The FUSE filesystem of one store: pyfuse3 Operations over the cache's
filesystem face (docs/semantics.md), how every handler is wrapped, and what
the kernel must forget after a pull. Only `open` and a `setattr` that
truncates to a size above 0 may wait on the network, for a content not cached
yet. Handle numbers are never reused while the mount runs (a released file
handle gets EBADF, a folder's lists nothing); a listing is the names the folder
had at `opendir`, less those removed since. Kernel caching: `pyfuse3-notes.md`."""

from __future__ import annotations

import collections
import errno
import functools
import itertools
import logging
import os
import stat as statmod
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, NoReturn, TypeVar

import pyfuse3
import trio

from .. import _exceptions as exc
from .._histogram import FUSE_BUCKETS, Histogram
from ..api import MARKER_NAME, MAX_NAME_BYTES, check_store_id, marker_content
from ..cache import ROOT_ID, FilesystemFace, Node, file_state, marker_state
from ._attributes import BLOCK_SIZE, MARKER_INODE, XATTR_PREFIX, Attributes, extended_attributes

log = logging.getLogger("memfs.fs")

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])

_CLASSES_BY_ERRNO: dict[int, tuple[type[exc.MemfsError], ...]] = {
    errno.ENOENT: (exc.NoSuchEntry,),
    errno.EEXIST: (exc.EntryExists,),
    errno.ENOTDIR: (exc.NotADirectory,),
    errno.EISDIR: (exc.IsADirectory,),
    errno.ENOTEMPTY: (exc.DirectoryNotEmpty,),
    errno.EINVAL: (exc.InvalidMove, exc.InvalidPath),
    errno.EFBIG: (exc.FileTooLarge,),
    errno.ENAMETOOLONG: (exc.NameTooLong,),
    errno.ENOSPC: (exc.StoreFull, exc.CacheDiskFull),
    errno.EIO: (exc.ContentUnavailable, exc.CacheCorrupt),
}


def errno_for(e: BaseException) -> int:
    """The errno a program gets for `e`, raised in a handler: the one place
    memfs's exceptions become errno values. EIO, which says nothing a program
    can act on, is logged with its reason; a stray local OSError keeps its
    own errno; anything else is a bug, logged with its traceback."""
    for code, classes in _CLASSES_BY_ERRNO.items():
        if isinstance(e, classes):
            if code == errno.EIO:
                log.error("%s", e, extra={"event": "io_error"})
            return code
    if isinstance(e, OSError) and e.errno:
        log.error("local I/O error: %s", e, extra={"event": "local_io_error"})
        return e.errno
    log.error(
        "unexpected error in a filesystem handler", exc_info=e, extra={"event": "handler_bug"}
    )
    return errno.EIO


def handler(fn: F) -> F:
    """Wrap a handler so that nothing but FUSEError leaves it (one bad request
    never ends the mount), and time it, refused or not, in `times`."""
    name = fn.__name__

    @functools.wraps(fn)
    async def wrapper(self: Any, *args: Any) -> Any:
        started = time.perf_counter()
        try:
            return await fn(self, *args)
        except pyfuse3.FUSEError:
            raise
        except Exception as e:  # noqa: BLE001 - the mount must survive any bug
            raise pyfuse3.FUSEError(errno_for(e)) from None
        finally:
            self.times[name].observe(time.perf_counter() - started)

    return wrapper  # type: ignore[return-value]


class KernelCache:
    """Tells the kernel to forget what a pull changed. Called by the sync engine,
    never from inside a handler; the calls that may block run in a worker thread."""

    async def forget_content(self, inode: int) -> None:
        call = partial(pyfuse3.invalidate_inode, inode, attr_only=False)
        await trio.to_thread.run_sync(_invalidate, f"inode {inode}", call)

    async def forget_entry(self, parent_inode: int, name: str) -> None:
        call = partial(pyfuse3.invalidate_entry, parent_inode, os.fsencode(name))
        await trio.to_thread.run_sync(_invalidate, f"entry {name!r}", call)


def _invalidate(what: str, call: Callable[[], object]) -> None:
    try:
        call()
    except OSError as e:
        if e.errno not in (errno.ENOENT, errno.ENOSYS):
            log.warning("could not invalidate %s: %s", what, e, extra={"event": "invalidate"})


def mount_options(store_id: str, *, allow_other: bool = False, read_only: bool = False) -> set[str]:
    """FUSE options: `memfs:<store_id>` in /proc/mounts; `default_permissions`
    only when other users can reach the mount (it costs a GETATTR per change);
    `ro` for a read-only store, so the kernel itself refuses writes and
    `access(W_OK)` says no even to root. A store id not of the API's form (a
    comma would add options) is refused."""
    opts = {f"fsname=memfs:{check_store_id(store_id)}", "subtype=memfs", "noatime"}
    if read_only:
        opts.add("ro")
    if allow_other:
        opts |= {"allow_other", "default_permissions"}
    return opts


MAX_FILES = 2000
"""The file count `statfs` shows as the most the store takes."""


@dataclass
class OpenFile:
    """What one `open()` or `create()` holds; `node` None is the store's marker. An
    `append` handle writes at the content's end, wherever the kernel's size (which a
    pull may have made stale) put the write."""

    node: Node | None
    writable: bool
    append: bool = False


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
        kernel_checks: bool = False,
    ) -> None:
        super().__init__()
        self.cache = cache
        self.read_only = read_only
        self.marker = marker_content(cache.store_id)
        self.attributes = Attributes(
            cache,
            uid,
            gid,
            read_only=read_only,
            kernel_checks=kernel_checks,
            marker_size=len(self.marker),
        )
        self._handle_numbers = itertools.count(1)
        self.files: dict[int, OpenFile] = {}
        self.listings: dict[int, list[tuple[bytes, int]]] = {}
        self.times: collections.defaultdict[str, Histogram] = collections.defaultdict(
            partial(Histogram, FUSE_BUCKETS)
        )
        """Seconds each kind of request took to answer, by operation answered:
        their counts are the requests the kernel did not answer from its cache."""

    def request_total(self) -> int:
        """FUSE requests answered, all operations."""
        return sum(h.count for h in self.times.values())

    def _open_file(self, fh: int) -> OpenFile:
        try:
            return self.files[fh]
        except KeyError:
            raise pyfuse3.FUSEError(errno.EBADF) from None

    def _new_file_handle(self, node: Node | None, flags: int) -> pyfuse3.FileInfo:
        """A handle; a write-only one does direct I/O: it never reads, and the
        kernel then spares each `write()` its `security.capability` lookup. Not
        for a set-id file, whose bits the kernel clears only on cached writes."""
        fh = next(self._handle_numbers)
        access = flags & os.O_ACCMODE
        self.files[fh] = OpenFile(node, access != os.O_RDONLY, bool(flags & os.O_APPEND))
        set_id = node is None or node.mode & (statmod.S_ISUID | statmod.S_ISGID)
        direct = access == os.O_WRONLY and not set_id
        return pyfuse3.FileInfo(fh=fh, keep_cache=True, direct_io=direct)

    def _check_writable(self) -> None:
        if self.read_only:
            raise pyfuse3.FUSEError(errno.EROFS)
        if self.cache.disk_full:
            raise pyfuse3.FUSEError(errno.ENOSPC)

    def _name_to_change(self, parent_inode: int, name: bytes, marker_code: int) -> str:
        """The name in a folder that a change asks for, once the change may be
        made (`_check_writable`); `marker_code` refuses the store's marker."""
        self._check_writable()
        sname = os.fsdecode(name)
        if parent_inode == ROOT_ID and sname == MARKER_NAME:
            raise pyfuse3.FUSEError(marker_code)
        return sname

    @handler
    async def lookup(
        self, parent_inode: int, name: bytes, ctx: Any = None
    ) -> pyfuse3.EntryAttributes:
        if len(name) > MAX_NAME_BYTES:
            raise pyfuse3.FUSEError(errno.ENAMETOOLONG)
        sname = os.fsdecode(name)
        if parent_inode == ROOT_ID and sname == MARKER_NAME:
            return self.attributes.of_marker()
        # No "." or "..": without `supports_dot_lookup` the kernel resolves them itself.
        child = self.cache.child(parent_inode, sname)
        if child is None:
            raise pyfuse3.FUSEError(errno.ENOENT)
        return self.attributes.of(child)

    @handler
    async def forget(self, inode_list: Any) -> None:
        # Nodes live as long as the tree holds them (and orphans until their last
        # release), so the kernel's lookup counts decide nothing here.
        return None

    @handler
    async def getattr(self, inode: int, ctx: Any = None) -> pyfuse3.EntryAttributes:
        if inode == MARKER_INODE:
            return self.attributes.of_marker()
        return self.attributes.of(self.cache.node(inode))

    @handler
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
                raise pyfuse3.FUSEError(errno.EPERM)
            self.attributes.chown(None, uid, gid, ctx)
            return self.attributes.of_marker()
        node = self.cache.node(inode)
        times = fields.update_mtime or fields.update_atime
        if chown or times or fields.update_size or fields.update_mode:
            self._check_writable()
        if chown:
            self.attributes.chown(node, uid, gid, ctx)
        if fields.update_size:
            if node.is_dir:
                raise pyfuse3.FUSEError(errno.EISDIR)
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
        return self.attributes.of(node)

    @handler
    async def access(self, inode: int, mode: int, ctx: Any) -> bool:
        if mode & os.W_OK and (self.read_only or inode == MARKER_INODE):
            raise pyfuse3.FUSEError(errno.EROFS if self.read_only else errno.EACCES)
        return True

    @handler
    async def opendir(self, inode: int, ctx: Any) -> int:
        listing = [(os.fsencode(name), node.id) for name, node in self.cache.list_dir(inode)]
        if inode == ROOT_ID:
            listing.insert(0, (MARKER_NAME.encode(), MARKER_INODE))
        fh = next(self._handle_numbers)
        self.listings[fh] = listing
        return fh

    @handler
    async def readdir(self, fh: int, start_id: int, token: Any) -> None:
        listing = self.listings.get(fh, [])
        for i in range(start_id, len(listing)):
            name, inode = listing[i]
            if inode == MARKER_INODE:
                attrs = self.attributes.of_marker()
            else:
                node = self.cache.get(inode)
                if node is None or node.orphan:
                    continue
                attrs = self.attributes.of(node)
            if not pyfuse3.readdir_reply(token, name, attrs, i + 1):
                return

    @handler
    async def releasedir(self, fh: int) -> None:
        self.listings.pop(fh, None)

    @handler
    async def mkdir(
        self, parent_inode: int, name: bytes, mode: int, ctx: Any
    ) -> pyfuse3.EntryAttributes:
        sname = self._name_to_change(parent_inode, name, errno.EEXIST)
        owner, mode = self.attributes.for_new(parent_inode, ctx, mode, is_dir=True)
        return self.attributes.of(self.cache.mkdir(parent_inode, sname, mode, owner))

    @handler
    async def rmdir(self, parent_inode: int, name: bytes, ctx: Any) -> None:
        sname = self._name_to_change(parent_inode, name, errno.ENOTDIR)
        self.cache.rmdir(parent_inode, sname)

    @handler
    async def fsyncdir(self, fh: int, datasync: bool) -> None:
        self.cache.fsync(self.cache.node(ROOT_ID))  # names are commits: every one made durable

    @handler
    async def unlink(self, parent_inode: int, name: bytes, ctx: Any) -> None:
        sname = self._name_to_change(parent_inode, name, errno.EPERM)
        self.cache.unlink(parent_inode, sname)

    @handler
    async def rename(
        self,
        parent_inode_old: int,
        name_old: bytes,
        parent_inode_new: int,
        name_new: bytes,
        flags: int,
        ctx: Any,
    ) -> None:
        old = self._name_to_change(parent_inode_old, name_old, errno.EPERM)
        new = self._name_to_change(parent_inode_new, name_new, errno.EPERM)
        if flags & ~pyfuse3.RENAME_NOREPLACE:  # an exchange, a whiteout: not one move
            raise pyfuse3.FUSEError(errno.EINVAL)
        self.cache.rename(
            parent_inode_old,
            old,
            parent_inode_new,
            new,
            noreplace=bool(flags & pyfuse3.RENAME_NOREPLACE),
        )

    # A memory is a regular file: no symlinks, hard links, device nodes, FIFOs or sockets.
    @handler
    async def symlink(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise pyfuse3.FUSEError(errno.EROFS if self.read_only else errno.EPERM)

    @handler
    async def link(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise pyfuse3.FUSEError(errno.EROFS if self.read_only else errno.EPERM)

    @handler
    async def mknod(
        self, parent_inode: int, name: bytes, mode: int, rdev: int, ctx: Any
    ) -> pyfuse3.EntryAttributes:
        """A regular file (`tar --xattrs` makes one so); nothing else is a memory."""
        if not statmod.S_ISREG(mode):
            raise pyfuse3.FUSEError(errno.EROFS if self.read_only else errno.EPERM)
        sname = self._name_to_change(parent_inode, name, errno.EEXIST)
        owner, mode = self.attributes.for_new(
            parent_inode, ctx, statmod.S_IMODE(mode), is_dir=False
        )
        return self.attributes.of(self.cache.create(parent_inode, sname, mode, owner))

    @handler
    async def readlink(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise pyfuse3.FUSEError(errno.EINVAL)

    def _xattrs(self, inode: int) -> dict[bytes, bytes]:
        if inode == MARKER_INODE:
            return extended_attributes(marker_state())
        node = self.cache.node(inode)
        return {} if node.is_dir else extended_attributes(file_state(node))

    @handler
    async def getxattr(self, inode: int, name: bytes, ctx: Any) -> bytes:
        # The kernel asks for `security.capability` before every write of a
        # read-write handle: answered without looking at the file.
        value = self._xattrs(inode).get(name) if name.startswith(XATTR_PREFIX) else None
        if value is None:
            raise pyfuse3.FUSEError(errno.ENODATA)
        return value

    @handler
    async def listxattr(self, inode: int, ctx: Any) -> list[bytes]:
        return list(self._xattrs(inode))

    @handler
    async def setxattr(self, inode: int, name: bytes, value: bytes, ctx: Any) -> None:
        # Never ENOSYS: the kernel would answer EOPNOTSUPP to `user.memfs.*` too.
        raise pyfuse3.FUSEError(errno.EPERM if name.startswith(XATTR_PREFIX) else errno.ENOTSUP)

    @handler
    async def removexattr(self, inode: int, name: bytes, ctx: Any) -> None:
        raise pyfuse3.FUSEError(errno.EPERM if name.startswith(XATTR_PREFIX) else errno.ENOTSUP)

    @handler
    async def open(self, inode: int, flags: int, ctx: Any) -> pyfuse3.FileInfo:
        writable = (flags & os.O_ACCMODE) != os.O_RDONLY
        truncate = bool(flags & os.O_TRUNC)
        if inode == MARKER_INODE:
            if writable or truncate:
                raise pyfuse3.FUSEError(errno.EROFS if self.read_only else errno.EPERM)
            return self._new_file_handle(None, os.O_RDONLY)
        if truncate:
            self._check_writable()
        elif writable and self.read_only:
            raise pyfuse3.FUSEError(errno.EROFS)
        size = self.cache.node(inode).size
        node = await self.cache.open(inode, truncate=truncate and writable, writable=writable)
        if node.size != size and not truncate:  # a fetch brought the store's newer content
            _invalidate(f"inode {inode}", partial(pyfuse3.invalidate_inode, inode, attr_only=True))
        return self._new_file_handle(node, flags)

    @handler
    async def create(
        self, parent_inode: int, name: bytes, mode: int, flags: int, ctx: Any
    ) -> tuple[pyfuse3.FileInfo, pyfuse3.EntryAttributes]:
        sname = self._name_to_change(
            parent_inode, name, errno.EEXIST if flags & os.O_EXCL else errno.EPERM
        )
        if statmod.S_IFMT(mode) not in (0, statmod.S_IFREG):
            raise pyfuse3.FUSEError(errno.EPERM)
        owner, mode = self.attributes.for_new(
            parent_inode, ctx, statmod.S_IMODE(mode), is_dir=False
        )
        writable = (flags & os.O_ACCMODE) != os.O_RDONLY
        node = self.cache.create_open(parent_inode, sname, mode, owner, writable=writable)
        return self._new_file_handle(node, flags), self.attributes.of(node)

    @handler
    async def read(self, fh: int, off: int, size: int) -> bytes:
        h = self._open_file(fh)
        if h.node is None:
            return self.marker[off : off + size]
        return self.cache.read(h.node, off, size)

    @handler
    async def write(self, fh: int, off: int, buf: bytes) -> int:
        h = self._open_file(fh)
        if h.node is None:
            raise pyfuse3.FUSEError(errno.EPERM)
        if self.read_only:
            raise pyfuse3.FUSEError(errno.EROFS)
        if not h.writable:
            raise pyfuse3.FUSEError(errno.EBADF)
        if self.cache.disk_full:
            raise pyfuse3.FUSEError(errno.ENOSPC)
        return self.cache.write(h.node, h.node.size if h.append else off, buf)

    @handler
    async def flush(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise pyfuse3.FUSEError(errno.ENOSYS)  # once: the kernel stops sending FLUSH at every close

    @handler
    async def fsync(self, fh: int, datasync: bool) -> None:
        h = self._open_file(fh)
        self.cache.fsync(h.node)

    @handler
    async def release(self, fh: int) -> None:
        h = self.files.pop(fh, None)
        if h is not None and h.node is not None:
            self.cache.release(h.node.id, writable=h.writable)

    @handler
    async def statfs(self, ctx: Any) -> pyfuse3.StatvfsData:
        s = pyfuse3.StatvfsData()
        s.f_bsize = s.f_frsize = BLOCK_SIZE
        budget = self.cache.budget_bytes
        s.f_blocks = budget // BLOCK_SIZE
        s.f_bfree = s.f_bavail = max(0, budget - self.cache.cached_bytes()) // BLOCK_SIZE
        s.f_files = MAX_FILES
        s.f_ffree = s.f_favail = max(0, MAX_FILES - self.cache.file_count())
        s.f_namemax = 255
        return s
