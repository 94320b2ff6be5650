"""`memfs status`: within 80 columns, per mounted store its mount path on a
line of its own, a table row (columns as wide as their widest cell) and the
details indented below, each file listed once; then each followed session
and what it attached and detached. `--json` prints the same fields
(`StoreStatus`, then `SessionRecord`)."""

from __future__ import annotations

import argparse
import json
import textwrap
import time
from collections.abc import Iterator
from typing import Any

from .. import supervisor as sup
from ..control import ErrorReply, StatusReply, StoreState, StoreStatus
from ..supervisor import SessionRecord
from ._config import Settings

WIDTH = 80
COLUMNS = (
    ("ACCESS", "<"),
    ("MEMORIES", ">"),
    ("CACHED", ">"),
    ("DIRTY", ">"),
    ("DELETES", ">"),
    ("CONFL", ">"),
    ("REFUSED", ">"),
    ("MODE", "<"),
    ("LAST", "<"),
    ("NEXT", "<"),
)
MIN_WIDTHS = {"CACHED": len("999.9 kB"), "MODE": len("listing"), "LAST": len("failed 59m")}
"""Widths the usual values take, so that the columns stay put from one run to the next."""
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


def _aligned(rows: list[list[str]]) -> list[str]:
    """The rows (the header first) with each column as wide as its widest cell."""
    widths = [
        max(MIN_WIDTHS.get(name, 0), *(len(row[i]) for row in rows))
        for i, (name, _) in enumerate(COLUMNS)
    ]
    return [
        " ".join(
            f"{v:{align}{w}}" for v, (_, align), w in zip(row, COLUMNS, widths, strict=True)
        ).rstrip()
        for row in rows
    ]


def _cells(st: StoreStatus, now: float) -> list[str]:
    """The row's cells after MOUNT."""
    last = st.last_pass
    last_text = "never"
    if last is not None:
        last_text = f"{'failed' if last.get('error') else 'ok'} {_ago(now - last['finished_at'])}"
    next_text = "-" if st.next_pass_at is None else f"in {_ago(st.next_pass_at - now)}"
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
        yield from _sentence(f"listing mode: {st.sync_mode_reason}")
    if st.store_full:
        yield from _sentence("the store is full: new files are refused (ENOSPC)")
    if st.last_error:
        yield from _sentence(f"error: {st.last_error}")
    if st.cache_damage:
        yield from _sentence(f"cache damaged: {st.cache_damage}")
    if st.cache_disk_full:
        yield from _sentence(
            "the cache's disk is full: changes are refused (ENOSPC) until space is freed; "
            "reads and uploads go on"
        )
    for path, reason in st.refused.items():
        yield from _with_reason("refused", path, reason)
    for path, reason in st.not_shown.items():
        yield from _with_reason("not shown", path, reason)
    for copy in st.conflict_copies:
        yield f"  conflict copy: {copy}"
    pending = [path for path in st.pending if path not in st.refused]
    for path in pending[:MAX_LISTED]:
        yield f"  pending: {path}"
    if len(pending) > MAX_LISTED:
        yield f"  pending: ... and {len(pending) - MAX_LISTED} more (memfs status --json)"


def _sentence(text: str) -> list[str]:
    """A detail that is a sentence, indented, its words wrapped within the width
    (a word longer than a line, a path, stands whole on its own)."""
    return textwrap.wrap(
        text,
        WIDTH,
        initial_indent="  ",
        subsequent_indent="    ",
        break_long_words=False,
        break_on_hyphens=False,
    )


def _with_reason(label: str, path: str, reason: str) -> list[str]:
    """`label: path: reason` on one line, or the reason on a line of its own
    below when the line would not fit."""
    line = f"  {label}: {path}: {reason}"
    if len(line) <= WIDTH:
        return [line]
    return [f"  {label}: {path}", f"    {reason}"]


def table(results: list[tuple[StoreState, StatusReply | ErrorReply]], now: float) -> list[str]:
    rows = [[name for name, _ in COLUMNS]]
    for _, reply in results:
        if isinstance(reply, ErrorReply):
            rows.append(["?", *[""] * (len(COLUMNS) - 1)])
        else:
            rows.append(_cells(reply.status, now))
    header, *aligned = _aligned(rows)
    lines = [header]
    for (store, reply), row in zip(results, aligned, strict=True):
        if isinstance(reply, ErrorReply):
            lines += [store.mount_path, row]
            lines += _sentence(f"store {store.store_id}: unreachable: {reply.error}")
            continue
        lines += [reply.status.mount_path, row]
        lines.extend(_details(reply.status))
    return lines


def session_lines(records: list[SessionRecord], now: float) -> list[str]:
    lines = []
    for r in records:
        how = "memfs mount --daemon" if r.daemon else "its memfs mount or run"
        checked = (
            "not checked yet" if r.checked_at is None else f"checked {_ago(now - r.checked_at)} ago"
        )
        later = "" if r.next_check_at is None else f", next in {_ago(r.next_check_at - now)}"
        lines.append(f"session {r.session_id}: followed by pid {r.pid} ({how}), {checked}{later}")
        if r.last_error:
            lines.append(f"  error: {r.last_error}")
        for e in r.events:
            access = "read-only" if e.access == "read_only" else "read-write"
            if e.event == "attached":
                text = f"attached {e.store_id}: mounted at {e.mount_path} ({access})"
            elif e.event == "detached":
                text = f"detached {e.store_id}: unmounted {e.mount_path}, {e.detail}"
            else:
                text = f"attached {e.store_id}: not mounted: {e.detail}"
            lines.append(f"  {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(e.at))} {text}")
            lines.extend(f"    not uploaded: {path}" for path in e.not_uploaded[:MAX_LISTED])
    return lines


def setup(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the status as JSON")


def run(args: argparse.Namespace, settings: Settings) -> int:
    results = sup.status()
    sessions = sup.session_records()
    if args.json:
        entries: list[dict[str, Any]] = [
            {"mount_path": s.mount_path, **r.to_json()}
            if isinstance(r, ErrorReply)
            else r.status.to_json()
            for s, r in results
        ]
        # A followed session is an entry of its own, after the stores: no mount_path.
        entries += [record.to_json() for record in sessions]
        print(json.dumps(entries, indent=2))
        return 0
    if not results and not sessions:
        print("no memfs mounts are running")
        return 0
    now = time.time()
    for line in [*(table(results, now) if results else []), *session_lines(sessions, now)]:
        print(line)
    return 0
