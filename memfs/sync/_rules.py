"""The numbers and modes of the sync's rules: the delete window and cap, the
quiet time before a file being written is pushed, how many requests go at
once, how long a refused memory waits, and the backoff after failed passes."""

from __future__ import annotations

import math

from ..api import Deletions as Deletions  # the mode, shared with the spec (memfs.api._modes)

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


def delete_cap(n: int) -> int:
    """At most max(8, min(50, n/4)) deletes per pass, n the memories in the store."""
    return max(8, min(50, n // 4))


def backoff_delay(interval: float, failures: int, cap: float = 120.0) -> float:
    """The wait before the next pass after `failures` failed passes in a row."""
    if failures <= 0:
        return interval
    return min(cap, interval * math.pow(2, min(failures, 10)))
