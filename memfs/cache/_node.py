"""The things the cache keeps: nodes, pending deletes, uploads in flight, and
what it hands to the sync. A `Node`'s fields are what the journal keeps; its
`path` is derived from the tree; its `live` state lasts as long as the process.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field

import trio

ROOT_ID = 1
FIRST_NODE_ID = 16
"""Ids below are reserved for the root and synthetic files (the marker)."""


class NodeKind(enum.StrEnum):
    FILE = "file"
    DIR = "dir"


@dataclass(eq=False, slots=True)
class Live:
    """A node's state in this process only."""

    data: bytearray | None = None
    """The content while the file is open."""
    open_count: int = 0
    writers: int = 0
    """Open handles that may write."""
    last_write: float = 0.0
    """time.monotonic() of the last write or truncate."""
    fetching: trio.Event | None = field(default=None, repr=False)
    orphan: bool = False
    """Unlinked while open: it lives on, outside the tree, until its last release."""
    edits: int = 0
    """Bumped by every local change: a push knows whether the file changed on the way."""
    refusal: str | None = None
    """Why the sync does not push this content (the store's refusal, or memfs's
    own: `refusal_local`); it counts while `edits` is `refused_at`."""
    refusal_local: bool = False
    refused_at: int = -1


@dataclass(eq=False, slots=True)
class Node:
    """One file or folder of the mount; its id is the inode number, never reused."""

    id: int
    kind: NodeKind
    parent: int
    name: str
    mode: int
    mtime_ns: int
    ctime_ns: int
    size: int = 0
    memory_id: str | None = None
    base_sha: str | None = None
    """The content sha last agreed with the store (with `memory_id` and `base_path`)."""
    base_path: str | None = None
    edited: bool = False
    """The content differs from the base."""
    pending: bool = False
    """Something here (content, path, the file itself) is not agreed with the store yet."""
    cached: bool = False
    """The content is in the cache (without a content file: empty)."""
    made_here: bool = False
    """A folder made here: it stays when no memory is under it."""
    refused_sha: str | None = None
    refused_reason: str | None = None
    """The store refused this content (sha); it is tried again only once it changes."""
    too_large: bool = False
    """The last write or truncate was refused with EFBIG: the content may be torn,
    so it is not pushed until a write within the limit succeeds."""
    uid: int | None = None
    gid: int | None = None
    """The owner given here; None is the mount's default (`--uid`/`--gid`)."""
    atime_ns: int | None = None
    """The access time `utimensat` gave (reads do not change it); None is the
    modification time."""
    kept_copy: str | None = None
    """The conflict copy of the last local edit the store's version overruled;
    the next local change clears it."""
    path: str = ""
    live: Live = field(default_factory=Live, repr=False)

    @property
    def is_dir(self) -> bool:
        return self.kind is NodeKind.DIR

    @property
    def orphan(self) -> bool:
        return self.live.orphan

    def being_written(self, quiet_for: float) -> bool:
        """Open for writing and written within `quiet_for` seconds, or empty (its writer
        has not begun): a push now would meet it half way."""
        live = self.live
        return live.writers > 0 and (
            time.monotonic() - live.last_write < quiet_for or not self.size
        )


Owner = tuple[int | None, int | None]
"""(uid, gid) of a node; None is the mount's default."""

Gone = list[tuple[int, str]]
"""(parent id, name) of entries taken out of the tree, for the kernel to forget."""


@dataclass
class Placement:
    """What showing one of the store's memories did: the file, the names that
    went, and the conflict copies (path, copy)."""

    node: Node
    gone: Gone = field(default_factory=list)
    copies: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class StoredMemory:
    """What the store holds for one memory (its content travels apart)."""

    memory_id: str
    path: str
    sha: str
    size: int


@dataclass(frozen=True)
class Tombstone:
    """A memory deleted locally and not yet deleted in the store."""

    memory_id: str
    path: str
    base_sha: str
    deleted_at: float
    node_id: int
    """Its row: most often the deleted file's own, so a delete changes one row."""


@dataclass(frozen=True)
class Upload:
    """An upload not yet answered, recorded before it goes out: a store holding
    exactly this holds memfs's own write (`memory_id` None: a create)."""

    node_id: int
    memory_id: str | None
    path: str
    sha: str


@dataclass(frozen=True)
class Change:
    """A snapshot of a changed file taken by the sync before it talks to the store."""

    node_id: int
    edits: int
    path: str
    memory_id: str | None
    base_sha: str | None
    base_path: str | None
    edited: bool

    @classmethod
    def of(cls, n: Node) -> Change:
        return cls(n.id, n.live.edits, n.path, n.memory_id, n.base_sha, n.base_path, n.edited)
