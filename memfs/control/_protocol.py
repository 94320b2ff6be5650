"""The control protocol: what the CLI asks a store process and what it
answers, and both ends of it. One request and one reply per connection,
each one line of JSON::

    -> {"cmd": "status"}
    <- {"ok": true, "status": {...StoreStatus...}}
    -> {"cmd": "sync"}
    <- {"ok": true, "report": {...the pass report...}}
    -> {"cmd": "stop", "by": "memfs unmount"}
    <- {"ok": <nothing left to upload>, "not_uploaded": [paths], "sync_error"?: "..."}
    -> {"cmd": "metrics"}
    <- {"ok": true, "metrics": {...raw counters and histograms...}}
    -> {"cmd": "push_files", "paths": ["/a/b.md", ...], "timeout": 30}
    <- {"ok": true, "files": [{...memfs.api.Confirmation...}, ...]}
    -> {"cmd": "push_now"}       (push local changes, no listing nor pull)
    <- {"ok": true}              (at once)

and `{"ok": false, "error": "<sentence>"}` when a command could not be
carried out. `by`, optional, names the asking command for the store
process's log. `memfs status --json` and `memfs sync --json` print these
shapes: fields are only ever added. The CLI's end is blocking, as the
commands that use it run no event loop (the supervisor's trio program uses
the `_async` methods); a process that cannot be reached, or that gives no
whole reply, is a `SyncError` naming its mount path.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import json
import os
import socket
import struct
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar

from .._exceptions import MountError, SyncError
from .._private import check_entry_name, open_private_dir
from ..api import Confirmation
from ._runtime import StoreState, socket_address

if TYPE_CHECKING:
    import trio


def known_fields(cls: type[Any], data: object, refusal: str) -> dict[str, Any]:
    """The values the JSON object `data` holds for the fields of the dataclass
    `cls` (missing ones get their default, a newer memfs's extra ones are
    left out); ValueError(`refusal`) when `data` is no object."""
    if not isinstance(data, dict):
        raise ValueError(refusal)
    return {f.name: data[f.name] for f in fields(cls) if f.name in data}


async def receive_line(stream: trio.abc.ReceiveStream) -> bytes:
    """The bytes up to a newline, or what came before the other end closed."""
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
    SYNC = "sync"
    STOP = "stop"
    METRICS = "metrics"
    PUSH_FILES = "push_files"
    PUSH_NOW = "push_now"


_COMMANDS = frozenset(c.value for c in Command)


class UnknownCommand(ValueError):
    """A request whose command this memfs does not know; it is answered."""


BY_MAX_CHARS = 100
MAX_PATHS = 10_000


@dataclass(frozen=True)
class Request:
    command: Command
    by: str | None = None
    peer_pid: int | None = None
    """The asking process, as the store process's end sees it; never sent."""
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
        """UnknownCommand for a missing command (empty bytes too) or one this memfs
        does not know; ValueError for bytes that are not a JSON object."""
        message = json.loads(data or b"{}")
        if not isinstance(message, dict):
            raise ValueError("a request is a JSON object")
        value = message.get("cmd")
        if not isinstance(value, str) or value not in _COMMANDS:
            raise UnknownCommand(f"unknown command {value!r}")
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
    """A store process's answer to `status`, as `memfs status --json` prints it."""

    store_id: str
    name: str
    mount_path: str
    read_only: bool
    pid: int
    files: int
    cached: int
    """Files whose content is on local disk."""
    prefetched: bool
    pending: list[str]
    """Paths whose local state the store does not hold yet."""
    refused: dict[str, str]
    """Files and deletes refused or held back, store changes awaiting a copy: path -> reason."""
    sync_mode: str
    """`feed` or `listing`."""
    store_full: bool
    sync_mode_reason: str | None
    passes: int
    last_pass: dict[str, Any] | None
    """The last pass's report, as `sync` answers it."""
    last_error: str | None
    requests: int
    fuse_requests: dict[str, int]
    access: str = "read_write"
    memories: int = 0
    """Files that hold a memory of the store (new local files aside)."""
    cached_bytes: int = 0
    dirty: int = 0
    """Files with changes not yet in the store, but for those whose content the
    store refused (they are counted under `refused`)."""
    pending_deletes: int = 0
    conflict_copies: list[str] = field(default_factory=list)
    next_pass_at: float | None = None
    """Unix time."""
    bytes_up: int = 0
    bytes_down: int = 0
    not_shown: dict[str, str] = field(default_factory=dict)
    """Memories this folder cannot show, left as they are: path -> reason."""
    cache_damage: str | None = None
    """Always None, as `lost_changes` is always empty: the cache has no damage
    to name (a kill loses nothing); kept in the answer for the scripts that read them."""
    lost_changes: list[str] = field(default_factory=list)
    cache_disk_full: str | None = None
    """Why changes are refused (ENOSPC); None when the cache's disk has room."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: object) -> StoreStatus:
        return cls(**known_fields(cls, data, "a status is a JSON object"))


@dataclass(frozen=True)
class _Reply:
    """A command carried out: `{"ok": true, <its fields>}`."""

    ok: ClassVar[bool] = True

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, **asdict(self)}

    @classmethod
    def from_json(cls, message: dict[str, Any]) -> Self:
        return cls(**{f.name: message[f.name] for f in fields(cls)})


@dataclass(frozen=True)
class StatusReply(_Reply):
    status: StoreStatus

    @classmethod
    def from_json(cls, message: dict[str, Any]) -> StatusReply:
        return cls(StoreStatus.from_json(message["status"]))


@dataclass(frozen=True)
class SyncReply(_Reply):
    report: dict[str, Any]
    """The pass's report (the sync layer's `PassReport.as_dict()`)."""


@dataclass(frozen=True)
class StopReply:
    not_uploaded: list[str]
    """What the final sync could not upload: kept in the cache for the next mount."""
    sync_error: str | None = None
    """Why the final sync's pass failed or did not finish, None when it ran."""

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
        return cls([str(p) for p in message["not_uploaded"]], None if error is None else str(error))


