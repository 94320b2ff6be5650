"""What the store holds that this folder does not show, and why.

What the store lists is trusted for nothing it names: a path that is not a
clean memory path (`listed_path_problem`: a `.` or `..` segment, an empty
segment, a trailing `/`, NUL, over 1,024 bytes), the marker's path or a path
below it, or a name over 255 bytes (the contract limits paths, not names; no
folder here can hold one) never stands for a file here. Such a memory is never
shown, written or deleted; it is logged once and listed under `not_shown` in
`memfs status`, with the reason.
"""

from __future__ import annotations

from ..api import MARKER_PATH, MAX_NAME_BYTES, listed_path_problem
from ._ledger import Ledger
from ._store_api import RemoteMemory


class NotShown:
    """The memories of one store this folder does not show: id -> (path, reason)."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.memories: dict[str, tuple[str, str]] = {}

    def check(self, r: RemoteMemory) -> bool:
        """Whether the store's path for `r` cannot stand for a file here (then it
        is recorded, and logged once); a memory that can is no longer listed."""
        path = r.path
        key = ("not_shown", r.memory_id)
        if path == MARKER_PATH:
            self.ledger.log_once(
                key,
                f"the store holds a memory at {MARKER_PATH}, the marker's path; it is not shown",
                event="marker_taken",
                path=MARKER_PATH,
            )
            self.memories[r.memory_id] = (MARKER_PATH, "the marker's path, which memfs keeps")
            return True
        problem = listed_path_problem(path)
        if problem is None and path is not None:
            if all(len(part.encode("utf-8")) <= MAX_NAME_BYTES for part in path.split("/")):
                self.memories.pop(r.memory_id, None)
                return False
            self.ledger.log_once(
                key,
                f"the store holds {path}, with a name over {MAX_NAME_BYTES} bytes that no "
                "folder here can show; it is not shown, and left as it is in the store",
                event="name_unshowable",
                path=path,
            )
            self.memories[r.memory_id] = (path, f"a name over {MAX_NAME_BYTES} bytes")
            return True
        reason = problem or "it has no path"
        shown = path if isinstance(path, str) else repr(path)
        self.ledger.log_once(
            key,
            f"the store lists the memory {r.memory_id} at {shown!r}, which is not shown: "
            f"{reason}; it is left as it is in the store",
            event="path_unshowable",
            path=shown,
        )
        self.memories[r.memory_id] = (shown, reason)
        return True

    def cannot_place(self, memory_id: str, path: str, reason: str) -> None:
        """A memory the cache could not place here (it says why)."""
        self.memories[memory_id] = (path, reason)

    def gone(self, memory_id: str) -> None:
        """The store no longer holds the memory."""
        self.memories.pop(memory_id, None)

    def as_status(self) -> dict[str, str]:
        """path -> reason, as `memfs status` lists them."""
        return dict(self.memories.values())
