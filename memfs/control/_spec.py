"""What the supervisor tells a store process.

`StoreSpec` is everything one store process needs. It travels inside a
`StoreLaunch`, one line of JSON on the process's stdin, so the token never
shows in argv or the environment (`ps`, `/proc/<pid>/environ`). The launch
line also carries what a process started before its spec existed
(memfs._startup) could not be given at its start: the environment the
supervisor settled for it, and its log file.
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


@dataclass
class StoreLaunch:
    """The first line a store process reads: its spec, the variables to add to
    its environment, and the file its stderr goes to (a daemon's log; None:
    the supervisor's stderr)."""

    spec: StoreSpec
    env: dict[str, str] = field(default_factory=dict)
    log_file: str | None = None

    def to_json(self) -> str:
        return json.dumps({"spec": asdict(self.spec), "env": self.env, "log_file": self.log_file})

    @classmethod
    def from_json(cls, text: str) -> StoreLaunch:
        launch = json.loads(text)
        if not isinstance(launch, dict) or not isinstance(launch.get("spec"), dict):
            raise ValueError("a launch line is an object with a spec")
        env = launch.get("env") or {}
        if not isinstance(env, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env.items()
        ):
            raise TypeError("the environment of a launch holds strings only")
        log_file = launch.get("log_file")
        if log_file is not None and not isinstance(log_file, str):
            raise TypeError("the log file of a launch is a path")
        return cls(StoreSpec(**launch["spec"]), dict(env), log_file)
