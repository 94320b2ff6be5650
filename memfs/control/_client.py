"""The CLI's end of a store process's control socket.

Blocking, on purpose: `memfs unmount`, `memfs sync` and `memfs status` run no
event loop and should start fast. A process that cannot be reached, or that
closes the connection without a whole reply (it failed, or it was killed),
is a `SyncError` naming its mount path.
"""

from __future__ import annotations

import socket

from .._exceptions import SyncError
from ._protocol import (
    Command,
    ErrorReply,
    MetricsReply,
    PushReply,
    Reply,
    ReplyKind,
    Request,
    StatusReply,
    StopReply,
    SyncReply,
    decode_reply,
)
from ._runtime import StoreState, socket_address

STATUS_TIMEOUT = 10.0
SYNC_TIMEOUT = 600.0
STOP_TIMEOUT = 600.0


class ControlClient:
    """Asks one running store process, through the socket its state file names."""

    def __init__(self, store: StoreState) -> None:
        self.store = store

    def status(self, *, timeout: float = STATUS_TIMEOUT) -> StatusReply | ErrorReply:
        return self._exchange(Command.STATUS, StatusReply, timeout)

    def sync(self, *, timeout: float = SYNC_TIMEOUT) -> SyncReply | ErrorReply:
        """Run a pass now; answered when it is done."""
        return self._exchange(Command.SYNC, SyncReply, timeout)

    def stop(
        self, *, timeout: float = STOP_TIMEOUT, by: str | None = None
    ) -> StopReply | ErrorReply:
        """The final sync; answered when it is done, before the process
        unmounts and exits (wait for its pid to see it gone). `by`, the
        command that asks, goes into the store process's log."""
        return self._exchange(Command.STOP, StopReply, timeout, by=by)

    def metrics(self, *, timeout: float = STATUS_TIMEOUT) -> MetricsReply | ErrorReply:
        return self._exchange(Command.METRICS, MetricsReply, timeout)

    def push_now(self, *, timeout: float = STATUS_TIMEOUT) -> PushReply | ErrorReply:
        """Push the local changes now; answered once the push is under way."""
        return self._exchange(Command.PUSH_NOW, PushReply, timeout)

    def ask(self, command: Command, *, timeout: float) -> Reply:
        """Any command, for callers that hold one as a value."""
        match command:
            case Command.STATUS:
                return self.status(timeout=timeout)
            case Command.SYNC:
                return self.sync(timeout=timeout)
            case Command.STOP:
                return self.stop(timeout=timeout)
            case Command.METRICS:
                return self.metrics(timeout=timeout)
            case Command.PUSH_NOW:
                return self.push_now(timeout=timeout)

    def _exchange(
        self, command: Command, kind: type[ReplyKind], timeout: float, *, by: str | None = None
    ) -> ReplyKind | ErrorReply:
        where = self.store.mount_path
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(timeout)
                with socket_address(self.store.socket) as address:
                    s.connect(address)
                s.sendall(Request(command, by).encode())
                data = _receive_line(s)
        except OSError as e:
            raise SyncError(f"cannot reach the memfs process of {where}: {e.strerror or e}")
        try:
            return decode_reply(data, kind)
        except ValueError:
            raise SyncError(f"the memfs process of {where} gave no answer")


def _receive_line(s: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    return data
