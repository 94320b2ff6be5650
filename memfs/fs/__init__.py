"""The FUSE filesystem of one store: pyfuse3 Operations over the cache's
filesystem face (`_ops`), with what `stat` shows (`_attributes`), the handle
tables (`_handles`), the folder listings (`_listings`), the owners
(`_owners`) and how every handler is
wrapped and timed (`_handlers`); the one place exceptions become errno values
(`_errno`); and what the kernel must forget after a pull (`_kernel`).
"""

from __future__ import annotations

from ._attributes import MARKER_INODE
from ._kernel import KernelCache, mount_options
from ._ops import MemoryStoreFS

__all__ = [
    "KernelCache",
    "MARKER_INODE",
    "MemoryStoreFS",
    "mount_options",
]
