"""The sync pass: change detection, the three-way decision table, conflicts,
deletions, retries. Talks to the store through the client and to the local
state through the cache's sync face; never touches FUSE."""

from __future__ import annotations

from ._decide import TABLE, Action, Local, Remote, decide, remote_state
from ._deletes import EndOfSession
from ._engine import SyncEngine
from ._shared import FINAL_CONCURRENCY, QUIET_SECONDS, NoKernel, backoff_delay, delete_cap

__all__ = [
    "FINAL_CONCURRENCY",
    "QUIET_SECONDS",
    "TABLE",
    "Action",
    "EndOfSession",
    "Local",
    "NoKernel",
    "Remote",
    "SyncEngine",
    "backoff_delay",
    "decide",
    "delete_cap",
    "remote_state",
]
