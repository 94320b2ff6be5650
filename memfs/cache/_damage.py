"""What opening a journal finds at the end of its redo log: a kill's end, or damage.

A kill leaves the chain of records followed by zeros, an earlier cycle's
records or the record it interrupted (`LogEnd`, memfs/cache/_redo.py): that
is no damage, and says nothing. Damage is intact records of the chain after
one that fails its check, a chain that runs into the end of a file cut
shorter than it was made (its space was written whole once), or a log that
is missing. Then the journal names the files whose changes were lost (from
the operations of the records left), logs it once (`redo_log_damaged`) and
keeps the sentence for `memfs status`.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from ._node import ROOT_ID
from ._records import Op, Operation
from ._redo import CAPACITY, LogEnd

log = logging.getLogger("memfs.cache")

LOST_PATHS_LOGGED = 20
"""Paths a damaged redo log's warning names (`memfs status --json` has them all)."""
MAX_DEPTH = 512
"""More folders than a path of 1,024 bytes can hold: a deeper chain is a loop."""

_ABOUT_A_NODE = (Op.DELETE_NODE, Op.UPLOAD_ANSWERED, Op.PUT_CONTENT, Op.PATCH)
"""Operations whose first argument is the id of the node they change."""


@dataclass(frozen=True)
class RedoDamage:
    """What opening the journal found lost from its redo log: why (`reason`, the
    end of a sentence about the log), and the operations of the lost records
    that can still be read (the journal names the files from them)."""

    reason: str
    lost: list[Operation]


def is_missing(folder_fd: int, name: str) -> bool:
    """The redo log `name` of a journal that has one is not in its folder."""
    try:
        os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
    except FileNotFoundError:
        return True
    return False


def damage_at(end: LogEnd, *, filled: bool, missing: bool) -> RedoDamage | None:
    """Damage, told from how the log ends after its chain (see the module);
    `filled`: the log's whole space was written once (`LOG_FILLED`);
    `missing`: the log of a journal that had one was not there (whatever it
    held is lost)."""
    if missing:
        return RedoDamage("the file is missing", [])
    lost = list(end.partial or [])
    for _, ops in end.later:
        lost += ops
    if end.later:
        n = len(end.later)
        reason = (
            f"record {end.expected} is damaged or missing, and "
            f"{n} later {'one follows' if n == 1 else 'ones follow'} it"
        )
        return RedoDamage(reason, lost)
    if end.cut and filled and end.size < CAPACITY:
        reason = f"the file is cut short at {end.size} bytes of {CAPACITY}"
        return RedoDamage(reason, lost)
    return None


def lost_paths(lost: list[Operation], names: dict[int, tuple[int, str]]) -> list[str]:
    """The paths the operations of lost records are about: their files as the
    journal holds them now (`names`: each row's (parent, name), by id), or as
    the lost records named them for a file they made or moved, and the paths
    of deletes and uploads."""
    names = dict(names)
    touched: list[int] = []
    paths: set[str] = set()
    for op in lost:
        code = op[0]
        if code is Op.INSERT_NODE:
            names[op[1]] = (op[2], op[3])
            touched.append(op[1])
        elif code is Op.SAVE_NODE:
            names[op[-1]] = (op[1], op[2])
            touched.append(op[-1])
        elif code is Op.SAVE_NODE_IN_PLACE:
            touched.append(op[-1])
        elif code is Op.WRITTEN:
            touched.append(op[4])
        elif code in _ABOUT_A_NODE:
            touched.append(op[1])
        elif code is Op.RECORD_UPLOAD:
            paths.add(op[3])
        elif code is Op.ADD_TOMBSTONE:
            paths.add(op[2])
    for node_id in touched:
        path = _path_in(names, node_id)
        if path is not None:
            paths.add(path)
    return sorted(paths)


def report(folder: str, damage: RedoDamage, paths: list[str]) -> str:
    """Log what a damaged redo log lost (once, `redo_log_damaged`) and return
    the sentence `memfs status` shows."""
    if paths:
        shown = ", ".join(paths[:LOST_PATHS_LOGGED])
        more = len(paths) - LOST_PATHS_LOGGED
        if more > 0:
            shown += f" and {more} more"
        what = f"the changes it held to {shown} are lost; those files show their state from before them"
    else:
        what = (
            "changes written before memfs stopped may be lost "
            "(the records left do not say to which files)"
        )
    log.warning(
        "the redo log of the cache at %s is damaged (%s): %s",
        folder,
        damage.reason,
        what,
        extra={"event": "redo_log_damaged"},
    )
    return f"the redo log of the cache at {folder} is damaged ({damage.reason}): {what}"


def _path_in(names: dict[int, tuple[int, str]], node_id: int) -> str | None:
    """The path of `node_id` by (parent, name) pairs; None for the root or a
    node whose folders are not all known."""
    parts: list[str] = []
    while node_id != ROOT_ID:
        if node_id not in names or len(parts) > MAX_DEPTH:
            return None
        node_id, name = names[node_id]
        parts.append(name)
    return "/" + "/".join(reversed(parts)) if parts else None
