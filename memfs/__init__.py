"""memfs: Memory Stores of Claude Managed Agents as ordinary folders, over FUSE.

The public face: `StoreClient` for the Memory Store API, the wire types it
answers with, and the exception tree every layer raises from (drawn in
`memfs._exceptions`). Everything else is the machinery of `memfs mount` and
`memfs serve`, in one subpackage per layer (see docs/design.md).

`StoreClient` is imported on first use, so that `import memfs` (and the
commands that need no HTTP) do not load httpx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

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
from .api import Memory, MemoryPrefix, MemoryStore, MemoryVersion, Page

if TYPE_CHECKING:
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
    raise AttributeError(f"module 'memfs' has no attribute {name!r}")
