"""HTTP/1.1 for `memfs serve`: Hypercorn's own connection handler
(`hypercorn.trio.tcp_server.TCPServer`) under memfs's accept loop, so that
no client, with or without credentials, can hold the server's descriptors or
memory.

Hypercorn gives, as a client sees it: keep-alive, pipelining,
`Connection: close` and HTTP/1.0; an idle connection closed after 5 s
without a request (and one whose request head is not whole by then);
`Expect: 100-continue`; HEAD answers without a body; a bare answer with
`connection: close` for a request it cannot parse (400; 431 for a head still
incomplete past 16 KiB), which never reaches the app; a bare 500 for an app
that fails before answering; the `date` header; `--access-log`'s line; and
on shutdown, idle connections closed and requests in flight given the
graceful timeout. Not served: HTTP/2 and WebSockets (no client of the
Memory Store API uses them) and Hypercorn's `server` header.

What this module adds:

- at most `max_connections` open at once: one more is answered a bare 503
  (`retry-after: 1`, `connection: close`) and closed;
- a client that stops reading its answer, or stops sending a request body
  it began, for `client_timeout` seconds is dropped (its connection closed);
- a request whose body the app did not read (refused at its size, or for
  its credentials): its answer says `connection: close` (Hypercorn closes
  such a connection, and a client must not send its next request on it),
  and once it is sent what the client still sends is read and dropped for
  up to `linger_timeout` seconds, so that it gets the answer rather than a
  reset.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import cast
from wsgiref.handlers import format_date_time

import trio
from hypercorn.app_wrappers import ASGIWrapper
from hypercorn.config import Config
from hypercorn.trio.tcp_server import TCPServer
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import ASGIFramework
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("memfs.serve")

MAX_RECV = 65536
BACKLOG = 100
MAX_REFUSING = 32
"""Connections past the cap that are being answered 503 at once; more are closed bare."""
_SOCKET_GONE = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)


def _refusal() -> bytes:
    date = format_date_time(time.time()).encode("ascii")
    return (
        b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nretry-after: 1\r\n"
        b"connection: close\r\ndate: " + date + b"\r\n\r\n"
    )


class _Connection(trio.abc.HalfCloseableStream):
    """A client's socket as Hypercorn sees it: a send that the client does
    not take within `client_timeout` drops the connection, and closing it
    lingers when the app left a request body unread."""

    def __init__(self, stream: trio.SocketStream, server: HTTPServer) -> None:
        self.stream = stream
        self.socket = stream.socket  # Hypercorn reads the addresses off it.
        self.server = server
        self.body_left_unread = False

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        with trio.move_on_after(self.server.client_timeout):
            await self.stream.send_all(data)
            return
        await self.drop()
        raise trio.BrokenResourceError("the client did not take its answer")

    async def wait_send_all_might_not_block(self) -> None:
        await self.stream.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.stream.receive_some(max_bytes)

    async def send_eof(self) -> None:
        await self.stream.send_eof()

    async def drop(self) -> None:
        """Close at once: whatever the client sends or waits for is lost."""
        self.body_left_unread = False
        await self.stream.aclose()

    async def aclose(self) -> None:
        with trio.CancelScope(shield=True):
            if self.body_left_unread:
                self.body_left_unread = False
                try:
                    await self.stream.send_eof()
                    with trio.move_on_after(self.server.linger_timeout):
                        while await self.stream.receive_some(MAX_RECV):
                            pass
                except (*_SOCKET_GONE, trio.BusyResourceError):
                    pass
            await self.stream.aclose()


_current: ContextVar[_Connection] = ContextVar("memfs_serve_connection")
"""The connection whose request the app is running: Hypercorn spawns the
app's task from the connection's, which set it."""


class _BoundedBodies:
    """The ASGI app, its request bodies bounded in time: each wait for more
    of a body lasts at most `client_timeout`, after which the connection is
    dropped and the app told the client left. An app that fails is logged
    here, as `memfs serve` logs its own errors (Hypercorn then answers a
    bare 500 if the app had not answered)."""

    def __init__(self, app: ASGIApp, client_timeout: float) -> None:
        self.app = app
        self.client_timeout = client_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        connection = _current.get(None)
        if scope["type"] != "http" or connection is None:
            await self.app(scope, receive, send)
            return
        pending = _has_body(scope)

        async def bounded_receive() -> Message:
            nonlocal pending
            if not pending:
                return await receive()
            with trio.move_on_after(self.client_timeout):
                message = await receive()
                if message["type"] != "http.request" or not message.get("more_body", False):
                    pending = False
                return message
            # The client stopped sending the body it began: drop it.
            pending = False
            await connection.drop()
            return {"type": "http.disconnect"}

        async def send_closing_if_unread(message: Message) -> None:
            # Hypercorn closes a connection whose request body was not all read
            # when the answer ends: the answer says so, and no client reuses it.
            if message["type"] == "http.response.start" and pending:
                headers = list(message.get("headers", []))
                if all(name.lower() != b"connection" for name, _ in headers):
                    message = {**message, "headers": [*headers, (b"connection", b"close")]}
            await send(message)

        try:
            await self.app(scope, bounded_receive, send_closing_if_unread)
        except Exception:
            log.exception(
                "internal error on %s %s",
                scope["method"],
                scope["path"],
                extra={"event": "server_error"},
            )
        finally:
            connection.body_left_unread = pending


def _has_body(scope: Scope) -> bool:
    for name, value in scope["headers"]:
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() != b"0"):
            return True
    return False


class HTTPServer:
    """Serves an ASGI app on a bound socket until `shutdown` returns."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        access_log: logging.Logger | None = None,
        keep_alive_timeout: float = 5.0,
        graceful_timeout: float = 2.0,
        max_connections: int = 512,
        client_timeout: float = 10.0,
        linger_timeout: float = 1.0,
    ) -> None:
        self.max_connections = max_connections
        self.client_timeout = client_timeout
        self.linger_timeout = linger_timeout
        self.graceful_timeout = graceful_timeout
        config = Config()
        config.loglevel = "WARNING"
        config.accesslog = access_log
        config.keep_alive_timeout = keep_alive_timeout
        config.keep_alive_max_requests = 1_000_000
        config.graceful_timeout = graceful_timeout
        config.include_server_header = False
        self.config = config
        # The same ASGI dicts: Starlette types a scope as a MutableMapping,
        # Hypercorn as TypedDicts, which mypy cannot match.
        self.app = ASGIWrapper(cast(ASGIFramework, _BoundedBodies(app, client_timeout)))
        self.context = WorkerContext(None)
        self.open_connections = 0
        self._refusing = 0

    async def serve(
        self,
        sock: socket.socket,
        shutdown: Callable[[], Awaitable[None]],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Accept on `sock` (bound, not yet listening); `task_status.started()`
        once connections are accepted; return once `shutdown()` returned and
        every connection is closed: idle ones at once, requests in flight
        after at most `graceful_timeout`."""
        sock.listen(BACKLOG)
        listener = trio.SocketListener(trio.socket.from_stdlib_socket(sock))
        async with trio.open_nursery() as connections:
            async with trio.open_nursery() as accepting:
                await accepting.start(_serve_listener, self._accepted, listener, connections)
                task_status.started()
                await shutdown()
                accepting.cancel_scope.cancel()
            await listener.aclose()
            await self.context.terminated.set()
            connections.cancel_scope.deadline = trio.current_time() + self.graceful_timeout

    async def _accepted(self, stream: trio.SocketStream) -> None:
        """A new connection: served, or refused when `max_connections` are open."""
        if self.open_connections >= self.max_connections:
            await self._refuse_busy(stream)
            return
        self.open_connections += 1
        try:
            connection = _Connection(stream, self)
            _current.set(connection)
            await TCPServer(
                self.app,
                self.config,
                self.context,
                {},
                cast(trio.SSLStream[trio.SocketStream], connection),
            )
        finally:
            self.open_connections -= 1

    async def _refuse_busy(self, stream: trio.SocketStream) -> None:
        """503 without reading the request, then close; closed bare when many
        such refusals are under way already."""
        if self._refusing >= MAX_REFUSING:
            await stream.aclose()
            return
        self._refusing += 1
        connection = _Connection(stream, self)
        try:
            try:
                await connection.send_all(_refusal())
                connection.body_left_unread = True  # its request is never read
            except _SOCKET_GONE:
                pass
            await connection.aclose()
        finally:
            self._refusing -= 1


async def _serve_listener(
    handler: Callable[[trio.SocketStream], Awaitable[None]],
    listener: trio.SocketListener,
    connections: trio.Nursery,
    *,
    task_status: trio.TaskStatus[list[trio.SocketListener]] = trio.TASK_STATUS_IGNORED,
) -> None:
    await trio.serve_listeners(
        handler, [listener], handler_nursery=connections, task_status=task_status
    )
