"""What the supervisor tells a store process.

`StoreSpec` is everything one store process needs. It travels as one line of
JSON on the process's stdin, so the token never shows in argv or the
environment (`ps`, `/proc/<pid>/environ`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from ..api import AuthHeader


@dataclass
class StoreSpec:
    """Everything one store process needs. `token` travels only on stdin;
    `auth` is the header it travels in to the API."""

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
    auth: AuthHeader = "bearer"

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> StoreSpec:
        return cls(**json.loads(text))
