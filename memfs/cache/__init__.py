"""The durable local state of one store: the tree, the contents and the
journal of what is still to be agreed with the store. Knows nothing of FUSE
or HTTP. `StoreCache` is one state with two faces: `FilesystemFace` (what the
filesystem may do) and `SyncFace` (what the sync may do).
"""

from __future__ import annotations

from ._cache import StoreCache
from ._check import invariant_problems
from ._core import DEFAULT_BUDGET_BYTES, ContentSource
from ._faces import FilesystemFace, SyncFace
from ._node import (
    ROOT_ID,
    Change,
    Gone,
    Live,
    Node,
    NodeKind,
    Owner,
    Placement,
    StoredMemory,
    Tombstone,
    Upload,
)

__all__ = [
    "DEFAULT_BUDGET_BYTES",
    "ROOT_ID",
    "Change",
    "ContentSource",
    "FilesystemFace",
    "Gone",
    "Live",
    "Node",
    "NodeKind",
    "Owner",
    "Placement",
    "StoreCache",
    "StoredMemory",
    "SyncFace",
    "Tombstone",
    "Upload",
    "invariant_problems",
]
