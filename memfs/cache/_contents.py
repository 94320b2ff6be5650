"""Content files: where a file's bytes live, and which clean ones may be evicted.

Both folders are memfs's own (0700, checked: see `memfs._private`), and every
file in them is reached by name relative to a descriptor of its folder,
never following a symlink, and created 0600.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat as statmod
import uuid
from collections.abc import Callable, Iterator

import cachetools

from .._private import open_private_dir


class ContentFiles:
    """The content files of one store, `contents/<node id>`, and a pool of
    empty files made ahead of time (`pool/`).

    Creating a file costs this kind of disk 0.1 to 0.7 ms of CPU; renaming one
    about 30 µs. So new contents take a file from the pool, and a worker thread
    keeps the pool filled in the background. (Emptying a dropped content file
    for reuse costs more than deleting it: ext4 flushes a file truncated to 0.)
    """

    FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC

    def __init__(self, store_dir: str, *, high: int = 1024) -> None:
        self.dir = os.path.join(store_dir, "contents")
        self.pool_dir = os.path.join(store_dir, "pool")
        self.high = high
        self.fd = open_private_dir(self.dir, "cache folder")
        self.pool_fd = open_private_dir(self.pool_dir, "cache folder")
        self.free = os.listdir(self.pool_fd)

    def close(self) -> None:
        for fd in (self.fd, self.pool_fd):
            with contextlib.suppress(OSError):
                os.close(fd)

    def path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    def open(self, name: str, flags: int = os.O_RDWR) -> int:
        return os.open(name, flags | self.FLAGS, 0o600, dir_fd=self.fd)

    def size(self, name: str) -> int:
        st = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        if not statmod.S_ISREG(st.st_mode):
            raise FileNotFoundError(errno.ENOENT, "not a regular file", name)
        return st.st_size

    def read(self, name: str) -> bytes:
        with self._opened(name, os.O_RDONLY) as fd:
            chunks = []
            while chunk := os.read(fd, 1 << 17):
                chunks.append(chunk)
            return b"".join(chunks)

    def write_in_place(self, name: str, content: bytes) -> None:
        with self._opened(name, os.O_WRONLY) as fd:
            os.write(fd, content)

    def write_new(self, name: str, content: bytes) -> None:
        """Create (or empty) `name` and write `content` into it (from any thread:
        the pool is not used)."""
        fd = self.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            view = memoryview(content)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)

    def truncate(self, name: str, size: int) -> None:
        with self._opened(name, os.O_WRONLY) as fd:
            os.ftruncate(fd, size)

    @contextlib.contextmanager
    def _opened(self, name: str, flags: int) -> Iterator[int]:
        fd = self.open(name, flags)
        try:
            yield fd
        finally:
            os.close(fd)

    def replace(self, src: str, dest: str) -> None:
        os.replace(src, dest, src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def unlink(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=self.fd)

    def unlink_all(self, names: list[str]) -> None:
        for name in names:
            self.unlink(name)

    def names(self) -> list[str]:
        return os.listdir(self.fd)

    def take(self, dest: str) -> None:
        """Put an empty file at `dest` (replacing what is there)."""
        while self.free:
            src = self.free.pop()
            try:
                os.replace(src, dest, src_dir_fd=self.pool_fd, dst_dir_fd=self.fd)
                return
            except FileNotFoundError:
                continue
        os.close(self.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC))

    def recycle(self, names: list[str]) -> list[str]:
        """Turn the content files of dropped files into empty pool files (run in a
        worker thread): emptying and moving a file costs this kind of disk a
        tenth of making a new one. Returns their pool names; a name that is
        gone already is skipped."""
        out = []
        for name in names:
            try:
                os.close(os.open(name, os.O_WRONLY | os.O_TRUNC | self.FLAGS, dir_fd=self.fd))
            except FileNotFoundError:
                continue
            fresh = uuid.uuid4().hex
            os.replace(name, fresh, src_dir_fd=self.fd, dst_dir_fd=self.pool_fd)
            out.append(fresh)
        return out

    def make(self, n: int) -> list[str]:
        """Create `n` empty files in the pool (run in a worker thread)."""
        out = []
        for _ in range(n):
            name = uuid.uuid4().hex
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | self.FLAGS
            os.close(os.open(name, flags, 0o600, dir_fd=self.pool_fd))
            out.append(name)
        return out


class EvictingLRU(cachetools.LRUCache[int, int]):
    """node id -> size in bytes; evicting calls back so the content file is removed."""

    def __init__(self, maxsize: int, on_evict: Callable[[int], None]) -> None:
        super().__init__(maxsize=maxsize, getsizeof=lambda size: max(1, size))
        self._on_evict = on_evict

    def popitem(self) -> tuple[int, int]:
        key, value = super().popitem()
        self._on_evict(key)
        return key, value
