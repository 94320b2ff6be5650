"""What the parts of a sync pass share: the store they talk to (as a small
protocol), what one pass did, what the engine remembers between passes
(refusals, holds, what was logged), and how failures are told apart.
"""

from __future__ import annotations

import enum
import logging
import math
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import trio

from .._exceptions import StatusError, StoreError
from .._histogram import PASS_BUCKETS, Histogram
from ..api import Memory, MemoryPrefix, MemoryVersion, Page
from ..cache import SyncFace

log = logging.getLogger("memfs.sync")

DELETE_WINDOW = 30.0
QUIET_SECONDS = 2.0
"""A file open for writing is pushed once no write touched it for this long."""
DEFAULT_CONCURRENCY = 16
FINAL_CONCURRENCY = 32
"""Requests at once in a periodic pass and in the final sync."""
HOLD_FIRST = 15.0
HOLD_MAX = 600.0
"""A memory the store refused for a reason other than its content is tried
again after HOLD_FIRST seconds, doubling up to HOLD_MAX, or at once when it
changes."""

T = TypeVar("T")


class Deletions(enum.StrEnum):
    """What a local delete does in the store."""

    ENABLED = "enabled"
    LOG_ONLY = "log_only"
    DISABLED = "disabled"


class FollowMode(enum.StrEnum):
    """How remote changes are followed."""

    FEED = "feed"
    LISTING = "listing"


class StoreAPI(Protocol):
    """The part of `memfs.client.StoreClient` the sync uses."""

    stats: Any

    async def get_memory(self, store_id: str, memory_id: str, *, view: str = ...) -> Memory: ...
    def iter_memories(
        self, store_id: str, *, view: str = ..., limit: int = ...
    ) -> AsyncIterator[Memory | MemoryPrefix]: ...
    async def list_versions_page(
        self,
        store_id: str,
        *,
        created_at_gte: str | None = ...,
        limit: int | None = ...,
        page: str | None = ...,
    ) -> Page[MemoryVersion]: ...
    async def create_memory(self, store_id: str, path: str, content: str) -> Memory: ...
    async def update_memory(
        self,
        store_id: str,
        memory_id: str,
        *,
        content: str | None = ...,
        path: str | None = ...,
        precondition_sha256: str | None = ...,
    ) -> Memory: ...
    async def delete_memory(
        self, store_id: str, memory_id: str, *, expected_content_sha256: str | None = ...
    ) -> None: ...


class KernelNotifier(Protocol):
    async def forget_content(self, inode: int) -> None: ...
    async def forget_entry(self, parent_inode: int, name: str) -> None: ...


class NoKernel:
    """The notifier while nothing is mounted: there is no kernel cache to clear."""

    async def forget_content(self, inode: int) -> None:
        return None

    async def forget_entry(self, parent_inode: int, name: str) -> None:
        return None


def delete_cap(n: int) -> int:
    """At most max(8, min(50, n/4)) deletes per pass, n the memories in the store."""
    return max(8, min(50, n // 4))


def whole_store(e: StoreError) -> bool:
    """Whether a failure concerns the store as a whole (end the pass, back off)
    rather than the one memory it was about."""
    if not isinstance(e, StatusError):
        return True
    return e.status in (401, 408, 429) or e.status >= 500


def backoff_delay(interval: float, failures: int, cap: float = 120.0) -> float:
    """The wait before the next pass after `failures` failed passes in a row."""
    if failures <= 0:
        return interval
    return min(cap, interval * math.pow(2, min(failures, 10)))


@dataclass
class RemoteMemory:
    """What the store holds for one memory; `deleted` when it holds nothing."""

    memory_id: str
    path: str | None = None
    sha: str | None = None
    size: int = 0
    deleted: bool = False


@dataclass
class PassReport:
    """What one pass did; `error` is set when it could not finish."""

    pushed: int = 0
    pulled: int = 0
    moved: int = 0
    deleted_remote: int = 0
    removed_local: int = 0
    conflicts: int = 0
    refused: int = 0
    requests: int = 0
    full_listing: bool = False
    error: str | None = None
    finished_at: float = 0.0
    duration_s: float = 0.0
    result: str = "ok"
    """`ok`, or `failed` (then `error` says why)."""

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class SyncStatus:
    passes: int = 0
    failures_in_a_row: int = 0
    last: PassReport | None = None
    last_error: str | None = None
    mode: FollowMode = FollowMode.FEED
    mode_reason: str | None = None
    results: Counter[str] = field(default_factory=Counter)
    """Passes by result (`ok`, `failed`) since the mount."""
    durations: Histogram = field(default_factory=lambda: Histogram(PASS_BUCKETS))
    conflicts: int = 0
    """Conflict copies kept since the mount."""


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

    def log_once(
        self,
        key: object,
        message: str,
        level: int = logging.WARNING,
        *,
        event: str,
        path: str | None = None,
    ) -> None:
        """Log `message` for `key` unless it is what was last logged for it;
        `event` and `path` go with the record (docs/troubleshooting.md lists the events)."""
        if self.logged.get(key) != message:
            self.logged[key] = message
            log.log(level, "%s", message, extra={"event": event, "path": path})


@dataclass
class Shared:
    """What every part of a pass works with."""

    client: StoreAPI
    cache: SyncFace
    ledger: Ledger
    status: SyncStatus
    clock: Callable[[], float]


class Part:
    """One job of the sync pass (remote changes, pulls, pushes, deletes)."""

    def __init__(self, shared: Shared) -> None:
        self.client = shared.client
        self.cache = shared.cache
        self.store_id = shared.cache.store_id
        self.ledger = shared.ledger
        self.status = shared.status
        self.clock = shared.clock


async def each(items: Iterable[T], fn: Callable[[T], Awaitable[None]], limit: int) -> None:
    """`fn(item)` for every item, `limit` at once. The first whole-store failure
    (any StoreError that escapes `fn`) stops the others and is raised."""
    limiter = trio.CapacityLimiter(limit)
    failures: list[StoreError] = []

    async with trio.open_nursery() as nursery:

        async def one(item: T) -> None:
            async with limiter:
                if failures:
                    return
                try:
                    await fn(item)
                except StoreError as e:
                    failures.append(e)
                    nursery.cancel_scope.cancel()

        for item in items:
            nursery.start_soon(one, item)
    if failures:
        raise failures[0]
