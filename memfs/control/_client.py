"""The CLI's end of a store process's control socket: blocking, as the
commands that use it run no event loop (the supervisor's trio program uses
the `_async` methods). A process that cannot be reached, or that gives no
whole reply, is a `SyncError` naming its mount path.
"""

from __future__ import annotations

import socket

from .._exceptions import SyncError
from ._protocol import (
    Command,
    ErrorReply,
    MetricsReply,
    PushFilesReply,
    PushReply,
    ReplyKind,
    Request,
    StatusReply,
    StopReply,
    SyncReply,
    decode_reply,
    receive_line,
)
from ._runtime import StoreState, socket_address

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
