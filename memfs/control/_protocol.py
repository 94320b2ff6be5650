"""The control protocol: what the CLI asks a store process and what it answers.

One request and one reply per connection, each one line of JSON::

    -> {"cmd": "status"}
    <- {"ok": true, "status": {...StoreStatus...}}
    -> {"cmd": "sync"}
    <- {"ok": true, "report": {...the pass report...}}
    -> {"cmd": "stop", "by": "memfs unmount"}
    <- {"ok": <nothing left to upload>, "not_uploaded": [paths]}
    -> {"cmd": "metrics"}
    <- {"ok": true, "metrics": {...raw counters and histograms...}}
    -> {"cmd": "push_files", "paths": ["/a/b.md", ...], "timeout": 30}
    <- {"ok": true, "files": [{...memfs.api.Confirmation...}, ...]}

`push_files` pushes the files at those memory paths now and answers, within
`timeout` seconds, one confirmation per path in the order asked (`memfs sync
FILE`). `push_now` (a followed session went idle) is answered at once:

    -> {"cmd": "push_now"}
    <- {"ok": true}

and `{"ok": false, "error": "<sentence>"}` when a command could not be
carried out (a sync pass that failed, a command this process does not know).
A request may name the command that asks (`by`, optional): the store process
logs a `stop` from `memfs unmount` with it and the asker's pid, so that a
mount ended from another shell says why.
`memfs status --json` prints `StoreStatus` as it came; `memfs sync --json`
prints each reply with the store's mount path and id before it. Those JSON
shapes are promised: fields are only ever added.
"""

from __future__ import annotations

import enum
import json
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Self, TypeVar

from ..api import Confirmation

if TYPE_CHECKING:
    import trio


def known_fields(cls: type[Any], data: object, refusal: str) -> dict[str, Any]:
    """The values `data`, a JSON object one memfs wrote, holds for the fields
    of `cls` (a dataclass): a field it lacks gets its default, and one `cls` lacks (of a newer
    memfs: fields are only ever added) is left out. ValueError(`refusal`) when
    `data` is no object."""
    if not isinstance(data, dict):
        raise ValueError(refusal)
    return {f.name: data[f.name] for f in fields(cls) if f.name in data}


