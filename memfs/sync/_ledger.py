"""What the sync engine remembers between passes, besides the cache: the
refusals it holds back and when to try them again, the changes of the
store's that wait, and what it logged (so that each is said once)."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

from ..cache import Node
from ._rules import HOLD_FIRST, HOLD_MAX
from ._store_api import RemoteMemory

log = logging.getLogger("memfs.sync")

_REQUEST_ID = re.compile(r" \[request [^\]]*\]")
"""The request id an error message ends with: each attempt has its own."""


@dataclass
class Hold:
    """A file or memory the store refused for a reason other than its content:
    tried again at `retry_at`, or at once when the file changes (`edits`)."""

    edits: int
    retry_at: float
    attempts: int
    reason: str

    @classmethod
    def after(cls, previous: Hold | None, edits: int, now: float, reason: str) -> Hold:
        attempts = previous.attempts + 1 if previous is not None and previous.edits == edits else 1
        wait = min(HOLD_MAX, HOLD_FIRST * 2 ** (attempts - 1))
        return cls(edits, now + wait, attempts, reason)


@dataclass
class Ledger:
    """What the engine remembers between passes, shared by its parts."""

    need_listing: bool = True
    """The next pass lists the whole store (a conflict or a skipped change may hide something)."""
    holds: dict[int, Hold] = field(default_factory=dict)
    """node id -> a push the store refused for another reason than the content."""
    delete_holds: dict[str, Hold] = field(default_factory=dict)
    deferred: dict[str, RemoteMemory] = field(default_factory=dict)
    """memory id -> a change of the store's that waits (a writer, a conflict copy
    that could not be written): applied again at the next pass, unless the store
    reports a newer state of the memory meanwhile."""
    logged: dict[object, str] = field(default_factory=dict)
    refused: dict[int, int] = field(default_factory=dict)
    """node id -> the file's edits when its content was last found to be the one the
    store refused (`Node.refused_sha`): while they are still its edits, the file is
    refused, not pending, and no stop leaves it behind; an edit makes it pending
    until a push looks at it again."""

    def content_refused(self, node: Node) -> bool:
        """Whether the store refused the file's content as it is now."""
        return bool(node.refused_reason) and self.refused.get(node.id) == node.live.edits

    def log_once(
        self,
        key: object,
        message: str,
        level: int = logging.WARNING,
        *,
        event: str,
        path: str | None = None,
    ) -> None:
        """Log `message` for `key` unless it is what was last logged for it (the
        request ids of error answers aside: the same refusal again is not news);
        `event` and `path` go with the record (docs/troubleshooting.md lists the events)."""
        said = _REQUEST_ID.sub("", message)
        if self.logged.get(key) != said:
            self.logged[key] = said
            log.log(level, "%s", message, extra={"event": event, "path": path})
