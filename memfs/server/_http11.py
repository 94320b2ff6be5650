"""HTTP/1.1 for `memfs serve`: h11 on trio, one task per connection running
the ASGI app inline, one request at a time.

Why not Hypercorn, which served the app before: profiled under eight
clients, Hypercorn's own machinery (a task spawned per request, an
idle-timeout task restarted around each one, channels, locks and three
socket writes per answer) took about 370 µs of CPU per request, more than
half of a GET's whole cost; h11 itself, driven from one loop per connection,
costs about 100. The app cannot tell the difference: it gets the same scope
and the same messages. What this server keeps of Hypercorn's behaviour, as a
client sees it:

- keep-alive connections, pipelining, `Connection: close` and HTTP/1.0 as h11
  handles them; an idle connection is closed after 5 s without a request,
  and so is one whose request head is not whole 5 s after it began;
- `Expect: 100-continue` answered at once; HEAD answers carry no body;
- a request h11 cannot parse (a bad content-length, raw non-ASCII bytes in
  the request line; 431 for a head still incomplete past 16 KiB) is refused
  with h11's status, an empty body and `connection: close`, and never
  reaches the app;
- an app that fails before answering is a bare 500; every answer carries a
  `date` header;
- `--access-log` writes Hypercorn's line (`hypercorn.logging.AccessLogAtoms`
  in `Config.access_log_format`) once an answer is sent;
- on shutdown it stops accepting at once, closes idle connections, lets
  requests in flight finish for the graceful timeout, then cancels them.

Not kept: HTTP/2 (h2c upgrades, prior knowledge) and WebSockets, which no
client of the Memory Store API uses, and Hypercorn's `server` header.

What it adds, so that no client, with or without credentials, can hold the
server's descriptors or memory:

- at most `max_connections` open at once: one more is answered a bare 503
  (`retry-after: 1`, `connection: close`) and closed;
- a client that stops reading its answer, or stops sending a request body it
  began, for `client_timeout` seconds is dropped (its connection closed);
- a request whose body the app did not read (refused at its size, say) ends
  its connection after the answer; what the client still sends is read and
  dropped for up to `linger_timeout` seconds, so that it gets the answer
  rather than a reset.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import unquote
from wsgiref.handlers import format_date_time

import h11
import trio
from hypercorn.config import Config as _HypercornConfig
from hypercorn.logging import AccessLogAtoms
from starlette.types import ASGIApp, Message, Scope

log = logging.getLogger("memfs.serve")

MAX_RECV = 65536
MAX_HEAD_BYTES = 16 * 1024
BACKLOG = 100
MAX_REFUSING = 32
"""Connections past the cap that are being answered 503 at once; more are closed bare."""
ACCESS_LOG_FORMAT = _HypercornConfig.access_log_format
_SOCKET_GONE = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)


class _DateHeader:
    """The `date` header, formatted once a second rather than once an answer."""

    def __init__(self) -> None:
        self._second = -1
        self._value = b""

    def get(self) -> tuple[bytes, bytes]:
        now = int(time.time())
        if now != self._second:
            self._second, self._value = now, format_date_time(now).encode("ascii")
        return (b"date", self._value)


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
        self.app = app
        self.access_log = access_log
        self.keep_alive_timeout = keep_alive_timeout
        self.graceful_timeout = graceful_timeout
        self.max_connections = max_connections
        self.client_timeout = client_timeout
        self.linger_timeout = linger_timeout
        self.date = _DateHeader()
        self._idle: set[trio.CancelScope] = set()
        self._stopping = False
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
        every connection is closed."""
        sock.listen(BACKLOG)
        listener = trio.SocketListener(trio.socket.from_stdlib_socket(sock))
        async with trio.open_nursery() as connections:
            async with trio.open_nursery() as accepting:
                await accepting.start(_serve_listener, self._accepted, listener, connections)
                task_status.started()
                await shutdown()
                accepting.cancel_scope.cancel()
            await listener.aclose()
            self._stopping = True
            for scope in list(self._idle):
                scope.cancel()
            connections.cancel_scope.deadline = trio.current_time() + self.graceful_timeout

    async def _accepted(self, stream: trio.SocketStream) -> None:
        """A new connection: served, or refused when `max_connections` are open."""
        if self.open_connections >= self.max_connections:
            await self._refuse_busy(stream)
            return
        self.open_connections += 1
        try:
            await self._connection(stream)
        finally:
            self.open_connections -= 1

    async def _refuse_busy(self, stream: trio.SocketStream) -> None:
        """503 without reading the request, then close; closed bare when many
        such refusals are under way already."""
        if self._refusing >= MAX_REFUSING:
            await stream.aclose()
            return
        self._refusing += 1
        try:
            head = (
                b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nretry-after: 1\r\n"
                b"connection: close\r\n" + b"%s: %s\r\n\r\n" % self.date.get()
            )
            await self._close(stream, linger=await self.send(stream, head))
        finally:
            self._refusing -= 1

    async def send(self, stream: trio.SocketStream, data: bytes) -> bool:
        """Send `data`; False when the client did not take it within
        `client_timeout` seconds or is gone (the connection is then unusable)."""
        if not data:
            return True
        with trio.move_on_after(self.client_timeout):
            try:
                await stream.send_all(data)
            except _SOCKET_GONE:
                return False
            return True
        return False

    async def _close(self, stream: trio.SocketStream, *, linger: bool) -> None:
        """Send EOF and close; with `linger`, first read and drop what the
        client still sends, for up to `linger_timeout` seconds, so that the
        answer it was sent is not lost to a reset."""
        with trio.CancelScope(shield=True):
            try:
                await stream.send_eof()
            except (*_SOCKET_GONE, trio.BusyResourceError):
                linger = False
            if linger:
                with trio.move_on_after(self.linger_timeout):
                    try:
                        while await stream.receive_some(MAX_RECV):
                            pass
                    except (*_SOCKET_GONE, trio.BusyResourceError):
                        pass
            await stream.aclose()

    async def _connection(self, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
        linger = False
        try:
            client = _address(stream.socket.getpeername())
            server = _address(stream.socket.getsockname())
            while not self._stopping:
                request = await self._next_request(conn, stream)
                if request is None:
                    break
                exchange = _Exchange(self, conn, stream, request, client, server)
                keep_alive = await exchange.run()
                linger = exchange.body_left_unread
                if not keep_alive or self._stopping:
                    break
                conn.start_next_cycle()
        except _SOCKET_GONE:
            pass
        finally:
            await self._close(stream, linger=linger)

    async def _next_request(
        self, conn: h11.Connection, stream: trio.SocketStream
    ) -> h11.Request | None:
        """The next request's head; None when the connection is to close: the
        client closed it, it stayed idle too long, the server is stopping or
        the request could not be parsed (then it was refused)."""
        scope = trio.CancelScope(deadline=trio.current_time() + self.keep_alive_timeout)
        self._idle.add(scope)
        try:
            with scope:
                while True:
                    try:
                        event = conn.next_event()
                    except h11.RemoteProtocolError as e:
                        await self.refuse(conn, stream, e.error_status_hint)
                        return None
                    if event is h11.NEED_DATA:
                        conn.receive_data(await stream.receive_some(MAX_RECV))
                        continue
                    if isinstance(event, h11.Request):
                        return event
                    return None
        finally:
            self._idle.discard(scope)
        return None

    async def refuse(self, conn: h11.Connection, stream: trio.SocketStream, status: int) -> None:
        """A bare answer (empty body, `connection: close`), when one may still be sent."""
        if conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        headers = [(b"content-length", b"0"), (b"connection", b"close"), self.date.get()]
        try:
            data = conn.send(h11.Response(status_code=status, headers=headers))
            data += conn.send(h11.EndOfMessage()) or b""
        except h11.LocalProtocolError:
            return
        await self.send(stream, data or b"")


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


def _address(address: Any) -> tuple[str, int]:
    return (str(address[0]), int(address[1]))


_REQUEST, _RESPONSE, _DONE = "request", "response", "done"


class _Exchange:
    """One request and its answer: the ASGI scope, `receive` and `send`."""

    def __init__(
        self,
        server: HTTPServer,
        conn: h11.Connection,
        stream: trio.SocketStream,
        request: h11.Request,
        client: tuple[str, int],
        local: tuple[str, int],
    ) -> None:
        self.server, self.conn, self.stream = server, conn, stream
        self.started = time.time()
        path, _, query = request.target.partition(b"?")
        self.method = request.method.decode("ascii").upper()
        self.scope: Scope = {
            "type": "http",
            "http_version": request.http_version.decode(),
            "asgi": {"spec_version": "2.1", "version": "3.0"},
            "method": self.method,
            "scheme": "http",
            "path": unquote(path.decode("ascii")),
            "raw_path": path,
            "query_string": query,
            "root_path": "",
            "headers": list(request.headers),
            "client": client,
            "server": local,
            "state": {},
            "extensions": {},
        }
        self.state = _REQUEST
        self.closed = False  # refused mid-body: the app's answer goes nowhere
        self.head: h11.Response | None = None
        self.status = 0
        self.response: Message | None = None
        self.body_done = False
        self.body_left_unread = False
        self.finished = trio.Event()

    async def run(self) -> bool:
        """Run the app on this request; whether the connection may carry another."""
        if self.conn.they_are_waiting_for_100_continue:
            continue_ = h11.InformationalResponse(status_code=100, headers=[self.server.date.get()])
            if not await self.server.send(self.stream, self.conn.send(continue_) or b""):
                return False
        try:
            await self.server.app(self.scope, self.receive, self.send)
        except Exception:
            log.exception(
                "internal error on %s %s",
                self.method,
                self.scope["path"],
                extra={"event": "server_error"},
            )
        finally:
            self.finished.set()
        if self.closed:
            return False
        if self.state == _REQUEST:
            await self.server.refuse(self.conn, self.stream, 500)
            self._log({"status": 500, "headers": []})
            return False
        if self.state == _RESPONSE:
            self._log(None)
            return False
        # What is left of the request without waiting (a GET's end, say);
        # a body the app did not read closes the connection instead.
        while self.conn.their_state is h11.SEND_BODY:
            try:
                event = self.conn.next_event()
            except h11.RemoteProtocolError:
                return False
            if event is h11.NEED_DATA or event is h11.PAUSED:
                self.body_left_unread = True
                return False
        return self.conn.our_state is h11.DONE and self.conn.their_state is h11.DONE

    async def receive(self) -> Message:
        if self.body_done or self.closed:
            await self.finished.wait()
            return {"type": "http.disconnect"}
        while True:
            try:
                event = self.conn.next_event()
            except h11.RemoteProtocolError as e:
                await self.server.refuse(self.conn, self.stream, e.error_status_hint)
                self.closed = True
                return {"type": "http.disconnect"}
            if event is h11.NEED_DATA:
                data = b""
                with trio.move_on_after(self.server.client_timeout) as stalled:
                    try:
                        data = await self.stream.receive_some(MAX_RECV)
                    except _SOCKET_GONE:
                        pass
                if stalled.cancelled_caught:
                    # The client stopped sending the body it began: drop it.
                    self.closed = True
                    return {"type": "http.disconnect"}
                self.conn.receive_data(data)
                continue
            if isinstance(event, h11.Data):
                return {"type": "http.request", "body": bytes(event.data), "more_body": True}
            if isinstance(event, h11.EndOfMessage):
                self.body_done = True
                return {"type": "http.request", "body": b"", "more_body": False}
            self.closed = True
            return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        if self.closed:
            return
        kind = message["type"]
        if kind == "http.response.start" and self.state == _REQUEST:
            self.status = int(message["status"])
            headers = [(bytes(n).strip(), bytes(v).strip()) for n, v in message.get("headers", [])]
            headers.append(self.server.date.get())
            self.head = h11.Response(status_code=self.status, headers=headers)
            self.response = message
            self.state = _RESPONSE
        elif kind == "http.response.body" and self.state == _RESPONSE:
            data = b""
            if self.head is not None:
                data = self.conn.send(self.head) or b""
                self.head = None
            body = bytes(message.get("body", b""))
            if body and not _suppress_body(self.method, self.status):
                data += self.conn.send(h11.Data(data=body)) or b""
            more = bool(message.get("more_body", False))
            if not more:
                data += self.conn.send(h11.EndOfMessage()) or b""
                self.state = _DONE
            if not await self.server.send(self.stream, data):
                # The client stopped reading (or left): drop the connection.
                self.closed = True
                return
            if not more:
                self._log(self.response)
        else:
            raise RuntimeError(f"unexpected ASGI message {kind!r} while in {self.state}")

    def _log(self, response: Message | None) -> None:
        access = self.server.access_log
        if access is not None:
            atoms = AccessLogAtoms(self.scope, response, time.time() - self.started)  # type: ignore[arg-type]
            access.info(ACCESS_LOG_FORMAT, atoms)


def _suppress_body(method: str, status: int) -> bool:
    return method == "HEAD" or 100 <= status < 200 or status in (204, 304)
