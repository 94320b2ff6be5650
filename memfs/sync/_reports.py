"""What the sync says of itself: what one pass did (`PassReport`) and the
state `memfs status` and the metrics read (`SyncStatus`)."""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .._histogram import PASS_BUCKETS, Histogram


class FollowMode(enum.StrEnum):
    """How remote changes are followed."""

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
    """Files (and deletes) refused or held back after the pass, as `memfs status`
    counts them: what the store refuses stays refused from pass to pass."""
    requests: int = 0
    full_listing: bool = False
    push_only: bool = False
    """Local changes pushed alone: no listing, no pull, no delete."""
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
