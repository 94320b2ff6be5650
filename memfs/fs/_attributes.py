"""What `stat` and `getxattr` show of a mount's files, folders and marker, and
the owners kept locally, since the store has none (docs/semantics.md). The
kernel may keep entries and attributes for `CACHE_TIMEOUT` seconds: a pull
tells it to forget exactly what changed. The marker is served from memory,
yet its owner may change, so that a `chown -R` of the mount works."""

from __future__ import annotations

import errno
import os
import stat as statmod
from typing import Any

import pyfuse3

from ..cache import ROOT_ID, FileState, FilesystemFace, Node, Owner

MARKER_INODE = 2
CACHE_TIMEOUT = 300.0
BLOCK_SIZE = 4096
XATTR_PREFIX = b"user.memfs."
MARKER_OWNER_KEY = "marker_owner"


class Attributes:
    """The `EntryAttributes` one mount answers for its nodes and its marker,
    and the changes of owner it allows. A node's owner of None is the mount's
    default (`--uid`/`--gid`, else the mounting user)."""

    def __init__(
        self,
        cache: FilesystemFace,
        uid: int | None,
        gid: int | None,
        *,
        read_only: bool,
        kernel_checks: bool,
        marker_size: int,
    ) -> None:
        self.cache = cache
        self.uid = os.getuid() if uid is None else uid
        self.gid = os.getgid() if gid is None else gid
        self.mode_mask = 0o7555 if read_only else 0o7777
        self.kernel_checks = kernel_checks
        self.marker_size = marker_size
        self._marker_owner: Owner = _parse_owner(cache.get_meta(MARKER_OWNER_KEY))

    def of(self, node: Node) -> pyfuse3.EntryAttributes:
        if node.is_dir:
            kind, nlink, size = statmod.S_IFDIR, 2 + self.cache.subdir_count(node.id), BLOCK_SIZE
        else:
            kind, nlink, size = statmod.S_IFREG, 0 if node.orphan else 1, node.size
        mode = kind | node.mode & self.mode_mask
        atime = node.mtime_ns if node.atime_ns is None else node.atime_ns
        times = (atime, node.mtime_ns, node.ctime_ns)
        return _entry(node.id, mode, nlink, size, self.owner_of(node), times)

    def of_marker(self) -> pyfuse3.EntryAttributes:
        ctime = self.cache.node(ROOT_ID).ctime_ns
        owner = self._shown(self._marker_owner)
        return _entry(
            MARKER_INODE, statmod.S_IFREG | 0o444, 1, self.marker_size, owner, (ctime,) * 3
        )

    def owner_of(self, node: Node) -> tuple[int, int]:
        return self._shown((node.uid, node.gid))

    def _shown(self, owner: Owner) -> tuple[int, int]:
        uid, gid = owner
        return (self.uid if uid is None else uid, self.gid if gid is None else gid)

    def for_new(self, parent_inode: int, ctx: Any, mode: int, *, is_dir: bool) -> tuple[Owner, int]:
        """(owner, mode) of a node the caller makes in a folder: the caller's
        (a request without one: the mount's default), in the folder's group
        under a set-gid folder, whose bit a new folder takes, as on ext4."""
        parent = self.cache.node(parent_inode)
        uid = None if ctx is None else ctx.uid
        gid = None if ctx is None else ctx.gid
        if parent.mode & statmod.S_ISGID:
            gid = self.owner_of(parent)[1]
            if is_dir:
                mode |= statmod.S_ISGID
        return (uid, gid), mode

    def chown(self, node: Node | None, uid: int | None, gid: int | None, ctx: Any) -> None:
        """Give a node (None: the marker) an owner and group (None: unchanged).
        The set-id bits a change of owner clears come from the kernel, with it."""
        if not self.kernel_checks:
            current = self._shown(self._marker_owner) if node is None else self.owner_of(node)
            _check_chown(current, uid, gid, ctx)
        if node is not None:
            self.cache.chown(node.id, uid, gid)
            return
        old_uid, old_gid = self._marker_owner
        self._marker_owner = (old_uid if uid is None else uid, old_gid if gid is None else gid)
        value = ":".join("" if v is None else str(v) for v in self._marker_owner)
        self.cache.set_meta(MARKER_OWNER_KEY, value)


def _check_chown(current: tuple[int, int], uid: int | None, gid: int | None, ctx: Any) -> None:
    """Without the kernel's checks (`--allow-other`), refuse with EPERM what
    ext4 refuses to a caller who is not root: a change of owner, and a change
    of group by someone other than the owner or to a group they are not in. A
    request carries only the fsgid: the other groups are read from /proc."""
    if ctx is None or ctx.uid == 0:
        return
    owner, group = current
    if uid is not None and not (ctx.uid == owner and uid == owner):
        raise pyfuse3.FUSEError(errno.EPERM)
    if gid is not None and not (
        ctx.uid == owner and (gid in (group, ctx.gid) or gid in _supplementary_groups(ctx.pid))
    ):
        raise pyfuse3.FUSEError(errno.EPERM)


def _supplementary_groups(pid: int) -> frozenset[int]:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Groups:"):
                    return frozenset(int(g) for g in line.split()[1:])
    except (OSError, ValueError):
        pass
    return frozenset()


def _parse_owner(value: str | None) -> Owner:
    uid, _, gid = (value or "").partition(":")
    return (int(uid) if uid else None, int(gid) if gid else None)


def _entry(
    inode: int, mode: int, nlink: int, size: int, owner: tuple[int, int], times: tuple[int, ...]
) -> pyfuse3.EntryAttributes:
    a = pyfuse3.EntryAttributes()
    a.st_ino = inode
    a.entry_timeout = a.attr_timeout = CACHE_TIMEOUT
    a.st_mode, a.st_nlink, a.st_size = mode, nlink, size
    a.st_uid, a.st_gid = owner
    a.st_blksize = BLOCK_SIZE
    a.st_blocks = (size + 511) // 512
    a.st_atime_ns, a.st_mtime_ns, a.st_ctime_ns = times
    return a


def extended_attributes(state: FileState) -> dict[bytes, bytes]:
    """The read-only `user.memfs.*` attributes of a file with `state`, name ->
    value; one the state has no value for is absent."""
    values = {
        "state": state.text,
        "memory_id": state.memory_id,
        "sha256": state.sha256,
        "kept_copy": state.kept_copy,
    }
    return {
        XATTR_PREFIX + name.encode(): value.encode("utf-8", "surrogateescape")
        for name, value in values.items()
        if value is not None
    }
