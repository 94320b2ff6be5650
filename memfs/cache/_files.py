"""The content files of one store's cache: one per cached content, named by its node's id, in the
folder `files`, never reached through a symlink. A write is `pwrite`n and stamped with its time, so
a SIGKILL cannot take it back; the file is the truth for its node's size (and an edited file's
time). Changed files are flushed while idle; a content let go is unlinked only once the rows that
let it go are durable. The contents of files lately closed are kept in memory, whole, up to
`--cache-memory` bytes; every change to a content file goes through this class and drops its copy
first."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat

from cachetools import LRUCache

from .._exceptions import CacheCorrupt
from .._private import libc_function, open_file_at
from ._disk_space import DiskSpace

FOLDER = "files"
_NEW = ".new"
MOST_OPEN = 64
"""Content files kept open for writing at once."""
FLUSH_EACH_MOST = 16
"""Past this many changed files, a flush is one `syncfs` rather than one each."""
_SYNCFS = libc_function("syncfs", [ctypes.c_int])


class ContentFiles:
    """The content files of the cache folder `folder_fd` (at `folder`)."""

    def __init__(self, folder_fd: int, folder: str, space: DiskSpace, memory_bytes: int) -> None:
        self.space = space
        self.recent: LRUCache[int, bytes] = LRUCache(memory_bytes, getsizeof=len)
        """Whole contents lately closed, by node id, up to `memory_bytes`."""
        self.fd = _open_own_folder(folder_fd, FOLDER, os.path.join(folder, FOLDER))
        self._open: dict[int, int] = {}
        """Descriptors of content files being written, by node id, the oldest first."""
        self._changed: set[int] = set()
        self._dropped: set[int] = set()
        """Ids whose content files go once the rows that let them go are durable."""
        self._made = False
        """A content file may have been made since the folder was last flushed."""

    def close(self) -> None:
        self._close_files()
        with contextlib.suppress(OSError):
            os.close(self.fd)

    def _close_files(self) -> None:
        for fd in self._open.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._open.clear()

    def read(self, node_id: int) -> bytes | None:
        if node_id in self._dropped:
            return None
        kept = self.recent.get(node_id)
        return kept if kept is not None else self.read_file(node_id)

    def read_file(self, node_id: int) -> bytes | None:
        """What the content file holds (None: there is none), never the memory's copy."""
        try:
            fd = open_file_at(self.fd, str(node_id), os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            return os.pread(fd, os.fstat(fd).st_size, 0)
        finally:
            os.close(fd)

    def remember(self, node_id: int, content: bytes | bytearray) -> None:
        """Keep in memory what the content file `node_id` holds, whole (a copy
        kept already is that content still: every change drops it)."""
        if node_id not in self.recent and len(content) <= self.recent.maxsize:
            self.recent[node_id] = bytes(content)

    def stat(self, node_id: int) -> os.stat_result | None:
        if node_id in self._dropped:
            return None
        try:
            return os.stat(str(node_id), dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def _fd(self, node_id: int) -> int:
        fd = self._open.get(node_id)
        if fd is None:
            self._dropped.discard(node_id)
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
        """Write `data` at `offset`; `exact`: then make the file `size` bytes long."""
        self.recent.pop(node_id, None)
        fd = self._fd(node_id)
        if data:
            self.space.run(_pwrite, fd, data, offset)
        if exact or not data:
            self.space.run(os.ftruncate, fd, size)
        if mtime_ns is not None:
            os.utime(fd, ns=(mtime_ns, mtime_ns))

    def put(self, node_id: int, content: bytes | bytearray) -> None:
        """Replace a content whole: a new file renamed over it."""
        self._let_go(node_id)
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
        self._let_go(node_id)
        self._changed.discard(node_id)
        self._dropped.add(node_id)

    def _let_go(self, node_id: int) -> None:
        """Forget the memory's copy and close the descriptor of a content about to go."""
        self.recent.pop(node_id, None)
        fd = self._open.pop(node_id, None)
        if fd is not None:
            os.close(fd)

    def changed(self, node_ids: set[int]) -> None:
        self._changed |= node_ids - self._dropped

    @property
    def unflushed(self) -> bool:
        return bool(self._changed or self._made)

    @property
    def dropping(self) -> bool:
        return bool(self._dropped)

    def flush(self) -> None:
        """Make the content files changed since the last flush durable, and their names."""
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
        for node_id in self._dropped:
            self._remove(str(node_id))
        self._dropped.clear()

    def sweep(self, keep: set[int]) -> None:
        """Take away the content files a kill left that no node in `keep` owns."""
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
    """The subfolder `name` of `folder_fd` (made 0700), checked as memfs's own."""
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
