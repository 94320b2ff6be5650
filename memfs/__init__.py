"""memfs: Memory Stores of Claude Managed Agents as ordinary folders, over FUSE.

The public face: `StoreClient`, the wire types it answers with and the
exception tree (`memfs._exceptions`). `StoreClient` and the wire types are
imported on first use, so that commands that need no HTTP do not load httpx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._exceptions import (
    AuthenticationFailed,
    BillingError,
    CacheError,
    ConfigError,
    Conflict,
    GatewayTimeout,
    InvalidPath,
    InvalidRequest,
    MemfsError,
    MountError,
    NotFound,
    Overloaded,
    PathConflict,
    PermissionDenied,
    PreconditionFailed,
    RateLimited,
    RequestTooLarge,
    ServerError,
    StatusError,
    StoreError,
    SyncError,
    TransportError,
    UsageError,
)
from ._version import __version__

if TYPE_CHECKING:
    from .api import Memory, MemoryPrefix, MemoryStore, MemoryVersion, Page
    from .client import StoreClient

__all__ = [
    "AuthenticationFailed",
    "BillingError",
    "CacheError",
    "ConfigError",
    "Conflict",
    "GatewayTimeout",
    "InvalidPath",
    "InvalidRequest",
    "MemfsError",
    "Memory",
    "MemoryPrefix",
    "MemoryStore",
    "MemoryVersion",
    "MountError",
    "NotFound",
    "Overloaded",
    "Page",
    "PathConflict",
    "PermissionDenied",
    "PreconditionFailed",
    "RateLimited",
    "RequestTooLarge",
    "ServerError",
    "StatusError",
    "StoreClient",
    "StoreError",
    "SyncError",
    "TransportError",
    "UsageError",
    "__version__",
]


def __getattr__(name: str) -> Any:
    if name == "StoreClient":
        from .client import StoreClient

        return StoreClient
    if name in ("Memory", "MemoryPrefix", "MemoryStore", "MemoryVersion", "Page"):
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'memfs' has no attribute {name!r}")
