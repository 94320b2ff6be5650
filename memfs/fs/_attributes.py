"""What `stat` and `getxattr` show of a mount's files, folders and marker.

- Entries and attributes may be kept by the kernel for `CACHE_TIMEOUT`
  seconds: a pull tells it to forget exactly what changed (`KernelCache`).
- On a read-only store no mode shows a write bit.
- A folder's link count is 2 and one per subfolder, as on ext4; an unlinked
  file still open shows 0.
- The store's marker is inode `MARKER_INODE`, mode 0444, with the root's
  change time for all its times: it is served from memory, never stored.
- A regular file shows where it stands with the store as read-only
  `user.memfs.*` extended attributes (docs/semantics.md): `state` (the word,
  then `: ` and a reason where it has one), `memory_id` and `sha256` (absent
  when the store holds none), `kept_copy` (an overruled file's conflict
  copy). Folders have none.
"""

from __future__ import annotations

import stat as statmod

import pyfuse3

from ..cache import ROOT_ID, FileState, FilesystemFace, Node
from ._owners import Owners

MARKER_INODE = 2
CACHE_TIMEOUT = 300.0
BLOCK_SIZE = 4096
XATTR_PREFIX = b"user.memfs."


class Attributes:
    """The `EntryAttributes` one mount answers for its nodes and its marker."""

    def __init__(
        self, cache: FilesystemFace, owners: Owners, *, read_only: bool, marker_size: int
    ) -> None:
        self.cache = cache
        self.owners = owners
        self.mode_mask = 0o7555 if read_only else 0o7777
        self.marker_size = marker_size

    def of(self, node: Node) -> pyfuse3.EntryAttributes:
        if node.is_dir:
            kind, nlink, size = statmod.S_IFDIR, 2 + self.cache.subdir_count(node.id), BLOCK_SIZE
        else:
            kind, nlink, size = statmod.S_IFREG, 0 if node.orphan else 1, node.size
        mode = kind | node.mode & self.mode_mask
        atime = node.mtime_ns if node.atime_ns is None else node.atime_ns
        times = (atime, node.mtime_ns, node.ctime_ns)
        return _entry(node.id, mode, nlink, size, self.owners.of(node), times)

    def of_marker(self) -> pyfuse3.EntryAttributes:
        ctime = self.cache.node(ROOT_ID).ctime_ns
        mode = statmod.S_IFREG | 0o444
        owner = self.owners.of_marker()
        return _entry(MARKER_INODE, mode, 1, self.marker_size, owner, (ctime, ctime, ctime))


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
    """The `user.memfs.*` attributes of a file with `state`, name -> value."""
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
