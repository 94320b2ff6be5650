"""Between the CLI and the store processes: the control protocol (typed
requests and replies, both ends), the store spec and the settings every store
of a mount shares (their defaults and bounds), the runtime folder and the
state files in it.

Importing this package loads neither trio nor httpx, so that `memfs
unmount`, `memfs sync` and `memfs status` start fast; `ControlServer` (the
store process's end, on trio) is loaded when first named.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..api import AuthHeader
from ._client import ControlClient
from ._protocol import (
    Command,
    ErrorReply,
    MetricsReply,
    PushFilesReply,
    PushReply,
    Reply,
    Request,
    StatusReply,
    StopReply,
    StoreStatus,
    SyncReply,
    UnknownCommand,
    known_fields,
)
from ._runtime import (
    StateFile,
    StoreState,
    process_alive,
    read_state,
    running_stores,
    runtime_dir,
    runtime_name,
    socket_path,
    state_path,
)
from ._spec import (
    DEFAULT_CACHE_SIZE,
    DEFAULT_FINAL_SYNC_TIMEOUT,
    DEFAULT_ROOT,
    DEFAULT_START_TIMEOUT,
    DEFAULT_SYNC_CONCURRENCY,
    DEFAULT_SYNC_INTERVAL,
    MAX_SYNC_CONCURRENCY,
    MIN_SYNC_INTERVAL,
    StoreLaunch,
    StoreSettings,
    StoreSpec,
)

if TYPE_CHECKING:
    from ._server import ControlServer, Handler

__all__ = [
    "DEFAULT_FINAL_SYNC_TIMEOUT",
    "DEFAULT_START_TIMEOUT",
    "DEFAULT_ROOT",
    "DEFAULT_CACHE_SIZE",
    "DEFAULT_SYNC_CONCURRENCY",
    "DEFAULT_SYNC_INTERVAL",
    "MAX_SYNC_CONCURRENCY",
    "MIN_SYNC_INTERVAL",
    "AuthHeader",
    "Command",
    "ControlClient",
    "ControlServer",
    "ErrorReply",
    "Handler",
    "Reply",
    "Request",
    "StateFile",
    "StatusReply",
    "MetricsReply",
    "PushFilesReply",
    "PushReply",
    "StopReply",
    "StoreLaunch",
    "StoreSettings",
    "StoreSpec",
    "StoreState",
    "StoreStatus",
    "SyncReply",
    "UnknownCommand",
    "process_alive",
    "known_fields",
    "read_state",
    "running_stores",
    "runtime_dir",
    "runtime_name",
    "socket_path",
    "state_path",
]


def __getattr__(name: str) -> Any:
    if name in ("ControlServer", "Handler"):
        from . import _server

        return getattr(_server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
