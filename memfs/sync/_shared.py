"""What every job of a sync pass shares (design.md, the `sync/_shared.py` row)."""

from __future__ import annotations

import enum
import logging
import math
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, TypeVar

import trio

from .._exceptions import StatusError, StoreError
from .._histogram import PASS_BUCKETS, Histogram
from ..api import Deletions as Deletions  # the mode, shared with the spec
from ..api import Memory
from ..cache import Node, SyncFace
from ..client import StoreClient

log = logging.getLogger("memfs.sync")

T = TypeVar("T")

DELETE_WINDOW = 30.0
QUIET_SECONDS = 2.0
"""A file open for writing is pushed once no write touched it for this long."""
DEFAULT_CONCURRENCY = 16
FINAL_CONCURRENCY = 32
"""Requests at once in a periodic pass and in the final sync."""
HOLD_FIRST = 15.0
HOLD_MAX = 600.0
"""The wait before a held file or delete is tried again, doubling (`Hold`)."""

_REQUEST_ID = re.compile(r" \[request [^\]]*\]")
"""The request id an error message ends with: each attempt has its own."""


def delete_cap(n: int) -> int:
    """At most max(8, min(50, n/4)) deletes per pass, n the memories in the store."""
    return max(8, min(50, n // 4))


def backoff_delay(interval: float, failures: int, cap: float = 120.0) -> float:
    """The wait before the next pass after `failures` failed passes in a row."""
    if failures <= 0:
        return interval
    return min(cap, interval * math.pow(2, min(failures, 10)))


def whole_store(e: StoreError) -> bool:
    """Whether a failure ends the pass, rather than concerning one memory."""
    if not isinstance(e, StatusError):
        return True
    return e.status in (401, 408, 429) or e.status >= 500


class FollowMode(enum.StrEnum):
    FEED = "feed"
    LISTING = "listing"


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
    """Files and deletes refused or held back after the pass, as `memfs status` counts them."""
    requests: int = 0
    full_listing: bool = False
    push_only: bool = False
    error: str | None = None
    finished_at: float = 0.0
    duration_s: float = 0.0
    result: str = "ok"
    """`ok`, or `failed` (then `error` says why)."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SyncStatus:
    passes: int = 0
    failures_in_a_row: int = 0
    last: PassReport | None = None
    last_error: str | None = None
    mode: FollowMode = FollowMode.FEED
    mode_reason: str | None = None
    results: Counter[str] = field(default_factory=Counter)
    durations: Histogram = field(default_factory=lambda: Histogram(PASS_BUCKETS))
    conflicts: int = 0
    """Conflict copies kept since the mount."""


class KernelNotifier(Protocol):
    async def forget_content(self, inode: int) -> None: ...
    async def forget_entry(self, parent_inode: int, name: str) -> None: ...


class NoKernel:
    """The notifier while nothing is mounted: there is no kernel cache to clear."""

    async def forget_content(self, inode: int) -> None:
        return None

    async def forget_entry(self, parent_inode: int, name: str) -> None:
        return None


@dataclass(slots=True)
class RemoteMemory:
    """What the store holds for one memory; `deleted` when it holds nothing."""

    memory_id: str
    path: str | None = None
    sha: str | None = None
    size: int = 0
    deleted: bool = False

    @classmethod
    def of(cls, m: Memory) -> RemoteMemory:
        return cls(m.id, m.path, m.content_sha256, m.content_size_bytes)


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
        return cls(edits, now + min(HOLD_MAX, HOLD_FIRST * 2 ** (attempts - 1)), attempts, reason)


@dataclass
class Ledger:
    """What the engine remembers between passes, besides the cache."""

    need_listing: bool = True
    holds: dict[int, Hold] = field(default_factory=dict)
    delete_holds: dict[str, Hold] = field(default_factory=dict)
    deferred: dict[str, RemoteMemory] = field(default_factory=dict)
    """memory id -> a change of the store's that waits for the next pass."""
    logged: dict[object, str] = field(default_factory=dict)
    refused: dict[int, int] = field(default_factory=dict)
    """node id -> the file's edits when its content was found to be the one the
    store refused: until it changes, the file is refused, not pending."""

    def current_hold(self, node: Node) -> Hold | None:
        """The file's hold, unless it changed since."""
        hold = self.holds.get(node.id)
        return hold if hold is not None and hold.edits == node.live.edits else None

    def content_refused(self, node: Node) -> bool:
        """Whether the store refused the file's content as it is now."""
        return bool(node.refused_reason) and self.refused.get(node.id) == node.live.edits

    def log_once(self, key: object, message: str, *, event: str, path: str | None = None) -> None:
        """A warning, unless it is what was last logged for `key` (request ids
        aside: the same refusal again is not news)."""
        said = _REQUEST_ID.sub("", message)
        if self.logged.get(key) != said:
            self.logged[key] = said
            log.log(logging.WARNING, "%s", message, extra={"event": event, "path": path})


@dataclass
class Shared:
    client: StoreClient
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


async def each(items: Iterable[T], fn: Callable[[T], Awaitable[object]], limit: int) -> None:
    """`fn(item)` for every item, `limit` at once; the first StoreError stops all."""
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