async def receive_line(stream: trio.abc.ReceiveStream) -> bytes:
    """One request or reply: the bytes up to its newline, or what came before
    the other end closed."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = await stream.receive_some(65536)
        if not chunk:
            break
        data += chunk
    return data


class Command(enum.StrEnum):
    """What the CLI may ask a store process."""

    STATUS = "status"
    """What the store holds, what is pending, how its passes went."""
    SYNC = "sync"
    """Run a sync pass now; answered when it is done."""
    STOP = "stop"
    """The final sync, then unmount; answered once the final sync is done."""
    METRICS = "metrics"
    """Raw counters and histograms, for the metrics endpoint (see `supervisor._metrics`)."""
    PUSH_FILES = "push_files"
    """Push the named files now; answered with what the store made of each."""
    PUSH_NOW = "push_now"
    """Push the local changes now, without listing or pulling (a followed session
    went idle); answered at once, the push runs in the store process."""


_COMMANDS = frozenset(c.value for c in Command)


class UnknownCommand(ValueError):
    """A request whose command this memfs does not know; it is answered."""

    def __init__(self, value: object) -> None:
        super().__init__(f"unknown command {value!r}")


BY_MAX_CHARS = 100
MAX_PATHS = 10_000


@dataclass(frozen=True)
class Request:
    command: Command
    by: str | None = None
    """The command that asks (`memfs unmount`), when it says."""
    peer_pid: int | None = None
    """The asking process, as the store process's end of the socket sees it
    (SO_PEERCRED); never sent."""
    paths: tuple[str, ...] = ()
    """`push_files`: the memory paths of the files to push."""
    timeout: float | None = None
    """`push_files`: how long the store process may take to answer, in seconds."""

    def encode(self) -> bytes:
        message: dict[str, Any] = {"cmd": self.command.value}
        if self.by is not None:
            message["by"] = self.by
        if self.command is Command.PUSH_FILES:
            message["paths"] = list(self.paths)
            message["timeout"] = self.timeout
        return _line(message)

    @classmethod
    def decode(cls, data: bytes) -> Request:
        """The request in `data` (empty data asks for nothing). Raises
        UnknownCommand for a command this memfs does not know, and ValueError
        for bytes that are no request at all."""
        message = json.loads(data or b"{}")
        if not isinstance(message, dict):
            raise ValueError("a request is a JSON object")
        value = message.get("cmd")
        if not isinstance(value, str) or value not in _COMMANDS:
            raise UnknownCommand(value)
        by = message.get("by")
        if not isinstance(by, str) or not by.isprintable() or len(by) > BY_MAX_CHARS:
            by = None  # an asker's name is only ever logged: one unfit for a log line is dropped
        command = Command(value)
        if command is not Command.PUSH_FILES:
            return cls(command, by)
        paths, timeout = message.get("paths"), message.get("timeout")
        if (
            not isinstance(paths, list)
            or len(paths) > MAX_PATHS
            or not all(isinstance(p, str) and p.startswith("/") for p in paths)
        ):
            raise ValueError("push_files names its files as a list of memory paths")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise ValueError("push_files gives its timeout in seconds")
        return cls(command, by, paths=tuple(paths), timeout=float(timeout))


@dataclass(frozen=True)
class StoreStatus:
    """One store process's answer to `status`, field for field what
    `memfs status --json` prints."""

    store_id: str
    name: str
    mount_path: str
    read_only: bool
    pid: int
    files: int
    """Files in the tree."""
    cached: int
    """Files whose content is on local disk."""
    prefetched: bool
    """The background prefetch has finished."""
    pending: list[str]
    """Paths whose local state the store does not hold yet."""
    refused: dict[str, str]
    """Files the store refused or memfs holds back: path -> reason."""
    sync_mode: str
    """How remote changes are followed: `feed` or `listing`."""
    store_full: bool
    sync_mode_reason: str | None
    passes: int
    last_pass: dict[str, Any] | None
    """The last pass's report, as `sync` answers it."""
    last_error: str | None
    requests: int
    """HTTP requests sent to the store since the mount."""
    fuse_requests: dict[str, int]
    """Kernel requests answered, by operation."""
    access: str = "read_write"
    """`read_write` or `read_only`, as the session attached the store."""
    memories: int = 0
    """Files that hold a memory of the store (new local files not yet uploaded aside)."""
    cached_bytes: int = 0
    dirty: int = 0
    """Files with changes not yet in the store, but for those whose content the
    store refused (they are counted under `refused`)."""
    pending_deletes: int = 0
    conflict_copies: list[str] = field(default_factory=list)
    """Every conflict copy kept in this store's cache folder."""
    next_pass_at: float | None = None
    """When the next periodic pass runs (Unix time)."""
    bytes_up: int = 0
    bytes_down: int = 0
    """Request and answer bodies exchanged with the store since the mount."""
    not_shown: dict[str, str] = field(default_factory=dict)
    """Memories of the store this folder cannot show (a name over 255 bytes, the
    marker's path), left as they are in the store: path -> reason."""
    cache_damage: str | None = None
    """Why changes the cache held were lost when this mount opened it (its
    journal was damaged), as opening it said; None when nothing was lost."""
    lost_changes: list[str] = field(default_factory=list)
    """The files whose changes were lost with it (those the journal names)."""
    cache_disk_full: str | None = None
    """Why changes to the files are refused (ENOSPC): the cache's disk is full;
    None when it has room. Reads and uploads go on meanwhile."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: object) -> StoreStatus:
        return cls(**known_fields(cls, data, "a status is a JSON object"))


@dataclass(frozen=True)
class StatusReply:
    status: StoreStatus
    ok = True

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, "status": self.status.to_json()}

    @classmethod
    def from_json(cls, message: dict[str, Any]) -> StatusReply:
        return cls(StoreStatus.from_json(message["status"]))


@dataclass(frozen=True)
class _ObjectReply:
    """A command carried out, its answer one JSON object under the name of
    the reply's one field (`report`, `metrics`)."""

    ok = True

    def to_json(self) -> dict[str, Any]:
        (name,) = (f.name for f in fields(self))
        return {"ok": True, name: getattr(self, name)}

    @classmethod
    def from_json(cls, message: dict[str, Any]) -> Self:
        (name,) = (f.name for f in fields(cls))
        return cls(**{name: dict(message[name])})


