"""`memfs status` and `memfs sync`, over the running stores' control sockets. `memfs status` fits 80
columns: per store its mount path on a line of its own, a table row (columns as wide as their widest
cell) and the details below, each file listed once; then each followed session. `memfs sync` runs a
pass now in each mount named (or every one), or pushes files now, one line each saying whether the
store holds it (docs/guide.md, "Confirm a save"). `--json` prints the same fields."""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, replace
from typing import Any

from .. import supervisor as sup
from .._exceptions import UsageError
from ..api import Confirmation, Outcome
from ..control import ErrorReply, StatusReply, StoreState, StoreStatus
from ..supervisor import SessionRecord
from ._config import Settings, choose
from ._options import CONFIRM_TIMEOUT, add_option

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


def _sentence(text: str, indent: str = "  ") -> list[str]:
    """A detail that is a sentence, indented, its words wrapped within the width
    (a word longer than a line, a path, stands whole on its own)."""
    return textwrap.wrap(
        text,
        WIDTH,
        initial_indent=indent,
        subsequent_indent="    ",
        break_long_words=False,
        break_on_hyphens=False,
    )


def _with_reason(label: str, path: str, reason: str) -> list[str]:
    """`label: path: reason` on one line, or the reason on lines of its own
    below when the line would not fit."""
    line = f"  {label}: {path}: {reason}"
    if len(line) <= WIDTH:
        return [line]
    return [f"  {label}: {path}", *_sentence(reason, indent="    ")]


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


def setup_status(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the status as JSON")


def run_status(args: argparse.Namespace, settings: Settings) -> int:
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
        why = sup.not_listed()
        print("no memfs mounts are running" + (f"; {why}" if why else ""))
        return 0
    now = time.time()
    for line in [*(table(results, now) if results else []), *session_lines(sessions, now)]:
        print(line)
    return 0


_WORST_FIRST = ((Outcome.NOT_CONFIRMED, 75), (Outcome.OVERRULED, 3), (Outcome.REFUSED, 65))


def setup_sync(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "mount_paths",
        nargs="*",
        metavar="MOUNT_PATH|FILE",
        help="mount paths: a pass in each (default: every mounted store); or files inside "
        "mounts: each pushed now and confirmed, one line each (not both kinds at once)",
    )
    p.add_argument("--json", action="store_true", help="print the reports as JSON")
    add_option(p, CONFIRM_TIMEOUT)


def run_sync(args: argparse.Namespace, settings: Settings) -> int:
    # Files to confirm, not mount paths: anything below a running mount, or any regular file.
    files = [p for p in args.mount_paths if sup.file_in_mount(p) or os.path.isfile(p)]
    if files and len(files) < len(args.mount_paths):
        raise UsageError(
            "give mount paths (a pass in each) or files inside mounts (each pushed and "
            "confirmed), not both in one call"
        )
    if files:
        timeout = choose([CONFIRM_TIMEOUT], args, os.environ, None)[CONFIRM_TIMEOUT.dest].value
        return confirm_files(files, timeout, as_json=args.json)
    results = sup.sync(args.mount_paths)
    code = 0
    out = []
    for store, reply in results:
        if isinstance(reply, ErrorReply):
            code = 1
            sys.stderr.write(f"memfs: sync of {store.mount_path} failed: {reply.error}\n")
        elif not args.json:
            r = reply.report
            print(
                f"{store.mount_path}: pushed {r['pushed']}, pulled {r['pulled']}, "
                f"deleted {r['deleted_remote']}, removed {r['removed_local']}, "
                f"conflicts {r['conflicts']}, refused {r['refused']}"
            )
        out.append({"mount_path": store.mount_path, "store_id": store.store_id, **reply.to_json()})
    if args.json:
        print(json.dumps(out, indent=2))
    return code


def confirm_files(paths: list[str], timeout: float, *, as_json: bool) -> int:
    """Push each file now, wait at most `timeout` seconds for each store, and
    print what became of each."""
    asked: dict[str, list[tuple[int, str]]] = {}
    stores: dict[str, StoreState] = {}
    for i, path in enumerate(paths):
        store, memory_path = _regular_file_in_mount(path)
        stores[store.mount_path] = store
        asked.setdefault(store.mount_path, []).append((i, memory_path))
    answers: list[Confirmation | None] = [None] * len(paths)

    def ask(mount_path: str) -> None:
        wanted = asked[mount_path]
        reply = sup.push_files(stores[mount_path], [p for _, p in wanted], timeout)
        for n, (i, memory_path) in enumerate(wanted):
            if isinstance(reply, ErrorReply) or n >= len(reply.files):
                why = reply.error if isinstance(reply, ErrorReply) else "no answer for this file"
                answers[i] = Confirmation(memory_path, Outcome.NOT_CONFIRMED, reason=why)
            else:
                answers[i] = reply.files[n]

    with ThreadPoolExecutor(max_workers=len(asked)) as pool:
        list(pool.map(ask, asked))
    done = [replace(a, path=p) for a, p in zip(answers, paths, strict=True) if a is not None]
    if as_json:
        print(json.dumps([asdict(a) for a in done], indent=2))
    else:
        for a in done:
            print(_line(a), flush=True)
    outcomes = {a.outcome for a in done}
    return next((code for outcome, code in _WORST_FIRST if outcome in outcomes), 0)


def _regular_file_in_mount(path: str) -> tuple[StoreState, str]:
    found, is_file = sup.file_in_mount(path), os.path.isfile(path)
    if found is not None and is_file:
        return found
    why = sup.not_listed(path) if found is None and is_file else None
    raise UsageError(why or f"{path} is not a regular file inside a mounted store")


def _line(a: Confirmation) -> str:
    if a.outcome == Outcome.SAVED:
        return f"saved {a.path} memory_id={a.memory_id} sha256={a.sha256}"
    if a.outcome == Outcome.OVERRULED:
        return f"overruled {a.path}: the store's version is now in the file" + (
            f"; your edit is kept at {a.kept_copy}" if a.kept_copy else ""
        )
    word = "not-confirmed" if a.outcome == Outcome.NOT_CONFIRMED else "refused"
    return f"{word} {a.path}: {a.reason}"
