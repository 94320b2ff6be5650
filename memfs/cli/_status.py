"""`memfs status` for a person: one table row per mounted store, within 100
columns, and the details that do not fit a row (the store, the last pass,
traffic since the mount, errors, changes a damaged cache lost, a full cache
disk, refused files, conflict copies, what is pending) indented below it.
Nothing is cut: a mount path longer than the MOUNT column stands whole on a
line of its own, its row below it with that cell empty (a terminal may wrap
that line; the output does not depend on the terminal's width). `memfs
status --json` prints the same status field for field
(`memfs.control.StoreStatus`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from ..control import ErrorReply, StatusReply, StoreState, StoreStatus

WIDTH = 100
COLUMNS = (
    ("MOUNT", 21, "<"),
    ("ACCESS", 6, "<"),
    ("MEMORIES", 8, ">"),
    ("CACHED", 7, ">"),
    ("DIRTY", 5, ">"),
    ("DELETES", 7, ">"),
    ("CONFL", 5, ">"),
    ("REFUSED", 7, ">"),
    ("MODE", 7, "<"),
    ("LAST", 10, "<"),
    ("NEXT", 6, "<"),
)
MAX_LISTED = 20
"""Pending paths shown under a store (the JSON has all of them)."""


def human_bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


def _ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.0f}h"


def _row(values: list[str]) -> str:
    """The cells padded to their columns; a wider one is not cut, it pushes the rest right."""
    cells = [f"{v:{align}{w}}" for v, (_, w, align) in zip(values, COLUMNS, strict=True)]
    return " ".join(cells).rstrip()


def _rows(mount_path: str, values: list[str]) -> list[str]:
    """A store's row: the whole mount path in its cell when it fits, else on a
    line of its own above the row."""
    if len(mount_path) <= COLUMNS[0][1]:
        return [_row([mount_path, *values])]
    return [mount_path, _row(["", *values])]


def _cells(st: StoreStatus, now: float) -> list[str]:
    """The row's cells after MOUNT."""
    last = st.last_pass
    if last is None:
        last_text = "never"
    else:
        result = "failed" if last.get("error") else "ok"
        last_text = f"{result} {_ago(now - last['finished_at'])}"
    if st.next_pass_at is None:
        next_text = "-"
    else:
        next_text = f"in {_ago(st.next_pass_at - now)}"
    return [
        "ro" if st.read_only else "rw",
        str(st.memories),
        human_bytes(st.cached_bytes),
        str(st.dirty),
        str(st.pending_deletes),
        str(len(st.conflict_copies)),
        str(len(st.refused)),
        st.sync_mode,
        last_text,
        next_text,
    ]


def _details(st: StoreStatus) -> Iterator[str]:
    name = f" ({st.name})" if st.name else ""
    yield f"  store {st.store_id}{name}, pid {st.pid}"
    last = st.last_pass
    if last is not None:
        yield (
            f"  last pass: {last.get('duration_s', 0.0):.2f} s, {last['requests']} requests, "
            f"pushed {last['pushed']}, pulled {last['pulled']}, conflicts {last['conflicts']}"
        )
    yield (
        f"  since mount: {st.requests} requests, {human_bytes(st.bytes_up)} up, "
        f"{human_bytes(st.bytes_down)} down"
    )
    if st.sync_mode_reason:
        yield f"  listing mode: {st.sync_mode_reason}"
    if st.store_full:
        yield "  the store is full: new files are refused (ENOSPC)"
    if st.last_error:
        yield f"  error: {st.last_error}"
    if st.cache_damage:
        yield f"  cache damaged: {st.cache_damage}"
    if st.cache_disk_full:
        yield (
            "  the cache's disk is full: changes are refused (ENOSPC) until space is freed; "
            "reads and uploads go on"
        )
    for path, reason in st.refused.items():
        yield f"  refused: {path}: {reason}"
    for path, reason in st.not_shown.items():
        yield f"  not shown: {path}: {reason}"
    for copy in st.conflict_copies:
        yield f"  conflict copy: {copy}"
    for path in st.pending[:MAX_LISTED]:
        yield f"  pending: {path}"
    if len(st.pending) > MAX_LISTED:
        yield f"  pending: ... and {len(st.pending) - MAX_LISTED} more (memfs status --json)"


def table(results: list[tuple[StoreState, StatusReply | ErrorReply]], now: float) -> list[str]:
    """The lines `memfs status` prints."""
    lines = [_row([name for name, _, _ in COLUMNS])]
    for store, reply in results:
        if isinstance(reply, ErrorReply):
            lines.extend(_rows(store.mount_path, ["?", *[""] * (len(COLUMNS) - 2)]))
            lines.append(f"  store {store.store_id}: unreachable: {reply.error}")
            continue
        lines.extend(_rows(reply.status.mount_path, _cells(reply.status, now)))
        lines.extend(_details(reply.status))
    return lines


def print_table(results: list[tuple[StoreState, StatusReply | ErrorReply]]) -> None:
    for line in table(results, time.time()):
        print(line)
