"""The things the cache keeps: nodes, pending deletes, uploads in flight, and
the snapshots and results it hands to the sync.

A `Node` holds three kinds of state, kept apart on purpose:

- what the journal keeps of it (its dataclass fields; the journal's columns
  are listed once, in `memfs.cache._schema.NODE_FIELDS`);
- its `path`, derived from the tree, never stored;
- its `live` state (`Live`): descriptors, open counts, a fetch in progress,
  whether it is an orphan; it lives and dies with the process.
"""

from __future__ import annotations

import enum
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
    """The content while the file is open (the journal holds it too)."""
    open_count: int = 0
    writers: int = 0
    """Open handles that may write."""
    last_write: float = 0.0
    """time.monotonic() of the last write or truncate."""
    fetching: trio.Event | None = field(default=None, repr=False)
    """Set while the content is being fetched from the store; waiters wait on it."""
    orphan: bool = False
    """Unlinked while open: it lives on, outside the tree, until its last release."""
    edits: int = 0
    """Bumped by every local change: a push knows whether the file changed on the way."""
    refusal: str | None = None
    """Why the sync does not push this file's content as it is now (the
    store's refusal, or memfs's own: `refusal_local`); it counts while `edits`
    is `refused_at`."""
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
    """The content is in the cache (a content file of the journal; none: empty)."""
    made_here: bool = False
    """A folder made here: it stays when no memory is under it."""
    refused_sha: str | None = None
    refused_reason: str | None = None
    """The store refused this content (sha); it is tried again only once it changes."""
    too_large: bool = False
    """The last write or truncate was refused with EFBIG: the content may be torn, so it
    is not pushed until a write within the limit succeeds."""
    uid: int | None = None
    gid: int | None = None
    """The owner and group given here (by `chown`, or the creator); None is the
    mount's default (`--uid`/`--gid`), as for files that arrive from the store.
    Local only: the store has no owners."""
    atime_ns: int | None = None
    """The access time `utimensat` gave; None is the modification time. Reads do
    not change it (as with `noatime`); local only, like owners."""
    kept_copy: str | None = None
    """Where the conflict copy of the last local edit went when the store's
    version overruled it; the next local change clears it."""
    path: str = ""
    live: Live = field(default_factory=Live, repr=False)

    @property
    def is_dir(self) -> bool:
        return self.kind is NodeKind.DIR

    @property
    def orphan(self) -> bool:
        return self.live.orphan


Owner = tuple[int | None, int | None]
"""(uid, gid) of a node; None is the mount's default."""

Gone = list[tuple[int, str]]
"""(parent id, name) of entries taken out of the tree, for the kernel to forget."""


@dataclass
class Placement:
    """What showing one of the store's memories did: the file, the names that
    went (the kernel must forget them), and local files kept aside as
    conflict copies (path, copy)."""

    node: Node
    gone: Gone = field(default_factory=list)
    copies: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class StoredMemory:
    """What the store holds for one memory, as the sync tells the cache to show
    it: the memory's id, its path, and its content's sha256 and size (the
    content itself travels apart, and only when it was fetched)."""

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


@dataclass(frozen=True)
class Upload:
    """An upload sent and not yet answered: recorded before the request goes out,
    so that a store found holding exactly this can be recognised as memfs's own
    write whose answer was lost (`memory_id` is None for a create)."""

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
