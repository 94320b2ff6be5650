"""`memfs sync FILE...`: push files inside mounts now and say, one line per
file, whether the store holds each (docs/guide.md, "Confirm a save").

Exit statuses: 0 every file saved; 75 some file not confirmed; 3 some file
overruled; 65 some file refused; with several files the first of 75, 3, 65
that applies.
"""

from __future__ import annotations

import json
import os
import stat
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, replace

from .. import supervisor as sup
from .._exceptions import UsageError
from ..api import Confirmation, Outcome
from ..control import ErrorReply, StoreState

EXIT_SAVED = 0
EXIT_REFUSED = 65
EXIT_OVERRULED = 3
EXIT_NOT_CONFIRMED = 75

_WORST_FIRST = (
    (Outcome.NOT_CONFIRMED, EXIT_NOT_CONFIRMED),
    (Outcome.OVERRULED, EXIT_OVERRULED),
    (Outcome.REFUSED, EXIT_REFUSED),
)


def names_a_file(path: str) -> bool:
    """Whether an argument of `memfs sync` names a file (to confirm) rather
    than a mount path (for a pass): anything below a running mount, or any
    regular file."""
    return sup.file_in_mount(path) is not None or os.path.isfile(path)


def confirm_files(paths: list[str], timeout: float, *, as_json: bool) -> int:
    """Push each file now, wait at most `timeout` seconds for each store, and
    print what became of each; the exit status the module says."""
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
    return next((code for outcome, code in _WORST_FIRST if outcome in outcomes), EXIT_SAVED)


def _regular_file_in_mount(path: str) -> tuple[StoreState, str]:
    found = sup.file_in_mount(path)
    try:
        is_file = stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        is_file = False
    if found is None or not is_file:
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
