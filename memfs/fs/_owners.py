"""Owners, groups and set-id bits of a mount's files: kept locally, since the
store has none.

- A node's owner of None is the mount's default (`--uid`/`--gid`, else the
  mounting user): files that arrive from the store, among others.
- A new file or folder belongs to the caller (its fsuid and fsgid), in the
  folder's group when the folder has the set-gid bit (a new folder inherits
  the bit), as on ext4; a request without a caller (in-process) makes nodes
  of the mount's default owner.
- The store's marker can be given an owner too (kept in the journal's meta),
  so that `chown -R` of a whole mount succeeds.
- When the kernel checks permissions (`default_permissions`, given with
  `--allow-other`) it has refused what it refuses before memfs hears of it.
  Otherwise memfs refuses what ext4 refuses to a caller who is not root: a
  change of owner, and a change of group by someone other than the owner or
  to a group they are not in (EPERM).
- The set-id bits a change of owner takes away are the kernel's business: it
  sends the cleared mode along with the new owner.
"""

from __future__ import annotations

import errno
import os
import stat as statmod
from typing import Any

import pyfuse3

from ..cache import FilesystemFace, Node, Owner

MARKER_OWNER_KEY = "marker_owner"


def _supplementary_groups(pid: int) -> frozenset[int]:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Groups:"):
                    return frozenset(int(g) for g in line.split()[1:])
    except (OSError, ValueError):
        pass
    return frozenset()


class Owners:
    """The owners one mount shows and the changes of owner it allows."""

    def __init__(
        self, cache: FilesystemFace, uid: int | None, gid: int | None, *, kernel_checks: bool
    ) -> None:
        self.cache = cache
        self.uid = os.getuid() if uid is None else uid
        self.gid = os.getgid() if gid is None else gid
        self.kernel_checks = kernel_checks
        self._marker: Owner = _parse(cache.get_meta(MARKER_OWNER_KEY))

    def of(self, node: Node) -> tuple[int, int]:
        """The owner and group a node shows."""
        return self._resolve((node.uid, node.gid))

    def of_marker(self) -> tuple[int, int]:
        return self._resolve(self._marker)

    def _resolve(self, owner: Owner) -> tuple[int, int]:
        uid, gid = owner
        return (self.uid if uid is None else uid, self.gid if gid is None else gid)

    def for_new(self, parent_inode: int, ctx: Any, mode: int, *, is_dir: bool) -> tuple[Owner, int]:
        """(owner, mode) of a node the caller makes in a folder: the caller's, in
        the folder's group under a set-gid folder (whose bit a new folder takes)."""
        parent = self.cache.node(parent_inode)
        uid = None if ctx is None else ctx.uid
        gid = None if ctx is None else ctx.gid
        if parent.mode & statmod.S_ISGID:
            gid = self.of(parent)[1]
            if is_dir:
                mode |= statmod.S_ISGID
        return (uid, gid), mode

    def chown(self, node: Node | None, uid: int | None, gid: int | None, ctx: Any) -> None:
        """Give a node (None: the marker) an owner and group (None: unchanged)."""
        if not self.kernel_checks:
            current = self.of_marker() if node is None else self.of(node)
            _check_chown(current, uid, gid, ctx)
        if node is not None:
            self.cache.chown(node.id, uid, gid)
            return
        self._marker = (
            self._marker[0] if uid is None else uid,
            self._marker[1] if gid is None else gid,
        )
        self.cache.set_meta(MARKER_OWNER_KEY, _format(self._marker))


def _check_chown(current: tuple[int, int], uid: int | None, gid: int | None, ctx: Any) -> None:
    """Refuse with EPERM the changes of owner or group ext4 refuses to a caller
    who is not root (a request without a caller is the mounting user's own).
    A request carries only the fsgid: the other groups are read from /proc."""
    if ctx is None or ctx.uid == 0:
        return
    owner, group = current
    if uid is not None and not (ctx.uid == owner and uid == owner):
        raise pyfuse3.FUSEError(errno.EPERM)
    if gid is not None and not (
        ctx.uid == owner and (gid in (group, ctx.gid) or gid in _supplementary_groups(ctx.pid))
    ):
        raise pyfuse3.FUSEError(errno.EPERM)


def _parse(value: str | None) -> Owner:
    if not value:
        return (None, None)
    uid, _, gid = value.partition(":")
    return (int(uid) if uid else None, int(gid) if gid else None)


def _format(owner: Owner) -> str:
    return ":".join("" if v is None else str(v) for v in owner)
