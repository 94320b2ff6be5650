"""The FUSE filesystem of one store: pyfuse3 Operations over the cache's
filesystem face (`_ops`), the one place exceptions become errno values
(`_errno`), and what the kernel must forget after a pull (`_kernel`).
"""

from __future__ import annotations

from ._errno import errno_for
from ._kernel import KernelCache, mount_options
from ._ops import CACHE_TIMEOUT, MARKER_INODE, MemoryStoreFS

__all__ = [
    "CACHE_TIMEOUT",
    "KernelCache",
    "MARKER_INODE",
    "MemoryStoreFS",
    "errno_for",
    "mount_options",
]
