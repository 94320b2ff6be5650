"""Between the CLI and the store processes: the control protocol, the store
spec and shared settings, the runtime folder and its state files.

Importing this package loads neither trio nor httpx (`ControlServer`, on
trio, is loaded when first named), so that `memfs unmount`, `memfs sync`
and `memfs status` start fast. It re-exports what it imports.
"""

# mypy: implicit-reexport
# ruff: noqa: F401

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


def __getattr__(name: str) -> Any:
    if name in ("ControlServer", "Handler"):
        from . import _server

        return getattr(_server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
