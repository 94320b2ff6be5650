"""The content files of one store's cache: one file per cached content, named
by its node's id, in the folder `files` of the cache folder (reached through
the journal's checked folder descriptor, never through a symlink).

A write `pwrite`s its bytes into the content file at the offset the program
wrote; the journal's redo log holds the same bytes (memfs/cache/_records.py,
`Op.PATCH`), so that opening after a power cut rebuilds every content an
`fsync()` promised by doing the records since the last apply again (`redo`:
each sets bytes and a size, never reads them, so doing one twice is no
harm). A content the store sent replaces the file whole (a new file renamed
over it: a kill leaves the old or the new one).

The files changed since the journal's last apply are flushed when it applies
(`flush`: each file and the folder, or the whole filesystem at once with
`syncfs` when many changed), before SQLite commits the rows that say what
they hold; a content let go (evicted, deleted) is unlinked only after that
(`drop_later`), so that a row that calls a file cached never outlives its
file. A file no cached node owns is taken away at open (`sweep`).
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
from ._records import Op

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
        """Ids whose content files go once the rows that let them go are applied."""

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

    def size(self, node_id: int) -> int | None:
        """A content's size, None when it has none (or it goes)."""
        if node_id in self._dropped:
            return None
        try:
            return os.stat(str(node_id), dir_fd=self.fd, follow_symlinks=False).st_size
        except FileNotFoundError:
            return None

    # -------------------------------------------------------------- writing

    def _fd(self, node_id: int) -> int:
        """The content file to write (made when missing), counted as changed."""
        fd = self._open.get(node_id)
        if fd is None:
            self._dropped.discard(node_id)
            fd = self.space.run(open_file_at, self.fd, str(node_id), os.O_RDWR | os.O_CREAT)
            if len(self._open) >= MOST_OPEN:
                os.close(self._open.pop(next(iter(self._open))))
            self._open[node_id] = fd
        self._changed.add(node_id)
        return fd

    def patch(self, node_id: int, offset: int, data: bytes, size: int, *, exact: bool) -> None:
        """Write `data` at `offset` (zeros fill a gap); `exact`: then make the file
        `size` bytes long (a write leaves it that long by itself)."""
        fd = self._fd(node_id)
        if data:
            self.space.run(_pwrite, fd, data, offset)
        if exact or not data:
            self.space.run(os.ftruncate, fd, size)

    def put(self, node_id: int, content: bytes | bytearray) -> None:
        """Replace a content whole (see the module)."""
        fd = self._open.pop(node_id, None)
        if fd is not None:
            os.close(fd)
        self._dropped.discard(node_id)
        self.space.run(self._replace, str(node_id), content)
        self._changed.add(node_id)

    def _replace(self, name: str, content: bytes | bytearray) -> None:
        fd = open_file_at(self.fd, name + _NEW, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            _pwrite(fd, content, 0)
        finally:
            os.close(fd)
        os.rename(name + _NEW, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def redo(self, code: str, node_id: int, *args: object) -> None:
        """Do a content operation of a record again (opening: see the module)."""
        if code is Op.PUT_CONTENT:
            self.put(node_id, args[-1])  # type: ignore[arg-type]
        else:
            offset, size, data = args
            self.patch(node_id, offset, data, size, exact=True)  # type: ignore[arg-type]

    def drop_later(self, node_id: int) -> None:
        """The content goes once the rows that let it go are applied (`flush`)."""
        fd = self._open.pop(node_id, None)
        if fd is not None:
            os.close(fd)
        self._changed.discard(node_id)
        self._dropped.add(node_id)

    # ------------------------------------------------------------ applying

    def flush(self) -> None:
        """Make the content files changed since the last flush durable, and the
        folder's names for them."""
        if not self._changed:
            return
        if len(self._changed) > FLUSH_EACH_MOST and _SYNCFS is not None:
            if _SYNCFS(self.fd) != 0:
                code = ctypes.get_errno()
                raise OSError(code, os.strerror(code))
        else:
            for node_id in self._changed:
                self._flush_one(node_id)
            os.fsync(self.fd)
        self._changed.clear()
        self._close_files()

    def _flush_one(self, node_id: int) -> None:
        fd = self._open.get(node_id)
        if fd is not None:
            os.fdatasync(fd)
            return
        try:
            fd = open_file_at(self.fd, str(node_id), os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fdatasync(fd)
        finally:
            os.close(fd)

    def remove_dropped(self) -> None:
        """Unlink the contents let go, now that the rows saying so are applied."""
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
        written = os.pwrite(fd, view, offset)
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
