"""Conflict copies: a local version the store's won over, kept outside the mount. Each goes under
its file's path in a new folder `conflicts/<UTC time>-<n>/` (never overwritten; a path the disk
cannot hold is named by its hash, the path beside it), 0600 in 0700 folders, never following a name.
A copy is whole and durable before `keep` returns; else what was made is removed and
`ConflictCopyFailed` says why."""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import time

from .._exceptions import ConflictCopyFailed
from .._private import ensure_private_dir
from ..api import content_sha256, listed_path_problem

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class ConflictCopies:
    """The conflicts folder of one store."""

    def __init__(self, folder: str) -> None:
        self.dir = folder
        ensure_private_dir(folder, "conflicts folder")

    def paths(self) -> list[str]:
        """Every copy kept so far, by folder name (oldest first, bar 10+ in one second)."""
        out = []
        for root, dirs, files in os.walk(self.dir):
            dirs.sort()
            out += [os.path.join(root, f) for f in sorted(files) if not f.endswith(".path")]
        return out

    def keep(self, path: str, content: bytes) -> str:
        """Keep `content`, the local version of `path`; returns the copy's path."""
        try:
            top = os.open(self.dir, _DIR_FLAGS)
            try:
                stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
                for n in itertools.count(1):
                    name = f"{stamp}-{n}"
                    try:
                        os.mkdir(name, 0o700, dir_fd=top)
                        break
                    except FileExistsError:
                        continue
                try:
                    dest = self._write_under(top, name, path, content)
                    os.fsync(top)
                except OSError:
                    _remove_tree(top, name)
                    raise
                return os.path.join(self.dir, *dest)
            finally:
                os.close(top)
        except OSError as e:
            raise ConflictCopyFailed(
                f"the conflict copy of {path} could not be written in {self.dir}: {e.strerror or e}"
            )

    def _write_under(self, top: int, name: str, path: str, content: bytes) -> list[str]:
        folder = os.open(name, _DIR_FLAGS, dir_fd=top)
        try:
            parts = path.strip("/").split("/")
            if listed_path_problem(path) is None:
                try:
                    return [name, *_write_at(folder, parts, content)]
                except OSError as e:
                    if e.errno != errno.ENAMETOOLONG:
                        raise
            # A path no folder here can hold (or not a clean path): its hash names it.
            hashed = "path-sha256-" + content_sha256(path.encode("utf-8", "surrogatepass"))
            _write_file(folder, hashed, content)
            _write_file(folder, hashed + ".path", (path + "\n").encode("utf-8", "surrogatepass"))
            os.fsync(folder)
            return [name, hashed]
        finally:
            os.close(folder)


def _write_at(folder: int, parts: list[str], content: bytes) -> list[str]:
    """Make the folders and the file of `parts` under `folder`, each flushed."""
    fds = [os.dup(folder)]
    try:
        for part in parts[:-1]:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o700, dir_fd=fds[-1])
            fds.append(os.open(part, _DIR_FLAGS, dir_fd=fds[-1]))
        _write_file(fds[-1], parts[-1], content)
        for fd in reversed(fds):
            os.fsync(fd)
    finally:
        for fd in fds:
            os.close(fd)
    return parts


def _write_file(folder: int, name: str, content: bytes) -> None:
    fd = os.open(name, _FILE_FLAGS, 0o600, dir_fd=folder)
    try:
        view = memoryview(content)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_tree(top: int, name: str) -> None:
    """Take out what a failed copy made (best effort)."""
    with contextlib.suppress(OSError):
        for _root, dirs, files, fd in os.fwalk(name, dir_fd=top, topdown=False):
            for f in files:
                os.unlink(f, dir_fd=fd)
            for d in dirs:
                os.rmdir(d, dir_fd=fd)
        os.rmdir(name, dir_fd=top)
