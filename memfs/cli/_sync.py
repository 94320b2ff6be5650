"""`memfs sync`: a pass now in each mount named (or every one), or files
inside mounts pushed now, one line each saying whether the store holds it
(docs/guide.md, "Confirm a save"). Exit statuses with files: 0 all saved,
else the first that applies of 75 (not confirmed), 3 (overruled), 65 (refused)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, replace

from .. import supervisor as sup
from .._exceptions import UsageError
from ..api import Confirmation, Outcome
from ..control import ErrorReply, StoreState
from ._config import Settings, choose
from ._options import CONFIRM_TIMEOUT, add_option

_WORST_FIRST = ((Outcome.NOT_CONFIRMED, 75), (Outcome.OVERRULED, 3), (Outcome.REFUSED, 65))


def setup(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "mount_paths",
        nargs="*",
        metavar="MOUNT_PATH|FILE",
        help="mount paths: a pass in each (default: every mounted store); or files inside "
        "mounts: each pushed now and confirmed, one line each (not both kinds at once)",
    )
    p.add_argument("--json", action="store_true", help="print the reports as JSON")
    add_option(p, CONFIRM_TIMEOUT)


def run(args: argparse.Namespace, settings: Settings) -> int:
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
    found = sup.file_in_mount(path)
    if found is None or not os.path.isfile(path):
        raise UsageError(f"{path} is not a regular file inside a mounted store")
    return found


def _line(a: Confirmation) -> str:
    if a.outcome == Outcome.SAVED:
        return f"saved {a.path} memory_id={a.memory_id} sha256={a.sha256}"
    if a.outcome == Outcome.OVERRULED:
        return (
            f"overruled {a.path}: the store's version is now in the file; your edit is kept "
            f"at {a.kept_copy}"
        )
    word = "not-confirmed" if a.outcome == Outcome.NOT_CONFIRMED else "refused"
    return f"{word} {a.path}: {a.reason}"
