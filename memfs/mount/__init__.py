"""One store's mount: the store process that wires client, cache,
filesystem and sync loop (`python -m memfs.mount`), and the mount folder's
life. Importing this package loads neither pyfuse3 nor httpx.
"""

from __future__ import annotations

from ._folder import MountEntry as MountEntry
from ._folder import force_unmount as force_unmount
from ._folder import is_stale_mount as is_stale_mount
from ._folder import memfs_mounts as memfs_mounts
from ._folder import mount_table as mount_table
from ._folder import mounted_source as mounted_source
from ._folder import remove_mount_folder as remove_mount_folder
from ._start import start_refusal as start_refusal