@dataclass(frozen=True)
class MetricsReply(_Reply):
    metrics: dict[str, Any]
    """What `MountedStore.metrics` gathers: counters, gauges and raw histograms."""


@dataclass(frozen=True)
class PushFilesReply(_Reply):
    files: list[Confirmation]

    @classmethod
    def from_json(cls, message: dict[str, Any]) -> PushFilesReply:
        refusal = "a file's confirmation is a JSON object"
        return cls(
            [Confirmation(**known_fields(Confirmation, f, refusal)) for f in message["files"]]
        )


@dataclass(frozen=True)
class PushReply(_Reply):
    """`push_now` taken: the push has started, or waits for the pass that runs."""


@dataclass(frozen=True)
class ErrorReply(_Reply):
    """A command that could not be carried out; also what the CLI reports for
    a process it could not reach."""

    error: str
    ok: ClassVar[bool] = False


Reply = StatusReply | SyncReply | StopReply | MetricsReply | PushFilesReply | PushReply | ErrorReply

ReplyKind = TypeVar(
    "ReplyKind", StatusReply, SyncReply, StopReply, MetricsReply, PushFilesReply, PushReply
)


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


STATUS_TIMEOUT = 10.0
SYNC_TIMEOUT = 600.0
STOP_TIMEOUT = 600.0
PUSH_FILES_MARGIN = 15.0
"""How much longer than its own timeout `push_files` waits for the answer."""


