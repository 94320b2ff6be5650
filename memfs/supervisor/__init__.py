"""One store process per store: the specs and credentials, the process
supervisor (readiness, signal fan-out), and the `unmount`, `sync` and
`status` commands that talk to running store processes.

- `_credentials`: where the token comes from and which header it travels in.
- `_api`: the API from sync code (a mount's start, a follower's check).
- `_specs`: the settings of a mount (`MountSettings`), and from them one
  `StoreSpec` per store, refusals first.
- `_supervisor`: starting the store processes and seeing them to the end.
- `_commands`: `memfs unmount`, `memfs sync`, `memfs status`.
- `_run`: `memfs run`: one command in the foreground between mount and final sync.
- `_follow`: a session's stores attached and detached while it runs, followed.
- `_unfollow`: stopping those followers from outside (`memfs unmount`).
- `_notify`: systemd's readiness messages (`Type=notify`), without a library.

Importing this package loads neither trio, pyfuse3 nor httpx.
"""

from __future__ import annotations

from ..control import running_stores
from ._commands import (
    file_in_mount,
    push_files,
    status,
    sync,
    unmount,
)
from ._credentials import (
    CREDENTIAL_SOURCES,
    URL_ENV,
    ConfigFallback,
    Credentials,
    read_secret_file,
    resolve_credentials,
)
from ._follow import SessionFollower, start_daemon_follower
from ._notify import notify
from ._run import (
    run,
)
from ._session_read import fetch_session_resources
from ._session_records import (
    DEFAULT_SESSION_CHECK_INTERVAL,
    MIN_SESSION_CHECK_INTERVAL,
    FollowedStore,
    SessionRecord,
    SessionToFollow,
    session_records,
)
from ._specs import (
    MountSettings,
    build_specs,
    check_store_count,
    load_resources,
    parse_metrics_addr,
    parse_store_arg,
    store_arg_problem,
)
from ._supervisor import Supervisor
from ._unfollow import stop_followers

__all__ = [
    "DEFAULT_SESSION_CHECK_INTERVAL",
    "MIN_SESSION_CHECK_INTERVAL",
    "FollowedStore",
    "SessionFollower",
    "SessionRecord",
    "SessionToFollow",
    "fetch_session_resources",
    "file_in_mount",
    "session_records",
    "start_daemon_follower",
    "stop_followers",
    "parse_metrics_addr",
    "CREDENTIAL_SOURCES",
    "ConfigFallback",
    "Credentials",
    "MountSettings",
    "Supervisor",
    "URL_ENV",
    "build_specs",
    "check_store_count",
    "load_resources",
    "notify",
    "parse_store_arg",
    "read_secret_file",
    "resolve_credentials",
    "run",
    "running_stores",
    "push_files",
    "status",
    "store_arg_problem",
    "sync",
    "unmount",
]
