"""The store process's end of its control socket (trio), mode 0600. A reply,
once made, is sent even while the server is being cancelled (for at most
`SEND_TIMEOUT`): a `stop` is answered as the store process begins to tear down.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import struct
from collections.abc import Awaitable, Callable

import trio

from .._exceptions import MountError
from .._private import check_entry_name, open_private_dir
from ._protocol import ErrorReply, Reply, Request, UnknownCommand, encode_reply, receive_line

Handler = Callable[[Request], Awaitable[Reply]]

SEND_TIMEOUT = 5.0
BACKLOG = 16


class ControlServer:
    """Answers requests on the socket at `path` with `handler`."""

    def __init__(self, path: str, handler: Handler) -> None:
        self.path = path
        self.handler = handler

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Bind the socket, report started, and answer until cancelled; the
        socket file goes with it. MountError when the socket cannot be made.
        Both go through a checked descriptor of the folder."""
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
