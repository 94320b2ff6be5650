"""One store's mount: the composition root that wires client, cache,
filesystem and sync loop (`python -m memfs.mount`), and the mount folder's
life.

- `_folder`: the mount folder and the mounts table, without FUSE or HTTP.
- `_store`: one store's parts wired, and what they do while mounted.
- `_process`: the store process, its life on one exit stack.
- `_start`: the sentences of a mount's start for a refused token or a `/v1` URL.

Importing this package loads neither pyfuse3 nor httpx (only `_folder`);
the store process is `python -m memfs.mount`.
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
