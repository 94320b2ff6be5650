"""The durable local state of one store: the tree, the contents and the
journal of what is still to be agreed with the store. Knows nothing of FUSE
or HTTP.
"""

from __future__ import annotations

from ._cache import (
    DEFAULT_BUDGET_BYTES,
    DIR,
    FILE,
    FIRST_NODE_ID,
    ROOT_ID,
    Change,
    ContentFiles,
    ContentSource,
    Gone,
    Node,
    Placement,
    StoreCache,
    Tombstone,
    Upload,
)

__all__ = [
    "Change",
    "ContentFiles",
    "ContentSource",
    "DEFAULT_BUDGET_BYTES",
    "DIR",
    "FILE",
    "FIRST_NODE_ID",
    "Gone",
    "Node",
    "Placement",
    "ROOT_ID",
    "StoreCache",
    "Tombstone",
    "Upload",
]
