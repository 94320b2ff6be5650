"""The lines `memfs status` prints, from given statuses: a mount path is
never cut (tests/mount/test_status_metrics.py shows it on real mounts)."""

from __future__ import annotations

from memfs.cli._status import table
from memfs.control import ErrorReply, StatusReply, StoreState
from tests.support.control import a_status

LONG = "/srv/workers/worker-0042/sessions/sesn_0123456789abcdef/memory/project-notes"


def _state(mount_path: str) -> StoreState:
    return StoreState(store_id="memstore_1", mount_path=mount_path, pid=4242, socket="/run/s")


def test_a_short_mount_path_stays_in_its_row():
    st = a_status(mount_path="/mnt/memory/notes", last_pass=None)
    lines = table([(_state(st.mount_path), StatusReply(st))], now=2.0)
    assert lines[1].split()[:2] == ["/mnt/memory/notes", "rw"]
    assert lines[2].startswith("  store memstore_1")


def test_a_long_mount_path_stands_whole_above_its_row():
    st = a_status(mount_path=LONG, last_pass=None)
    lines = table([(_state(LONG), StatusReply(st))], now=2.0)
    assert lines[1] == LONG
    assert lines[2].startswith(" " * 22 + "rw ") and len(lines[2]) <= 100
    assert lines[0].index("ACCESS") == lines[2].index("rw")


def test_an_unreachable_store_shows_its_whole_mount_path():
    lines = table([(_state(LONG), ErrorReply("connection refused"))], now=2.0)
    assert lines[1:] == [
        LONG,
        " " * 22 + "?",
        "  store memstore_1: unreachable: connection refused",
    ]
