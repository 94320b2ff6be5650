"""Where one file stands with the store, in one word and a short reason (the
`user.memfs.*` extended attributes, and what `memfs sync FILE` reads first),
from the node alone: its fields and what the sync noted on its live part.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..api import MAX_CONTENT_BYTES
from ._node import Node

READ_ONLY_REASON = "the store is read-only: this file is never pushed"
MARKER_REASON = "the store's marker: it is never a memory"
TOO_LARGE_REASON = (
    f"a write past {MAX_CONTENT_BYTES:,} bytes was refused (EFBIG): it is pushed once it is "
    "written again within the limit"
)


class SyncState(enum.StrEnum):
    SYNCED = "synced"
    """The store holds exactly this file."""
    PENDING = "pending"
    """A change here the store does not hold yet; a pass pushes it."""
    REFUSED = "refused"
    """The store refused this version of the file."""
    OVERRULED = "overruled"
    """The store had another version: it is in the file now, the local edit is
    kept as a conflict copy."""
    LOCAL_ONLY = "local-only"
    """A file whose content or name the store cannot hold: memfs never pushes it."""


@dataclass(frozen=True)
class FileState:
    state: SyncState
    reason: str | None = None
    memory_id: str | None = None
    """The memory the store holds for the file, if any."""
    sha256: str | None = None
    """The sha of what the store holds, if anything."""
    kept_copy: str | None = None
    """On an overruled file: the conflict copy's absolute path."""

    @property
    def text(self) -> str:
        return f"{self.state}: {self.reason}" if self.reason else str(self.state)


def overruled_copy(node: Node) -> str | None:
    """The conflict copy of the file's last local edit, while the file has not
    been changed since the store's version overruled it."""
    return node.kept_copy


def file_state(node: Node) -> FileState:
    """Where `node`, a regular file of a read-write store, stands with the store."""
    memory_id, sha = node.memory_id, node.base_sha if node.memory_id else None
    copy = node.kept_copy
    live = node.live
    if copy is not None:
        reason = f"the store's version replaced a local edit, kept at {copy}"
        return FileState(SyncState.OVERRULED, reason, memory_id, sha, copy)
    if node.pending and node.too_large:
        return FileState(SyncState.LOCAL_ONLY, TOO_LARGE_REASON, memory_id, sha)
    if node.pending and live.refusal is not None and live.refused_at == live.edits:
        word = SyncState.LOCAL_ONLY if live.refusal_local else SyncState.REFUSED
        return FileState(word, live.refusal, memory_id, sha)
    if node.pending or memory_id is None:
        return FileState(SyncState.PENDING, None, memory_id, sha)
    return FileState(SyncState.SYNCED, None, memory_id, sha)


def marker_state() -> FileState:
    return FileState(SyncState.LOCAL_ONLY, MARKER_REASON)
