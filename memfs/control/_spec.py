"""What the supervisor tells a store process, and where they meet.

- `StoreSpec`: everything one store process needs; the token travels only on
  its stdin, never in argv or the environment.
- `runtime_dir()`: where store processes leave state files and control sockets.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field


@dataclass
class StoreSpec:
    """Everything one store process needs. `token` travels only on stdin;
    `auth` is the header it travels in to the API (`bearer` or `x-api-key`)."""

    store_id: str
    mount_path: str
    api_url: str
    token: str = field(repr=False)
    cache_dir: str
    runtime_dir: str
    read_only: bool = False
    uid: int | None = None
    gid: int | None = None
    allow_other: bool = False
    sync_interval: float = 15.0
    sync_deletions: str = "enabled"
    final_sync_timeout: float = 30.0
    prefetch_concurrency: int = 4
    sync_concurrency: int = 16
    follow_parent: bool = False
    """Stop (final sync, unmount) when stdin reaches its end: the foreground
    `memfs mount` holds the other end, so its death by any signal is seen at once."""
    name: str = ""
    auth: str = "bearer"

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> StoreSpec:
        return cls(**json.loads(text))


def runtime_dir() -> str:
    """Where store processes leave their control sockets and state files."""
    env = os.environ.get("MEMFS_RUNTIME_DIR")
    if env:
        return env
    if os.geteuid() == 0:
        return "/run/memfs"
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    return os.path.join(xdg, "memfs") if xdg else f"/tmp/memfs-{os.getuid()}"
