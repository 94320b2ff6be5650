"""The sync pass: change detection, the three-way decision table, conflicts,
deletions, retries. Talks to the store through a small protocol the client
satisfies (`StoreAPI`) and to the local state through the cache's sync face;
never touches FUSE.

Modules by job: `_decide` (the decision table, pure), `_remote` (feed or
listing), `_pull` (applying the store's changes), `_push` (local changes),
`_deletes` (delete pacing and wipes), `_prefetch`, `_ledger` (what they share),
`_engine` (the pass that runs them).
"""

from __future__ import annotations

from ._decide import TABLE, Action, Local, Remote, decide, remote_state
from ._deletes import EndOfSession
from ._engine import SyncEngine
from ._ledger import (
    DEFAULT_CONCURRENCY,
    DELETE_WINDOW,
    FINAL_CONCURRENCY,
    QUIET_SECONDS,
    Deletions,
    FollowMode,
    KernelNotifier,
    NoKernel,
    PassReport,
    StoreAPI,
    SyncStatus,
    backoff_delay,
    delete_cap,
    whole_store,
)
from ._prefetch import prefetch

__all__ = [
    "DEFAULT_CONCURRENCY",
    "DELETE_WINDOW",
    "FINAL_CONCURRENCY",
    "QUIET_SECONDS",
    "TABLE",
    "Action",
    "Deletions",
    "EndOfSession",
    "FollowMode",
    "KernelNotifier",
    "Local",
    "NoKernel",
    "PassReport",
    "Remote",
    "StoreAPI",
    "SyncEngine",
    "SyncStatus",
    "backoff_delay",
    "decide",
    "delete_cap",
    "prefetch",
    "remote_state",
    "whole_store",
]
