"""Where a store is mounted: the part of the mount layer that needs neither
FUSE nor HTTP, so that `memfs unmount`, `memfs sync` and `memfs status`
start quickly.

- The mount folder's life: created like `mkdir -p`, refused when anything
  stands there (except a stale mount of the same store, or an empty folder an
  earlier mount of that store left), removed after unmounting.
- The mounts table (`mount_table`), its escapes decoded into the paths they
  name, whatever letters those hold (`Café Notes`).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import subprocess
from typing import NamedTuple

from .._exceptions import MountError

log = logging.getLogger("memfs.mount")


MOUNTS_TABLE = "/proc/self/mounts"

_OCTAL_ESCAPE = re.compile(rb"\\([0-7]{3})")


class MountEntry(NamedTuple):
    """One line of the mounts table, its fields decoded."""

    source: str
    point: str
    fstype: str
    options: str


def decode_mounts_field(field: bytes) -> str:
    """A field of /proc/self/mounts (or mountinfo) as the path it names: the
    kernel writes a space, tab, newline and backslash as octal escapes
    (`\\040`) and every other byte as it is, so the escapes are decoded to
    bytes first and the bytes then as a file name (UTF-8, as `os.fsdecode`),
    never as Latin-1."""
    return os.fsdecode(_OCTAL_ESCAPE.sub(lambda m: bytes([int(m[1], 8)]), field))


def mount_table(table: str = MOUNTS_TABLE) -> list[MountEntry]:
    """Every mount of this process's namespace, in the table's order (the
    latest last); none when the table cannot be read."""
    out = []
    try:
        with open(table, "rb") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    for line in lines:
        parts = line.split()
        if len(parts) >= 4:
            source, point, fstype, options = (decode_mounts_field(p) for p in parts[:4])
            out.append(MountEntry(source, point, fstype, options))
    return out


def _mounts() -> list[tuple[str, str, str]]:
    """(source, mount point, fstype) of every mount, escapes decoded."""
    return [(m.source, m.point, m.fstype) for m in mount_table()]


def mounted_source(path: str) -> str | None:
    """The source shown in the mounts table for a mount at `path`, if any."""
    path = os.path.abspath(path)
    for source, point, _ in reversed(_mounts()):
        if point == path:
            return source
    return None


def memfs_mounts() -> list[tuple[str, str, str]]:
    """(source, mount point, fstype) of every memfs mount of this machine."""
    return [m for m in _mounts() if m[0].startswith("memfs:")]


def is_stale_mount(path: str) -> bool:
    """True when the FUSE process behind a mount is gone (the kernel answers ENOTCONN)."""
    try:
        # A lookup always reaches the daemon: the kernel keeps no negative entries here.
        os.stat(os.path.join(path, ".memfs-liveness-probe"))
    except OSError as e:
        return e.errno in (errno.ENOTCONN, errno.ECONNABORTED)
    return False


def force_unmount(path: str) -> None:
    """Lazily unmount a FUSE mount whose process is gone."""
    for cmd in (["fusermount3", "-uz", path], ["umount", "-l", path]):
        try:
            r = subprocess.run(cmd, capture_output=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if r.returncode == 0:
            return


def prepare_mount_path(path: str, store_id: str, *, left_by_us: bool = False) -> None:
    """Create the folder like `mkdir -p`; refuse anything already standing there,
    except a stale mount of this very store, which is cleaned up and reused, and
    an empty folder that an earlier, killed mount of this store created
    (`left_by_us`, from the store's journal). Whichever it was, the folder is
    then memfs's own, made now or by an earlier run of this store, and is
    removed at the end."""
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
        return
    if os.path.lexists(path):
        raise MountError(
            f"cannot mount {store_id} at {path}: the path already exists; remove it or choose another"
        )
    try:
        # Folders an agent walks through: 0755 whatever the process's umask.
        old = os.umask(0o022)
        try:
            os.makedirs(path)
        finally:
            os.umask(old)
    except OSError as e:
        raise MountError(
            f"cannot create the mount folder {path} ({e.strerror}); the host must make that path writable"
        )


def remove_mount_folder(path: str) -> None:
    with contextlib.suppress(OSError):
        os.rmdir(path)
