"""The Memory Store API over httpx: the only layer that imports httpx."""

from __future__ import annotations

from ._client import (
    RETRY_STATUSES,
    ClientStats,
    StoreClient,
)

__all__ = [
    "ClientStats",
    "RETRY_STATUSES",
    "StoreClient",
]
