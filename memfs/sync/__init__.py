"""The sync pass: change detection, the three-way decision table, conflicts,
deletions, retries. Talks to the store through the client and to the local
state through the cache; never touches FUSE.
"""

from __future__ import annotations

from ._engine import (
    DEFAULT_CONCURRENCY,
    DELETE_WINDOW,
    DELETIONS_MODES,
    FEED_REFUSALS,
    FEED_START,
    FINAL_CONCURRENCY,
    HOLD_FIRST,
    HOLD_MAX,
    PREFETCH_BY_LISTING,
    QUIET_SECONDS,
    KernelNotifier,
    NoKernel,
    PassReport,
    SyncEngine,
    SyncStatus,
    backoff_delay,
    delete_cap,
    whole_store,
)

__all__ = [
    "DEFAULT_CONCURRENCY",
    "DELETE_WINDOW",
    "DELETIONS_MODES",
    "FEED_REFUSALS",
    "FEED_START",
    "FINAL_CONCURRENCY",
    "HOLD_FIRST",
    "HOLD_MAX",
    "KernelNotifier",
    "NoKernel",
    "PREFETCH_BY_LISTING",
    "PassReport",
    "QUIET_SECONDS",
    "SyncEngine",
    "SyncStatus",
    "backoff_delay",
    "delete_cap",
    "whole_store",
]
