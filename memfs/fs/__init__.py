"""The FUSE filesystem of one store: pyfuse3 Operations over the cache's
filesystem face (`_ops`), with what `stat` shows (`_attributes`), the handle
tables (`_handles`), the folder listings (`_listings`), the owners
(`_owners`) and how every handler is
wrapped and timed (`_handlers`); the one place exceptions become errno values
(`_errno`); and what the kernel must forget after a pull (`_kernel`).
"""

from __future__ import annotations

from ._attributes import CACHE_TIMEOUT, MARKER_INODE
from ._errno import errno_for
from ._kernel import KernelCache, mount_options
from ._ops import MemoryStoreFS

__all__ = [
    "CACHE_TIMEOUT",
    "KernelCache",
    "MARKER_INODE",
    "MemoryStoreFS",
    "errno_for",
    "mount_options",
]