class ControlClient:
    """Asks one running store process, through the socket its state file names."""

    def __init__(self, store: StoreState) -> None:
        self.store = store

    def status(self, *, timeout: float = STATUS_TIMEOUT) -> StatusReply | ErrorReply:
        return self._send(Request(Command.STATUS), StatusReply, timeout)

    def sync(self, *, timeout: float = SYNC_TIMEOUT) -> SyncReply | ErrorReply:
        """Run a pass now; answered when it is done."""
        return self._send(Request(Command.SYNC), SyncReply, timeout)

    def stop(
        self, *, timeout: float = STOP_TIMEOUT, by: str | None = None
    ) -> StopReply | ErrorReply:
        """The final sync; answered when it is done, before the process
        unmounts and exits. `by`, the asking command, goes into its log."""
        return self._send(Request(Command.STOP, by), StopReply, timeout)

    def metrics(self, *, timeout: float = STATUS_TIMEOUT) -> MetricsReply | ErrorReply:
        return self._send(Request(Command.METRICS), MetricsReply, timeout)

    def push_files(self, paths: list[str], *, timeout: float) -> PushFilesReply | ErrorReply:
        """Push the files at these memory paths now; the store process answers
        within `timeout` seconds, this end waits a little longer for it."""
        request = Request(Command.PUSH_FILES, paths=tuple(paths), timeout=timeout)
        return self._send(request, PushFilesReply, timeout + PUSH_FILES_MARGIN)

    async def stop_async(self, *, timeout: float = STOP_TIMEOUT) -> StopReply | ErrorReply:
        return await self._send_async(Command.STOP, StopReply, timeout)

    async def push_now_async(self, *, timeout: float = STATUS_TIMEOUT) -> PushReply | ErrorReply:
        return await self._send_async(Command.PUSH_NOW, PushReply, timeout)

    def _send(
        self, request: Request, kind: type[ReplyKind], timeout: float
    ) -> ReplyKind | ErrorReply:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(timeout)
                with socket_address(self.store.socket) as address:
                    s.connect(address)
                s.sendall(request.encode())
                with s.makefile("rb") as replies:
                    data = replies.readline()
        except OSError as e:
            raise self._unreachable(e)
        return self._decode(data, kind)

    async def _send_async(
        self, command: Command, kind: type[ReplyKind], timeout: float
    ) -> ReplyKind | ErrorReply:
        """`_send` on trio's sockets; trio is loaded only here."""
        import trio

        try:
            with trio.fail_after(timeout), trio.socket.socket(socket.AF_UNIX) as s:
                with socket_address(self.store.socket) as address:
                    await s.connect(address)
                stream = trio.SocketStream(s)
                await stream.send_all(Request(command).encode())
                data = await receive_line(stream)
        except trio.TooSlowError:
            raise SyncError(f"cannot reach the memfs process of {self.store.mount_path}: timed out")
        except OSError as e:
            raise self._unreachable(e)
        return self._decode(data, kind)

    def _unreachable(self, e: OSError) -> SyncError:
        where = self.store.mount_path
        return SyncError(f"cannot reach the memfs process of {where}: {e.strerror or e}")

    def _decode(self, data: bytes, kind: type[ReplyKind]) -> ReplyKind | ErrorReply:
        try:
            return decode_reply(data, kind)
        except ValueError:
            raise SyncError(f"the memfs process of {self.store.mount_path} gave no answer")


Handler = Callable[[Request], Awaitable[Reply]]

SEND_TIMEOUT = 5.0
BACKLOG = 16


class ControlServer:
    """The store process's end of its control socket, mode 0600: answers requests on the
    socket at `path` with `handler`. A reply, once made, is sent even while the server is
    being cancelled (for at most `SEND_TIMEOUT`): a `stop` is answered as the store process
    begins to tear down."""

    def __init__(self, path: str, handler: Handler) -> None:
        self.path = path
        self.handler = handler

    async def serve(self, *, task_status: trio.TaskStatus[None]) -> None:
        """Bind the socket, report started (`nursery.start`), and answer until
        cancelled; the socket file goes with it. MountError when the socket cannot be
        bound, ConfigError when the runtime folder is not memfs's own; through its checked fd."""
        import trio

        folder, name = os.path.split(self.path)
        folder_fd = open_private_dir(folder, "runtime folder")
        sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
        try:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=folder_fd)  # left by a killed process of this store
            try:
                await sock.bind(f"/proc/self/fd/{folder_fd}/{check_entry_name(name)}")
                os.chmod(name, 0o600, dir_fd=folder_fd)
                sock.listen(BACKLOG)
            except OSError as e:
                raise MountError(f"cannot open the control socket {self.path}: {e.strerror or e}")
            task_status.started()
            await trio.serve_listeners(self._answer, [trio.SocketListener(sock)])
        finally:
            sock.close()
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=folder_fd)
            os.close(folder_fd)

    async def _answer(self, stream: trio.SocketStream) -> None:
        import trio

        async with stream:
            try:
                request = Request.decode(await receive_line(stream))
            except UnknownCommand as e:
                reply: Reply = ErrorReply(str(e))
            except (ValueError, trio.BrokenResourceError):
                return
            else:
                request = dataclasses.replace(request, peer_pid=_peer_pid(stream.socket))
                reply = await self.handler(request)
            with trio.move_on_after(SEND_TIMEOUT, shield=True):
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    await stream.send_all(encode_reply(reply))


def _peer_pid(sock: trio.socket.SocketType) -> int | None:
    """The pid at the other end (SO_PEERCRED); None when the kernel cannot say."""
    try:
        data = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    pid, _uid, _gid = struct.unpack("3i", data)
    return pid or None
