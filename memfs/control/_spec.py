"""What the supervisor tells a store process, and the settings every store of
one mount shares.

`StoreSettings` are those settings, typed and frozen, with their defaults and
bounds defined here once. The command line makes them, once, from its flags,
variables and config file (memfs.cli), and its readers check each value
against the bounds below as they read it, so that a refusal names the
value's source; nothing checks them again. Each store's `StoreSpec` holds
them and the store's own fields: the supervisor builds the specs from them
(and the root folder of stores without a mount path, the mount's alone),
and so does a session's follower for the stores attached later (the daemon
follower gets them as JSON on its stdin).

`StoreSpec` is everything one store process needs. It travels inside a
`StoreLaunch`, one line of JSON on the process's stdin, so the token never
shows in argv or the environment (`ps`, `/proc/<pid>/environ`); the spec is
a flat object of its fields, the deletions mode as its word (`enabled`).
The launch line also names the file a daemon's store process logs to.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Self

from ..api import AuthHeader, Deletions

DEFAULT_ROOT = "/mnt/memory"
"""Where stores without a mount path go."""
DEFAULT_SYNC_INTERVAL = 15.0
MIN_SYNC_INTERVAL = 5.0
"""Seconds between two periodic passes: the default and the least."""
DEFAULT_FINAL_SYNC_TIMEOUT = 30.0
"""Seconds the final sync on stop may take (any number more than 0)."""
DEFAULT_SYNC_CONCURRENCY = 16
MAX_SYNC_CONCURRENCY = 32
"""Requests at once in a pass: the default and the most (at least 1)."""
DEFAULT_START_TIMEOUT = 30.0
"""Seconds a mount's start waits in all for the API's first answer (any number more than 0)."""
DEFAULT_CACHE_SIZE = 256 * 1024 * 1024
"""Bytes of clean contents a store's cache keeps before it evicts (at least 1)."""


@dataclass(frozen=True, kw_only=True)
class StoreSettings:
    """How every store of one mount is mounted and synced; a `StoreSpec` is
    these and the store's own."""

    cache_dir: str
    """The cache folder, absolute; each store's cache is a folder of it."""
    uid: int | None = None
    gid: int | None = None
    """The owner and group files show; None: the caller's."""
    allow_other: bool = False
    sync_interval: float = DEFAULT_SYNC_INTERVAL
    sync_deletions: Deletions = Deletions.ENABLED
    final_sync_timeout: float = DEFAULT_FINAL_SYNC_TIMEOUT
    sync_concurrency: int = DEFAULT_SYNC_CONCURRENCY
    start_timeout: float = DEFAULT_START_TIMEOUT
    write_behind: bool = True
    """Push local changes once the mount is quiet, between the passes."""
    cache_size: int = DEFAULT_CACHE_SIZE
    """Bytes of clean contents the store's cache keeps (`--cache-size`)."""

    def settings(self) -> dict[str, Any]:
        """These settings alone, by field (a spec's too), to make another
        object that has them."""
        return {f.name: getattr(self, f.name) for f in fields(StoreSettings)}

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        """The object `to_json` wrote; TypeError or ValueError when it is none."""
        mode = data.get("sync_deletions", Deletions.ENABLED)
        if not isinstance(mode, str):
            raise TypeError("the deletions mode is a word")
        return cls(**{**data, "sync_deletions": Deletions(mode)})


@dataclass(frozen=True)
class StoreSpec(StoreSettings):
    """Everything one store process needs: the mount's settings, and the
    store's own. `token` travels only on stdin; `auth` is the header it
    travels in to the API."""

    store_id: str
    mount_path: str
    api_url: str
    token: str = field(repr=False)
    runtime_dir: str
    credential_source: str = ""
    """Where the token came from (a flag's or a variable's name, never the
    token): a refusal of the token names it."""
    read_only: bool = False
    prefetch_concurrency: int = 4
    stores_mounted: int = 1
    """How many stores this one is mounted with (by one `memfs mount`, itself
    included): they share the machine, so each lists its store with fewer
    requests at once (`listing_concurrency`)."""
    follow_parent: bool = False
    """Stop (final sync, unmount) when stdin reaches its end: the foreground
    `memfs mount` holds the other end, so its death by any signal is seen at once."""
    name: str = ""
    auth: AuthHeader = "bearer"
    mount_root: str = DEFAULT_ROOT
    """The mount's root folder (`--root`): no folder memfs made for the mount
    path is removed at the end if it is this folder or one above it."""
    confined_to_root: bool = False
    """The mount path came from a session: its folders are created, and
    removed, from a descriptor of `mount_root` without following a symlink,
    so that they stay strictly under it."""


@dataclass
class StoreLaunch:
    """The first line a store process reads: its spec and the file its stderr
    goes to (a daemon's log; None: the supervisor's stderr)."""

    spec: StoreSpec
    log_file: str | None = None

    def to_json(self) -> str:
        return json.dumps({"spec": self.spec.to_json(), "log_file": self.log_file})

    @classmethod
    def from_json(cls, text: str) -> StoreLaunch:
        launch = json.loads(text)
        if not isinstance(launch, dict) or not isinstance(launch.get("spec"), dict):
            raise ValueError("a launch line is an object with a spec")
        log_file = launch.get("log_file")
        if log_file is not None and not isinstance(log_file, str):
            raise TypeError("the log file of a launch is a path")
        return cls(StoreSpec.from_json(launch["spec"]), log_file)
