"""Conflict copies: a local version the store's version won over, kept outside
the mount for a person to merge.

Each copy goes into a folder of its own, `conflicts/<UTC time>-<n>/`, made
exclusively (so no copy is ever overwritten), under the file's own path (so
`/p/q` and `/p__q` cannot meet, and no name grows past its limit; a path this
disk cannot hold is named by its hash, the path beside it). Files are 0600,
folders 0700, and nothing is written through a symlink.
"""

from __future__ import annotations

import errno
import itertools
import os
import time

from .._private import ensure_private_dir
from ..api import content_sha256


def _private_opener(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_EXCL | os.O_NOFOLLOW, 0o600)


class ConflictCopies:
    """The conflicts folder of one store."""

    def __init__(self, folder: str) -> None:
        self.dir = folder
        ensure_private_dir(folder, "conflicts folder")

    def paths(self) -> list[str]:
        """Every copy kept so far (this mount's and earlier ones'), oldest first."""
        out = []
        for root, dirs, files in os.walk(self.dir):
            dirs.sort()
            out += [os.path.join(root, f) for f in sorted(files) if not f.endswith(".path")]
        return out

    def keep(self, path: str, content: bytes) -> str:
        """Keep `content`, the local version of the file at `path`; returns the copy's path."""
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        for n in itertools.count(1):
            folder = os.path.join(self.dir, f"{stamp}-{n}")
            try:
                os.mkdir(folder, 0o700)
                break
            except FileExistsError:
                continue
        dest = os.path.join(folder, *path.strip("/").split("/"))
        try:
            os.makedirs(os.path.dirname(dest), mode=0o700, exist_ok=True)
            _write_private_file(dest, content)
        except OSError as e:
            if e.errno != errno.ENAMETOOLONG:
                raise
            dest = os.path.join(folder, "path-sha256-" + content_sha256(path.encode()))
            _write_private_file(dest, content)
            with open(dest + ".path", "w", encoding="utf-8", opener=_private_opener) as f:
                f.write(path + "\n")
        return dest


def _write_private_file(path: str, content: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, content)
        os.fsync(fd)
    finally:
        os.close(fd)