@dataclass(frozen=True)
class SyncReply(_ObjectReply):
    report: dict[str, Any]
    """The pass's report (the sync layer's `PassReport.as_dict()`)."""


@dataclass(frozen=True)
class StopReply:
    not_uploaded: list[str]
    """What the final sync could not upload: kept in the cache for the next mount."""
    sync_error: str | None = None
    """Why the final sync's pass failed or did not finish (what the store
    process logged), None when it ran; with nothing left, nothing was lost."""

    @property
    def ok(self) -> bool:
        return not self.not_uploaded

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ok": self.ok, "not_uploaded": self.not_uploaded}
        if self.sync_error is not None:
            out["sync_error"] = self.sync_error
        return out

    @classmethod
    def from_json(cls, message: dict[str, Any]) -> StopReply:
        error = message.get("sync_error")
        return cls(
            [str(path) for path in message["not_uploaded"]],
            None if error is None else str(error),
        )


@dataclass(frozen=True)
class MetricsReply(_ObjectReply):
    metrics: dict[str, Any]
    """What `MountedStore.metrics` gathers: counters, gauges and raw histograms."""


@dataclass(frozen=True)
class PushFilesReply:
    files: list[Confirmation]
    ok = True

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, "files": [asdict(f) for f in self.files]}

    @classmethod
    def from_json(cls, message: dict[str, Any]) -> PushFilesReply:
        refusal = "a file's confirmation is a JSON object"
        return cls(
            [Confirmation(**known_fields(Confirmation, f, refusal)) for f in message["files"]]
        )


@dataclass(frozen=True)
class PushReply:
    """`push_now` taken: the push has started, or waits for the pass that runs."""

    ok = True

    def to_json(self) -> dict[str, Any]:
        return {"ok": True}

    @classmethod
    def from_json(cls, message: dict[str, Any]) -> PushReply:
        return cls()


@dataclass(frozen=True)
class ErrorReply:
    """A command that could not be carried out; also what the CLI reports for
    a process it could not reach (`memfs status`, `memfs sync`)."""

    error: str
    ok = False

    def to_json(self) -> dict[str, Any]:
        return {"ok": False, "error": self.error}


Reply = StatusReply | SyncReply | StopReply | MetricsReply | PushFilesReply | PushReply | ErrorReply

ReplyKind = TypeVar(
    "ReplyKind", StatusReply, SyncReply, StopReply, MetricsReply, PushFilesReply, PushReply
)
"""The reply a command gets when it is carried out."""


def encode_reply(reply: Reply) -> bytes:
    return _line(reply.to_json())


def decode_reply(data: bytes, kind: type[ReplyKind]) -> ReplyKind | ErrorReply:
    """The reply in `data`: `kind`, or an ErrorReply; ValueError when it is neither."""
    message = json.loads(data)
    if not isinstance(message, dict):
        raise ValueError("a reply is a JSON object")
    try:
        if not message["ok"] and "error" in message:
            return ErrorReply(str(message["error"]))
        return kind.from_json(message)
    except (KeyError, TypeError) as e:
        raise ValueError(f"not a {kind.__name__}: {e}") from None


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"
