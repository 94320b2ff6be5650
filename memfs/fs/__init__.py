"""The FUSE filesystem of one store: pyfuse3 Operations over the cache's
filesystem face, and what the kernel must forget after a pull."""

from __future__ import annotations

from ._attributes import MARKER_INODE as MARKER_INODE
from ._ops import KernelCache as KernelCache
from ._ops import MemoryStoreFS as MemoryStoreFS
from ._ops import mount_options as mount_options
