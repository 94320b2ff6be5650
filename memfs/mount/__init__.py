"""One store's mount: the composition root that wires client, cache,
filesystem and sync loop (`python -m memfs.mount`), and the mount folder's
life. Importing this package loads neither pyfuse3 nor httpx; the store
process itself lives in `memfs.mount._process`.
"""

from __future__ import annotations

from ._folder import (
    force_unmount,
    is_stale_mount,
    memfs_mounts,
    mounted_source,
    prepare_mount_path,
    remove_mount_folder,
)

__all__ = [
    "force_unmount",
    "is_stale_mount",
    "memfs_mounts",
    "mounted_source",
    "prepare_mount_path",
    "remove_mount_folder",
]
