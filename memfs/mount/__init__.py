"""One store's mount: the store process that wires client, cache,
filesystem and sync loop (`python -m memfs.mount`), and the mount folder's
life. Importing this package loads neither pyfuse3 nor httpx.
"""

from __future__ import annotations

from ._folder import (
    MountEntry,
    force_unmount,
    is_stale_mount,
    memfs_mounts,
    mount_table,
    mounted_source,
    remove_mount_folder,
)
from ._start import start_refusal

__all__ = [
    "MountEntry",
    "start_refusal",
    "force_unmount",
    "is_stale_mount",
    "memfs_mounts",
    "mount_table",
    "mounted_source",
    "remove_mount_folder",
]
