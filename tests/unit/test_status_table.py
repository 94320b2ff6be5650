"""The lines `memfs status` prints, from given statuses: within 80 columns, a
mount path never cut, every column aligned, each file listed once
(tests/mount/test_status_metrics.py shows it on real mounts)."""

from __future__ import annotations

from memfs.cli._status import WIDTH, table
from memfs.control import ErrorReply, StatusReply, StoreState
from tests.support.control import a_status

LONG = "/srv/workers/worker-0042/sessions/sesn_0123456789abcdef/memory/project-notes"
PASS = {"requests": 3, "pushed": 0, "pulled": 0, "conflicts": 0}
ERROR = (
    "the store could not be reached or failed; local changes are kept: "
    "cannot reach http://127.0.0.1:8377: connection refused"
)
NAMES = [
    "ACCESS", "MEMORIES", "CACHED", "DIRTY", "DELETES", "CONFL", "REFUSED", "MODE", "LAST", "NEXT",
]  # fmt: skip


def _state(mount_path: str) -> StoreState:
    return StoreState(store_id="memstore_1", mount_path=mount_path, pid=4242, socket="/run/s")


def test_a_mount_path_stands_whole_on_its_own_line_above_its_row():
    st = a_status(mount_path="/mnt/memory/notes", last_pass=None)
    lines = table([(_state(st.mount_path), StatusReply(st))], now=2.0)
    assert lines[0].split() == NAMES
    assert lines[1] == "/mnt/memory/notes"
    assert lines[2].split()[:2] == ["rw", "0"]
    assert lines[3].startswith("  store memstore_1")


def test_every_line_fits_80_columns_and_every_column_is_aligned():
    """A CACHED value as wide as `261.3 kB`, a long next pass, a failed pass:
    no line is wider than 80 columns, and each cell sits under its name."""
    statuses = [
        a_status(mount_path=LONG, cached_bytes=261_300, memories=1999, dirty=12, last_pass=None),
        a_status(
            mount_path="/mnt/memory/b",
            cached_bytes=12,
            next_pass_at=2.0 + 100 * 3600,
            sync_mode="listing",
            last_pass={**PASS, "error": "down", "finished_at": 2.0 - 59 * 60},
            last_error=ERROR,
        ),
    ]
    lines = table([(_state(st.mount_path), StatusReply(st)) for st in statuses], now=2.0)
    assert all(len(line) <= WIDTH for line in lines if line != LONG), lines
    error = lines.index(
        "  error: the store could not be reached or failed; local changes are kept:"
    )
    assert lines[error + 1] == "    cannot reach http://127.0.0.1:8377: connection refused"
    rows = [lines[0], lines[lines.index(LONG) + 1], lines[lines.index("/mnt/memory/b") + 1]]
    assert rows == [
        "ACCESS MEMORIES   CACHED DIRTY DELETES CONFL REFUSED MODE    LAST       NEXT",
        "rw         1999 261.3 kB    12       0     0       1 feed    never      -",
        "rw            0     12 B     0       0     0       1 listing failed 59m in 100h",
    ]


def test_a_refused_file_is_listed_once():
    st = a_status(
        refused={"/.git/index": "its content is not UTF-8 text"},
        pending=["/.git/index", "/notes.md"],
        last_pass=None,
    )
    lines = table([(_state(st.mount_path), StatusReply(st))], now=2.0)
    said = [line for line in lines if "/.git/index" in line]
    assert said == ["  refused: /.git/index: its content is not UTF-8 text"]
    assert "  pending: /notes.md" in lines


def test_an_unreachable_store_shows_its_whole_mount_path():
    lines = table([(_state(LONG), ErrorReply("connection refused"))], now=2.0)
    assert lines[1:] == [LONG, "?", "  store memstore_1: unreachable: connection refused"]


def test_a_reason_too_long_for_its_line_is_wrapped_below_the_path():
    reason = (
        "the store refused it (memory store memstore_0123456789abcdef is full: it holds at "
        "most 2000 memories (400 invalid_request_error))"
    )
    st = a_status(refused={"/notes/plan.md": reason}, last_pass=None)
    lines = table([(_state(st.mount_path), StatusReply(st))], now=2.0)
    at = lines.index("  refused: /notes/plan.md")
    below = [line for line in lines[at + 1 : at + 4] if line.startswith("    ")]
    assert all(len(line) <= WIDTH for line in below), lines
    assert " ".join(line.strip() for line in below) == reason
