"""The FUSE filesystem of one store: pyfuse3 Operations over the cache, and
the one place exceptions become errno values.
"""

from __future__ import annotations

from ._ops import (
    CACHE_TIMEOUT,
    MARKER_INODE,
    KernelCache,
    MemoryStoreFS,
    mount_options,
)

__all__ = [
    "CACHE_TIMEOUT",
    "KernelCache",
    "MARKER_INODE",
    "MemoryStoreFS",
    "mount_options",
]
