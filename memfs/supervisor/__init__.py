"""One store process per store: the specs and credentials, the supervisor
of the store processes, the session follower, and the commands that talk to
running store processes (`unmount`, `sync`, `status`). Importing this
package loads neither trio, pyfuse3 nor httpx."""

from __future__ import annotations

from ..control import running_stores
from ._commands import file_in_mount, push_files, status, stop_followers, sync, unmount
from ._follow import (
    DEFAULT_SESSION_CHECK_INTERVAL,
    MIN_SESSION_CHECK_INTERVAL,
    FollowedStore,
    SessionFollower,
    SessionRecord,
    SessionToFollow,
    session_plan,
    session_records,
    start_daemon_follower,
)
from ._run import run
from ._specs import (
    CREDENTIAL_SOURCES,
    ENV_SOURCES,
    URL_ENV,
    WORKER_OWN_ENV,
    ConfigFallback,
    Credentials,
    MountSettings,
    api_client,
    build_specs,
    check_store_count,
    load_resources,
    parse_store_arg,
    read_secret_file,
    resolve_credentials,
    store_arg_problem,
)
from ._supervisor import Supervisor

__all__ = [
    "CREDENTIAL_SOURCES",
    "DEFAULT_SESSION_CHECK_INTERVAL",
    "ENV_SOURCES",
    "MIN_SESSION_CHECK_INTERVAL",
    "URL_ENV",
    "WORKER_OWN_ENV",
    "ConfigFallback",
    "Credentials",
    "FollowedStore",
    "MountSettings",
    "SessionFollower",
    "SessionRecord",
    "SessionToFollow",
    "Supervisor",
    "api_client",
    "build_specs",
    "check_store_count",
    "file_in_mount",
    "load_resources",
    "parse_store_arg",
    "push_files",
    "read_secret_file",
    "resolve_credentials",
    "run",
    "running_stores",
    "session_plan",
    "session_records",
    "start_daemon_follower",
    "status",
    "stop_followers",
    "store_arg_problem",
    "sync",
    "unmount",
]
