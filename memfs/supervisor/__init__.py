"""One store process per store: the specs, credentials, readiness, signal
fan-out, and the `unmount`, `sync` and `status` commands over control sockets.
"""

from __future__ import annotations

from ._supervisor import (
    API_KEY_PREFIX,
    AUTH_API_KEY,
    AUTH_BEARER,
    MAX_SYNC_CONCURRENCY,
    MIN_SYNC_INTERVAL,
    NAME_REFUSALS,
    READY_TIMEOUT,
    SECRET_ENV,
    URL_ENV,
    Credentials,
    RunningStore,
    Supervisor,
    build_specs,
    check_mount_path,
    control,
    default_cache_dir,
    load_resources,
    parse_store_arg,
    resolve_credentials,
    running_stores,
    select_stores,
    status,
    sync,
    unmount,
)

__all__ = [
    "API_KEY_PREFIX",
    "AUTH_API_KEY",
    "AUTH_BEARER",
    "Credentials",
    "MAX_SYNC_CONCURRENCY",
    "MIN_SYNC_INTERVAL",
    "NAME_REFUSALS",
    "READY_TIMEOUT",
    "RunningStore",
    "SECRET_ENV",
    "Supervisor",
    "URL_ENV",
    "build_specs",
    "check_mount_path",
    "control",
    "default_cache_dir",
    "load_resources",
    "parse_store_arg",
    "resolve_credentials",
    "running_stores",
    "select_stores",
    "status",
    "sync",
    "unmount",
]
