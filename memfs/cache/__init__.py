"""The durable local state of one store: the tree, the contents and the
journal of what is still to be agreed with the store. Knows nothing of FUSE
or HTTP. `StoreCache` is one state with two faces: `FilesystemFace` (what the
filesystem may do) and `SyncFace` (what the sync may do).

Promised: a node's id (the inode number) is never reused; a killed process
loses no write and never leaves changed content it calls clean; `fsync()`
makes the file and all of the journal durable with one flush; only clean,
closed contents are evicted, past `--cache-size`.
"""

from __future__ import annotations

from ._agreement import SyncChanges
from ._core import DEFAULT_BUDGET_BYTES, ContentSource
from ._faces import FilesystemFace, SyncFace
from ._local import LocalChanges
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
from ._state import READ_ONLY_REASON, FileState, SyncState, file_state, marker_state, overruled_copy

__all__ = [
    "DEFAULT_BUDGET_BYTES",
    "ROOT_ID",
    "Change",
    "ContentSource",
    "FileState",
    "FilesystemFace",
    "Gone",
    "Live",
    "Node",
    "NodeKind",
    "Owner",
    "Placement",
    "READ_ONLY_REASON",
    "StoreCache",
    "StoredMemory",
    "SyncFace",
    "SyncState",
    "Tombstone",
    "Upload",
    "file_state",
    "marker_state",
    "overruled_copy",
]


class StoreCache(LocalChanges, SyncChanges):
    """The tree, contents and journal of one store, under `<cache_dir>/<store_id>/`."""
