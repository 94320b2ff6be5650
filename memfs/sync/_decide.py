"""The decision table of design.md as a pure function: from what changed here and in the store,
against the base last agreed, to what the sync does. Both states are decided by bytes."""

from __future__ import annotations

import enum


class Local(enum.Enum):
    """A memory's state here, against its base."""

    ABSENT = "not here, no delete pending: the store's memory is new here"
    UNCHANGED = "unchanged"
    EDITED = "content changed: its bytes differ from the base's"
    MOVED = "moved or renamed, its bytes the base's"
    DELETED = "deleted, the delete not yet in the store"


class Remote(enum.Enum):
    """A memory's state in the store, against its base."""

    UNCHANGED = "unchanged"
    CHANGED = "content changed"
    MOVED = "moved, content unchanged"
    DELETED = "deleted"


class Action(enum.Enum):
    NOTHING = "nothing to do"
    PUSH = "push the local change (the push phase does it)"
    DELETE_REMOTE = "delete in the store (the delete pacing does it, after its window)"
    SHOW = "show the store's memory (its content comes on first read)"
    PULL = "pull: show the store's version"
    PULL_KEEP_LOCAL = "the store wins: pull, keep the local version as a conflict copy"
    FOLLOW_MOVE = "follow the store's move, keep the local change"
    REMOVE_LOCAL = "remove the file here"
    RECREATE = "create the memory again from the local file"
    KEEP_LOCAL = "keep the local file (read-only: it is not uploaded)"
    RESTORE = "restore the store's version over the local delete"
    FORGET_DELETE = "both sides deleted it: forget the pending delete"
    AGREE = "the store holds memfs's own upload whose answer was lost: agree on it"
    ADOPT = "the file here already holds the store's new bytes: agree on them, fetch nothing"


TABLE: dict[tuple[Local, Remote], Action] = {
    (Local.ABSENT, Remote.UNCHANGED): Action.SHOW,
    (Local.ABSENT, Remote.CHANGED): Action.SHOW,
    (Local.ABSENT, Remote.MOVED): Action.SHOW,
    (Local.ABSENT, Remote.DELETED): Action.NOTHING,
    (Local.UNCHANGED, Remote.UNCHANGED): Action.NOTHING,
    (Local.UNCHANGED, Remote.CHANGED): Action.PULL,
    (Local.UNCHANGED, Remote.MOVED): Action.PULL,
    (Local.UNCHANGED, Remote.DELETED): Action.REMOVE_LOCAL,
    (Local.EDITED, Remote.UNCHANGED): Action.PUSH,
    (Local.EDITED, Remote.CHANGED): Action.PULL_KEEP_LOCAL,
    (Local.EDITED, Remote.MOVED): Action.FOLLOW_MOVE,
    (Local.EDITED, Remote.DELETED): Action.RECREATE,
    (Local.MOVED, Remote.UNCHANGED): Action.PUSH,
    (Local.MOVED, Remote.CHANGED): Action.PULL,
    (Local.MOVED, Remote.MOVED): Action.FOLLOW_MOVE,
    (Local.MOVED, Remote.DELETED): Action.RECREATE,
    (Local.DELETED, Remote.UNCHANGED): Action.DELETE_REMOTE,
    (Local.DELETED, Remote.CHANGED): Action.RESTORE,
    (Local.DELETED, Remote.MOVED): Action.RESTORE,
    (Local.DELETED, Remote.DELETED): Action.FORGET_DELETE,
}
"""Every combination, one action each (the rows of design.md's table)."""


def remote_state(
    base_sha: str | None, base_path: str | None, sha: str | None, path: str | None
) -> Remote:
    """The store's state of a memory against its base (None sha: deleted)."""
    if sha is None:
        return Remote.DELETED
    if sha != base_sha:
        return Remote.CHANGED
    return Remote.UNCHANGED if path == base_path else Remote.MOVED


def decide(
    local: Local,
    remote: Remote,
    *,
    read_only: bool = False,
    own_write: bool = False,
    same_bytes: bool = False,
) -> Action:
    """What to do with one memory. `own_write`: the store holds exactly what
    memfs sent for it last (an upload whose answer was lost); `same_bytes`:
    the file here holds exactly the store's new bytes. Both are agreed rather
    than decided. `read_only`: a local change the store deleted stays here."""
    if own_write and remote is not Remote.DELETED:
        return Action.AGREE
    if same_bytes and local is Local.EDITED and remote is Remote.CHANGED:
        return Action.ADOPT
    action = TABLE[(local, remote)]
    return Action.KEEP_LOCAL if read_only and action is Action.RECREATE else action
