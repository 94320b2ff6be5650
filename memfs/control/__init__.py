"""Between the CLI and the store processes: the control protocol, the store
spec and shared settings, the runtime folder and its state files. Importing
it loads neither trio nor httpx (`ControlServer` loads trio as it serves),
so that `memfs unmount`, `memfs sync` and `memfs status` start fast.
"""

from __future__ import annotations

from ..api import AuthHeader as AuthHeader
from ._protocol import Command as Command
from ._protocol import ControlClient as ControlClient
from ._protocol import ControlServer as ControlServer
from ._protocol import ErrorReply as ErrorReply
from ._protocol import MetricsReply as MetricsReply
from ._protocol import PushFilesReply as PushFilesReply
from ._protocol import PushReply as PushReply
from ._protocol import Reply as Reply
from ._protocol import Request as Request
from ._protocol import StatusReply as StatusReply
from ._protocol import StopReply as StopReply
from ._protocol import StoreStatus as StoreStatus
from ._protocol import SyncReply as SyncReply
from ._protocol import known_fields as known_fields
from ._runtime import StateFile as StateFile
from ._runtime import StoreState as StoreState
from ._runtime import process_alive as process_alive
from ._runtime import read_state as read_state
from ._runtime import running_stores as running_stores
from ._runtime import runtime_dir as runtime_dir
from ._runtime import socket_path as socket_path
from ._runtime import state_path as state_path
from ._spec import DEFAULT_CACHE_MEMORY as DEFAULT_CACHE_MEMORY
from ._spec import DEFAULT_CACHE_SIZE as DEFAULT_CACHE_SIZE
from ._spec import DEFAULT_FINAL_SYNC_TIMEOUT as DEFAULT_FINAL_SYNC_TIMEOUT
from ._spec import DEFAULT_ROOT as DEFAULT_ROOT
from ._spec import DEFAULT_START_TIMEOUT as DEFAULT_START_TIMEOUT
from ._spec import DEFAULT_SYNC_CONCURRENCY as DEFAULT_SYNC_CONCURRENCY
from ._spec import DEFAULT_SYNC_INTERVAL as DEFAULT_SYNC_INTERVAL
from ._spec import MAX_SYNC_CONCURRENCY as MAX_SYNC_CONCURRENCY
from ._spec import MIN_SYNC_INTERVAL as MIN_SYNC_INTERVAL
from ._spec import StoreLaunch as StoreLaunch
from ._spec import StoreSettings as StoreSettings
from ._spec import StoreSpec as StoreSpec
