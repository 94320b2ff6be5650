"""What a followed session is (`SessionToFollow`: the session handed to a
follower, with the stores mounted at the start) and what its follower saw:
the session's file in the runtime folder (`SessionRecord`: pid, checks,
events, mounts), which `memfs status` prints and `memfs unmount` reads.

A session's file is `session-<session id>-<key>.session` (the key a hash of
the cache folder), 0600, rewritten whole; it goes when its follower ends.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from .._private import ensure_private_dir
from ..api import Resource
from ..control import StoreSettings, known_fields, process_alive, runtime_dir
from ._credentials import Credentials

DEFAULT_SESSION_CHECK_INTERVAL = 60.0
"""Seconds between two reads of a followed session: at most one a minute."""
MIN_SESSION_CHECK_INTERVAL = 0.5
MAX_EVENTS = 200
"""Events a session's file keeps (the oldest go first)."""
FOLLOWER_MODULE = "memfs.supervisor._followd"
"""The daemon follower's program, which the package does not import."""


@dataclass(frozen=True)
class FollowedStore:
    """A store the follower holds mounted: which, where, how."""

    resource: Resource
    store_id: str
    mount_path: str
    read_only: bool


@dataclass
class SessionToFollow:
    """A session whose stores are mounted, and what a follower needs to mount
    more: the credentials, the settings every spec is built with, the folder
    of stores without a mount path, the stores mounted at the start, and the
    seconds between two reads (`--session-check-interval`)."""

    session_id: str
    creds: Credentials = field(repr=False)
    settings: StoreSettings
    root: str
    mounted: list[FollowedStore] = field(default_factory=list)
    interval: float = DEFAULT_SESSION_CHECK_INTERVAL

    def to_json(self) -> dict[str, Any]:
        """For the daemon follower's stdin only: it holds the token."""
        return {
            "session_id": self.session_id,
            "creds": asdict(self.creds),
            "spec_settings": {**self.settings.to_json(), "root": self.root},
            "mounted": [asdict(m) for m in self.mounted],
            "interval": self.interval,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SessionToFollow:
        settings = dict(d["spec_settings"])
        root = settings.pop("root")
        return cls(
            session_id=d["session_id"],
            creds=Credentials(**d["creds"]),
            settings=StoreSettings.from_json(settings),
            root=root,
            mounted=[
                FollowedStore(**{**m, "resource": Resource(**m["resource"])}) for m in d["mounted"]
            ],
            interval=float(d["interval"]),
        )


def session_file(runtime_dir: str, session_id: str, cache_dir: str) -> str:
    key = hashlib.sha256(os.fsencode(os.path.realpath(cache_dir))).hexdigest()[:12]
    return os.path.join(runtime_dir, f"session-{session_id}-{key}.session")


@dataclass
class SessionEvent:
    """A store `attached` to the session, `detached` from it, or `not_mounted`
    (it could not be), while followed."""

    at: float
    event: str
    store_id: str
    mount_path: str
    access: str
    detail: str | None = None
    """What came of it: the final sync of a detached store, why one was not mounted."""
    not_uploaded: list[str] = field(default_factory=list)
    """Files the final sync of a detached store left in the cache."""


@dataclass
class SessionRecord:
    """What a session's file says: `memfs status` prints it."""

    session_id: str
    pid: int
    daemon: bool
    started_at: float
    checked_at: float | None = None
    next_check_at: float | None = None
    last_error: str | None = None
    events: list[SessionEvent] = field(default_factory=list)
    mount_paths: list[str] | None = None
    """The paths of the stores the follower holds mounted, or is mounting
    (None in a file an older memfs wrote: unknown)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: object) -> SessionRecord:
        values = known_fields(cls, data, "a session file holds a JSON object")
        values["events"] = [SessionEvent(**e) for e in values.get("events", [])]
        return cls(**values)

    def write(self, path: str) -> None:
        """Rewrite the session's file whole (a temporary file renamed over
        it), in the runtime folder checked as memfs's own."""
        ensure_private_dir(os.path.dirname(path), "runtime folder")
        tmp = path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(self.to_json()))
        os.replace(tmp, path)


def session_files(folder: str | None = None) -> list[tuple[str, SessionRecord]]:
    """Each session file of the runtime folder whose follower is alive, and its record."""
    folder = runtime_dir() if folder is None else folder
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    found = []
    for name in names:
        if not name.endswith(".session"):
            continue
        path = os.path.join(folder, name)
        try:
            with open(path, "rb") as f:
                record = SessionRecord.from_json(json.loads(f.read()))
        except (OSError, ValueError, TypeError):
            continue
        if process_alive(record.pid):
            found.append((path, record))
    return found


def session_records(folder: str | None = None) -> list[SessionRecord]:
    """Every followed session of this machine whose follower is alive, by
    the files in the runtime folder (default `runtime_dir()`)."""
    return [record for _, record in session_files(folder)]
