"""The decision table of design.md, row by row: `decide` is pure, so each row
is one case here; the engine that executes the actions is tested in-process
and through real mounts."""

from __future__ import annotations

import pytest

from memfs.sync import TABLE, Action, Local, Remote, decide, remote_state

ROWS = [
    # local, remote, action
    (Local.UNCHANGED, Remote.UNCHANGED, Action.NOTHING),
    (Local.EDITED, Remote.UNCHANGED, Action.PUSH),
    (Local.MOVED, Remote.UNCHANGED, Action.PUSH),
    (Local.UNCHANGED, Remote.CHANGED, Action.PULL),
    (Local.UNCHANGED, Remote.MOVED, Action.PULL),
    (Local.EDITED, Remote.CHANGED, Action.PULL_KEEP_LOCAL),
    (Local.MOVED, Remote.CHANGED, Action.PULL),
    (Local.EDITED, Remote.MOVED, Action.FOLLOW_MOVE),
    (Local.MOVED, Remote.MOVED, Action.FOLLOW_MOVE),
    (Local.UNCHANGED, Remote.DELETED, Action.REMOVE_LOCAL),
    (Local.EDITED, Remote.DELETED, Action.RECREATE),
    (Local.MOVED, Remote.DELETED, Action.RECREATE),
    (Local.DELETED, Remote.UNCHANGED, Action.DELETE_REMOTE),
    (Local.DELETED, Remote.CHANGED, Action.RESTORE),
    (Local.DELETED, Remote.MOVED, Action.RESTORE),
    (Local.DELETED, Remote.DELETED, Action.FORGET_DELETE),
    (Local.ABSENT, Remote.UNCHANGED, Action.SHOW),
    (Local.ABSENT, Remote.CHANGED, Action.SHOW),
    (Local.ABSENT, Remote.MOVED, Action.SHOW),
    (Local.ABSENT, Remote.DELETED, Action.NOTHING),
]


@pytest.mark.parametrize(
    "local, remote, action", ROWS, ids=[f"{lo.name}-{re.name}" for lo, re, _ in ROWS]
)
def test_each_row_of_the_table(local, remote, action):
    assert decide(local, remote) is action


def test_the_table_has_one_row_for_every_combination():
    assert len(ROWS) == len(Local) * len(Remote) == len(TABLE)
    assert {(lo, re) for lo, re, _ in ROWS} == set(TABLE)


@pytest.mark.parametrize("local", [Local.EDITED, Local.MOVED])
def test_a_read_only_store_keeps_what_it_deleted_but_changed_here(local):
    assert decide(local, Remote.DELETED, read_only=True) is Action.KEEP_LOCAL


@pytest.mark.parametrize("local", list(Local))
@pytest.mark.parametrize("remote", [Remote.UNCHANGED, Remote.CHANGED, Remote.MOVED])
def test_memfs_own_lost_upload_is_agreed_whatever_else(local, remote):
    assert decide(local, remote, own_write=True) is Action.AGREE


@pytest.mark.parametrize("local", list(Local))
def test_a_deleted_memory_is_never_agreed_as_an_own_write(local):
    assert decide(local, Remote.DELETED, own_write=True) is TABLE[(local, Remote.DELETED)]


@pytest.mark.parametrize(
    "base, now, state",
    [
        (("a", "/p"), ("a", "/p"), Remote.UNCHANGED),
        (("a", "/p"), ("b", "/p"), Remote.CHANGED),
        (("a", "/p"), ("b", "/q"), Remote.CHANGED),
        (("a", "/p"), ("a", "/q"), Remote.MOVED),
        (("a", "/p"), (None, None), Remote.DELETED),
    ],
)
def test_the_stores_state_against_the_base(base, now, state):
    assert remote_state(*base, *now) is state
