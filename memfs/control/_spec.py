"""What the supervisor tells a store process, and the settings every store of
one mount shares with their defaults and bounds. A `StoreSpec` travels in a
`StoreLaunch`, one line of JSON on the store process's stdin, so the token
never shows in argv or the environment."""

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
DEFAULT_CACHE_MEMORY = 8 * 1024 * 1024
"""Bytes of whole contents a store's cache keeps in memory (at least 1)."""


@dataclass(frozen=True, kw_only=True)
class StoreSettings:
    """How every store of one mount is mounted and synced."""

    cache_dir: str
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
    cache_size: int = DEFAULT_CACHE_SIZE
    cache_memory: int = DEFAULT_CACHE_MEMORY

    def settings(self) -> dict[str, Any]:
        """These settings alone, by field (a spec's too)."""
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
    """Everything one store process needs: the mount's settings and the store's own."""

    store_id: str
    mount_path: str
    api_url: str
    token: str = field(repr=False)
    runtime_dir: str
    credential_source: str = ""
    """Where the token came from (a flag's or a variable's name), for refusals."""
    read_only: bool = False
    prefetch_concurrency: int = 4
    stores_mounted: int = 1
    """How many stores one `memfs mount` mounts: each lists with fewer requests at once."""
    follow_parent: bool = False
    """Stop when stdin reaches its end: the foreground `memfs mount` died."""
    name: str = ""
    auth: AuthHeader = "bearer"
    mount_root: str = DEFAULT_ROOT
    """`--root`: no folder at or above it is removed at the end."""
    confined_to_root: bool = False
    """The mount path came from a session: its folders are made and removed
    from a descriptor of `mount_root`, never through a symlink."""


@dataclass
class StoreLaunch:
    """The first line a store process reads: its spec and its log file (None:
    the supervisor's stderr)."""

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
