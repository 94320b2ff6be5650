"""The sync pass: change detection, the three-way decision table, conflicts,
deletions, retries. Talks to the store through a small protocol the client
satisfies (`StoreAPI`) and to the local state through the cache's sync face;
never touches FUSE.

Modules by job: `_decide` (the decision table, pure), `_remote` (feed or
listing), `_pull` (applying the store's changes), `_push` (local changes),
`_deletes` (delete pacing and wipes), `_prefetch`, `_confirm` (files pushed
now on request: `memfs sync FILE`), `_engine` (the pass that runs them); and
what they share: `_rules` (the numbers and modes),
`_store_api` (the store and the kernel, as protocols; failures told apart),
`_reports` (what a pass did, the status), `_ledger` (what the engine
remembers between passes), `_part` (what every job works with).
"""

from __future__ import annotations

from ._decide import TABLE, Action, Local, Remote, decide, remote_state
from ._deletes import EndOfSession
from ._engine import SyncEngine
from ._prefetch import Download
from ._reports import FollowMode, PassReport, SyncStatus
from ._rules import (
    FINAL_CONCURRENCY,
    QUIET_SECONDS,
    Deletions,
    backoff_delay,
    delete_cap,
)
from ._store_api import KernelNotifier, NoKernel, StoreAPI

__all__ = [
    "FINAL_CONCURRENCY",
    "QUIET_SECONDS",
    "TABLE",
    "Action",
    "Deletions",
    "Download",
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
    "remote_state",
]
