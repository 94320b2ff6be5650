"""The content files of one store's cache: one per cached content, named by
its node's id, in the folder `files` (reached through the journal's checked
folder descriptor, never through a symlink).

A write `pwrite`s its bytes and stamps the file with the write's time: once
the call returns the kernel holds them, and a SIGKILL cannot take them back.
The file is the truth for its node's size (and an edited file's
modification time). A content the store sent replaces the file whole (a
new file renamed over it). Changed files are flushed while the filesystem
is idle (`flush`); a content let go is unlinked only once the rows that let
it go are durable (`drop_later`, `remove_dropped`); a file no cached node
owns is taken away at open (`sweep`).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat

from .._exceptions import CacheCorrupt
from .._private import libc_function, open_file_at
from ._disk_space import DiskSpace

FOLDER = "files"
_NEW = ".new"
"""The suffix of a content being written whole, before its rename."""
MOST_OPEN = 64
"""Content files kept open for writing at once (the oldest is closed past it)."""
FLUSH_EACH_MOST = 16
"""Past this many changed files, a flush is one `syncfs` rather than one each."""
_SYNCFS = libc_function("syncfs", [ctypes.c_int])


class ContentFiles:
    """The content files of the cache folder `folder_fd` (at `folder`)."""

    def __init__(self, folder_fd: int, folder: str, space: DiskSpace) -> None:
        self.space = space
        self.fd = _open_own_folder(folder_fd, FOLDER, os.path.join(folder, FOLDER))
        self._open: dict[int, int] = {}
        """Descriptors of content files being written, by node id, the oldest first."""
        self._changed: set[int] = set()
        """Ids of the content files changed since the last flush."""
        self._dropped: set[int] = set()
        """Ids whose content files go once the rows that let them go are durable."""
        self._made = False
        """A content file was made since the folder was last flushed."""

    def close(self) -> None:
        self._close_files()
        with contextlib.suppress(OSError):
            os.close(self.fd)

    def _close_files(self) -> None:
        for fd in self._open.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._open.clear()

    # -------------------------------------------------------------- reading

    def read(self, node_id: int) -> bytes | None:
        """A content, None when it has none (or it goes)."""
        if node_id in self._dropped:
            return None
        try:
            fd = open_file_at(self.fd, str(node_id), os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            return os.pread(fd, os.fstat(fd).st_size, 0)
        finally:
            os.close(fd)

    def stat(self, node_id: int) -> os.stat_result | None:
        """A content file's size and times, None when it has none (or it goes)."""
        if node_id in self._dropped:
            return None
        try:
            return os.stat(str(node_id), dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def sizes(self) -> dict[int, int]:
        """The size of every content file kept, by node id."""
        found = {int(n): self.stat(int(n)) for n in os.listdir(self.fd) if n.isdigit()}
        return {node_id: st.st_size for node_id, st in found.items() if st is not None}

    # -------------------------------------------------------------- writing

    def _fd(self, node_id: int) -> int:
        """The content file to write (made when missing), counted as changed."""
        fd = self._open.get(node_id)
        if fd is None:
            self._dropped.discard(node_id)
            try:
                fd = open_file_at(self.fd, str(node_id), os.O_RDWR)
            except FileNotFoundError:
                fd = self.space.run(open_file_at, self.fd, str(node_id), os.O_RDWR | os.O_CREAT)
                self._made = True
            if len(self._open) >= MOST_OPEN:
                os.close(self._open.pop(next(iter(self._open))))
            self._open[node_id] = fd
        self._changed.add(node_id)
        return fd

    def patch(
        self,
        node_id: int,
        offset: int,
        data: bytes | bytearray,
        size: int,
        *,
        exact: bool,
        mtime_ns: int | None = None,
    ) -> None:
        """Write `data` at `offset` (zeros fill a gap); `exact`: then make the file
        `size` bytes long; `mtime_ns`: the file's modification time after it."""
        fd = self._fd(node_id)
        if data:
            self.space.run(_pwrite, fd, data, offset)
        if exact or not data:
            self.space.run(os.ftruncate, fd, size)
        if mtime_ns is not None:
            os.utime(fd, ns=(mtime_ns, mtime_ns))

    def put(self, node_id: int, content: bytes | bytearray) -> None:
        """Replace a content whole (see the module)."""
        fd = self._open.pop(node_id, None)
        if fd is not None:
            os.close(fd)
        self._dropped.discard(node_id)
        self.space.run(self._replace, str(node_id), content)
        self._changed.add(node_id)
        self._made = True

    def _replace(self, name: str, content: bytes | bytearray) -> None:
        fd = open_file_at(self.fd, name + _NEW, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            _pwrite(fd, content, 0)
        finally:
            os.close(fd)
        os.rename(name + _NEW, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def drop_later(self, node_id: int) -> None:
        """The content goes once the rows that let it go are durable (`remove_dropped`)."""
        fd = self._open.pop(node_id, None)
        if fd is not None:
            os.close(fd)
        self._changed.discard(node_id)
        self._dropped.add(node_id)

    # ---------------------------------------------------------- durability

    def changed(self, node_ids: set[int]) -> None:
        """Count these content files as changed (flushed by the next `flush`)."""
        self._changed |= node_ids - self._dropped

    @property
    def unflushed(self) -> bool:
        return bool(self._changed or self._made)

    @property
    def dropping(self) -> bool:
        return bool(self._dropped)

    def flush(self) -> None:
        """Make the content files changed since the last flush durable, and the
        folder's names for them."""
        if len(self._changed) > FLUSH_EACH_MOST and _SYNCFS is not None:
            if _SYNCFS(self.fd) != 0:
                code = ctypes.get_errno()
                raise OSError(code, os.strerror(code))
        elif self._changed or self._made:
            for node_id in self._changed:
                self._flush_one(node_id)
            os.fsync(self.fd)
        self._made = False
        self._changed.clear()
        self._close_files()

    def sync_one(self, node_id: int) -> None:
        """Make one content file durable now, and the folder's name for it."""
        self._flush_one(node_id)
        if self._made:
            os.fsync(self.fd)
            self._made = False

    def _flush_one(self, node_id: int) -> None:
        fd = self._open.get(node_id)
        if fd is not None:
            os.fdatasync(fd)
            return
        with contextlib.suppress(FileNotFoundError):
            fd = open_file_at(self.fd, str(node_id), os.O_RDONLY)
            try:
                os.fdatasync(fd)
            finally:
                os.close(fd)

    def remove_dropped(self) -> None:
        """Unlink the contents let go, now that the rows saying so are durable."""
        for node_id in self._dropped:
            self._remove(str(node_id))
        self._dropped.clear()

    def sweep(self, keep: set[int]) -> None:
        """Take away the content files of nodes not in `keep` (and halves of
        contents being written whole) that a kill left."""
        for name in os.listdir(self.fd):
            if not (name.isdigit() and int(name) in keep):
                self._remove(name)

    def _remove(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=self.fd)


def _pwrite(fd: int, data: bytes | bytearray, offset: int) -> None:
    """Write all of `data` at `offset` (a short write is a full disk)."""
    view = memoryview(data)
    while view:
        written = os.pwritev(fd, [view], offset)
        if not written:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        view, offset = view[written:], offset + written


def _open_own_folder(folder_fd: int, name: str, path: str) -> int:
    """The subfolder `name` of `folder_fd` (made 0700 when missing), opened
    without following a symlink and checked as memfs's own."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, 0o700, dir_fd=folder_fd)
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        fd = os.open(name, flags, dir_fd=folder_fd)
    except OSError as e:
        raise CacheCorrupt(f"cannot open the cache folder {path}: {e.strerror or e}") from e
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or st.st_mode & 0o022 or not stat.S_ISDIR(st.st_mode):
        os.close(fd)
        raise CacheCorrupt(f"the cache folder {path} is not a folder of memfs's own")
    return fd
