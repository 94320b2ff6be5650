"""Where a store is mounted: the mount folder's life (`MountFolder`) and the mounts table, without
FUSE or HTTP, so that `memfs unmount`, `memfs sync` and `memfs status` start quickly."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import subprocess
from typing import NamedTuple

from .._exceptions import MountError
from ..api import is_ancestor

log = logging.getLogger("memfs.mount")

MOUNTS_TABLE = "/proc/self/mounts"

_OCTAL_ESCAPE = re.compile(rb"\\([0-7]{3})")


class MountEntry(NamedTuple):
    """One line of the mounts table, its fields decoded."""

    source: str
    point: str
    fstype: str
    options: str


def _decode(field: bytes) -> str:
    """The kernel writes a space, tab, newline and backslash as octal escapes
    (`\\040`) and every other byte as it is: the escapes are decoded to bytes
    first, then the bytes as a file name (`Café Notes`), never as Latin-1."""
    return os.fsdecode(_OCTAL_ESCAPE.sub(lambda m: bytes([int(m[1], 8)]), field))


def mount_table(table: str = MOUNTS_TABLE) -> list[MountEntry]:
    """Every mount of this process's namespace, in the table's order (the
    latest last); none when the table cannot be read."""
    try:
        with open(table, "rb") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    entries = []
    for line in lines:
        fields = line.split()
        if len(fields) >= 4:
            entries.append(MountEntry(*(_decode(f) for f in fields[:4])))
    return entries


def mounted_source(path: str) -> str | None:
    """The source shown in the mounts table for a mount at `path`, if any."""
    path = os.path.abspath(path)
    return next((m.source for m in reversed(mount_table()) if m.point == path), None)


def memfs_mounts() -> list[str]:
    """The points of the memfs mounts this user may unmount (FUSE's `user_id`; root: all)."""
    uid = os.geteuid()
    ours = [m for m in mount_table() if m.source.startswith("memfs:")]
    return [m.point for m in ours if not uid or f"user_id={uid}" in m.options.split(",")]


def is_stale_mount(path: str) -> bool:
    """True when the FUSE process behind a mount is gone (the kernel answers ENOTCONN)."""
    try:
        # A lookup always reaches the daemon: the kernel keeps no negative entries here.
        os.stat(os.path.join(path, ".memfs-liveness-probe"))
    except OSError as e:
        return e.errno in (errno.ENOTCONN, errno.ECONNABORTED)
    return False


def force_unmount(path: str) -> bool:
    """Lazily unmount a FUSE mount whose process is gone; False when refused."""
    for cmd in (["fusermount3", "-uz", path], ["umount", "-l", path]):
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            if subprocess.run(cmd, capture_output=True, timeout=10).returncode == 0:
                return True
    return False


_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def _open_folder_at(dir_fd: int, name: str) -> int:
    """The folder `name` of the folder `dir_fd`, never through a symlink."""
    return os.open(name, _DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)


class MountFolder:
    """The folder one store mounts at, and the folders memfs made for it
    (`made`, outermost first). `confined`: the path came from a session and
    must stay strictly under `root`, so each folder is reached and created
    from the root's descriptor without following a symlink."""

    def __init__(self, path: str, store_id: str, *, root: str, confined: bool = False) -> None:
        self.path = path
        self.store_id = store_id
        self.root = os.path.realpath(root)
        self.confined = confined
        self.made: list[str] = []

    def prepare(self, *, left_by_us: bool = False) -> None:
        """Create the folder like `mkdir -p`; refuse anything already standing
        there, except a stale mount of this very store, which is cleaned up,
        and an empty folder an earlier, killed mount of this store created
        (`left_by_us`, from the store's journal). Either is then memfs's own
        and is removed at the end."""
        path, store_id = self.path, self.store_id
        source = mounted_source(path)
        if source is not None:
            if source == f"memfs:{store_id}" and is_stale_mount(path):
                log.warning(
                    "cleaning up a stale memfs mount of %s at %s",
                    store_id,
                    path,
                    extra={"event": "stale_mount"},
                )
                force_unmount(path)
                self.made = [self._place()]
                return
            raise MountError(
                f"cannot mount {store_id} at {path}: something is already mounted there ({source})"
            )
        if left_by_us and os.path.isdir(path) and not os.path.islink(path) and not os.listdir(path):
            log.warning(
                "reusing the empty mount folder %s left by an earlier mount of %s",
                path,
                store_id,
                extra={"event": "folder_reused"},
            )
            self.made = [self._place()]
            return
        if os.path.lexists(path):
            raise MountError(
                f"cannot mount {store_id} at {path}: the path already exists; remove it or choose another"
            )
        # Folders an agent walks through: 0755 whatever the process's umask.
        old = os.umask(0o022)
        try:
            self._make()
        except MountError:
            self.remove()
            raise
        finally:
            os.umask(old)

    def _make(self) -> None:
        try:
            if self.confined:
                self._make_under_root()
                return
            folder = "/"
            for name in filter(None, self.path.split("/")):
                folder = os.path.join(folder, name)
                with contextlib.suppress(FileExistsError):
                    os.mkdir(folder)
                    self.made.append(folder)
        except OSError as e:
            if self.confined and e.errno in (errno.ELOOP, errno.ENOTDIR):
                raise MountError(
                    f"cannot mount {self.store_id} at {self.path}: a symlink or a file stands "
                    f"in its way under the mount root {self.root}"
                )
            raise MountError(
                f"cannot create the mount folder {self.path} ({e.strerror}); "
                "the host must make that path writable"
            )

    def _place(self) -> str:
        return os.path.realpath(self.path) if self.confined else self.path

    def _make_under_root(self) -> None:
        place = self._place()
        if not place.startswith(self.root.rstrip("/") + "/"):
            raise MountError(
                f"cannot mount {self.store_id} at {self.path}: it leads to {place}, "
                f"not to a folder under the mount root {self.root}"
            )
        names = place[len(self.root.rstrip("/")) + 1 :].split("/")
        os.makedirs(self.root, exist_ok=True)
        fd = os.open(self.root, _DIRECTORY)
        try:
            folder = self.root
            for name in names:
                folder = os.path.join(folder, name)
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, dir_fd=fd)
                    self.made.append(folder)
                inner = _open_folder_at(fd, name)
                os.close(fd)
                fd = inner
            # What the kernel will mount on must be the folder made here.
            made, there = os.fstat(fd), os.stat(self.path)
            if (made.st_dev, made.st_ino) != (there.st_dev, there.st_ino):
                raise MountError(
                    f"cannot mount {self.store_id} at {self.path}: the path changed "
                    "while its folder was made"
                )
        finally:
            os.close(fd)

    def remove(self) -> None:
        """Remove the folders memfs made, innermost first, each only while
        empty (the first that is not, or is gone, ends it); never the mount
        root or a folder above it."""
        while self.made:
            folder = self.made[-1]
            if self.root == folder or is_ancestor(folder, self.root):
                break
            if self.confined and not is_ancestor(self.root, folder):
                break
            try:
                if self.confined:
                    self._remove_under_root(folder)
                else:
                    os.rmdir(folder)
            except OSError:
                break
            self.made.pop()

    def _remove_under_root(self, folder: str) -> None:
        parent, name = os.path.split(folder)
        fd = os.open(self.root, _DIRECTORY)
        try:
            for part in [p for p in parent[len(self.root) :].split("/") if p]:
                inner = _open_folder_at(fd, part)
                os.close(fd)
                fd = inner
            os.rmdir(name, dir_fd=fd)
        finally:
            os.close(fd)


def remove_mount_folder(path: str) -> None:
    with contextlib.suppress(OSError):
        os.rmdir(path)
