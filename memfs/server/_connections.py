"""What uvicorn's public API leaves to memfs in bounding what a client may hold (docs/serve.md,
"Limits on what a client may hold": the head, body and send timeouts, `connection: close` and
lingering after an unread body), and `--access-log`'s line in the format it always had."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import struct
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._exceptions import ServerError
from ._http import error_response, new_request_id

log = logging.getLogger("memfs.serve")

Peer = tuple[str, int]


class ClientLimits:
    """The ASGI app, each request's waits on its client recorded, and the connections, seen through
    the process's own descriptors (uvicorn's public API does not show them), swept on the event
    loop, the only thread that opens or closes them: one with no request in flight for
    `HEAD_TIMEOUT` seconds is closed, one whose request has waited on its client for
    `client_timeout` seconds is reset."""

    SWEEP_INTERVAL = 0.5
    HEAD_TIMEOUT = 5.0
    LINGER_TIMEOUT = 1.0

    def __init__(
        self,
        app: ASGIApp,
        listener: socket.socket,
        *,
        client_timeout: float,
        access_log: logging.Logger | None,
    ) -> None:
        self.app = app
        self.port = listener.getsockname()[1]
        self.client_timeout = client_timeout
        self.access_log = access_log
        self.in_flight: dict[Peer, int] = {}
        self.quiet_since: dict[Peer, float] = {}
        self.waiting_since: dict[Peer, float] = {}
        self.dropped: set[Peer] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = _Request(self, scope, receive, send)
        peer = request.peer
        self.in_flight[peer] = self.in_flight.get(peer, 0) + 1
        try:
            await self.app(scope, request.receive, request.send)
        except Exception:
            # The app answers and logs its own faults before it raises them again.
            if request.start is None:
                log.exception(
                    "internal error on %s %s",
                    scope["method"],
                    scope["path"],
                    extra={"event": "server_error"},
                )
                response = error_response(ServerError("internal server error"), new_request_id())
                await response(scope, request.receive, request.send)
        finally:
            left = self.in_flight.pop(peer, 1) - 1
            if left:
                self.in_flight[peer] = left
            self.quiet_since[peer] = time.monotonic()

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.SWEEP_INTERVAL)
            self.swept()

    def swept(self) -> None:
        now = time.monotonic()
        seen: dict[Peer, float] = {}
        for connection, peer in self._connections():
            with connection:
                since = seen[peer] = self.quiet_since.get(peer, now)
                waiting = self.waiting_since.get(peer)
                if waiting is not None and now - waiting > self.client_timeout:
                    # A reset: what it was sent and did not read is discarded.
                    linger = struct.pack("ii", 1, 0)
                    connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
                    _shut(connection)
                    self.dropped.add(peer)
                elif peer not in self.in_flight and now - since > self.HEAD_TIMEOUT:
                    _shut(connection)
        self.quiet_since = seen
        self.dropped &= seen.keys()

    def _connections(self) -> list[tuple[socket.socket, Peer]]:
        """Each connection accepted on the listener's port (the server
        connects nowhere), as a duplicate of its descriptor, with its peer."""
        found = []
        for name in os.listdir("/proc/self/fd"):
            try:
                if not os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                    continue
                connection = socket.socket(fileno=os.dup(int(name)))
            except OSError:
                continue
            try:
                inet = connection.family in (socket.AF_INET, socket.AF_INET6)
                ours = inet and connection.getsockname()[1] == self.port
                peer = connection.getpeername()[:2] if ours else None
            except OSError:
                peer = None
            if peer is None:
                connection.close()
            else:
                found.append((connection, (str(peer[0]), int(peer[1]))))
        return found


def _shut(connection: socket.socket) -> None:
    with contextlib.suppress(OSError):
        connection.shutdown(socket.SHUT_RDWR)


class _Request:
    """One request's receive and send, as `ClientLimits` bounds them."""

    def __init__(self, limits: ClientLimits, scope: Scope, receive: Receive, send: Send) -> None:
        self.limits = limits
        self.waiting = limits.waiting_since
        self.scope = scope
        client = scope.get("client") or ("", 0)
        self.peer: Peer = (str(client[0]), int(client[1]))
        self._receive = receive
        self._send = send
        self.body_pending = any(
            name == b"transfer-encoding" or (name == b"content-length" and value.strip() != b"0")
            for name, value in scope["headers"]
        )
        self.start: Message | None = None
        self.closing = False

    async def receive(self) -> Message:
        if not self.body_pending:
            return await self._receive()
        self.waiting[self.peer] = time.monotonic()
        try:
            message = await self._receive()
        finally:
            self.waiting.pop(self.peer, None)
        if message["type"] != "http.request" or not message.get("more_body", False):
            self.body_pending = False
        return message

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            if self.body_pending:
                # A client must not send its next request on this connection.
                self.closing = True
                headers = list(message.get("headers", []))
                if all(name.lower() != b"connection" for name, _ in headers):
                    headers.append((b"connection", b"close"))
                message = {**message, "headers": headers}
            self.start = message
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            if self.closing:
                await self._timed_send({**message, "more_body": True})
                await self._drain_body()
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await self._timed_send(message)
            self._log_access()
            return
        await self._timed_send(message)

    async def _timed_send(self, message: Message) -> None:
        if self.peer in self.limits.dropped:
            return
        self.waiting[self.peer] = time.monotonic()
        try:
            await self._send(message)
        except Exception:
            # uvicorn may still write to a connection the sweep dropped under it
            # (a request queued behind a pipelined one): the answer goes nowhere.
            if self.peer not in self.limits.dropped:
                raise
        finally:
            self.waiting.pop(self.peer, None)

    async def _drain_body(self) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.limits.LINGER_TIMEOUT):
                while self.body_pending:
                    message = await self._receive()
                    if message["type"] != "http.request" or not message.get("more_body", False):
                        self.body_pending = False

    def _log_access(self) -> None:
        if self.limits.access_log is None or self.start is None:
            return
        length = "-"
        for name, value in self.start.get("headers", []):
            if name.lower() == b"content-length":
                length = value.decode("latin-1")
        headers = {name.lower(): value for name, value in self.scope["headers"]}
        self.limits.access_log.info(
            '%s:%s - - %s "%s %s %s" %s %s "%s" "%s"',
            *self.peer,
            time.strftime("[%d/%b/%Y:%H:%M:%S %z]"),
            self.scope["method"],
            self.scope["path"],
            self.scope["http_version"],
            self.start["status"],
            length,
            headers.get(b"referer", b"-").decode("latin-1"),
            headers.get(b"user-agent", b"-").decode("latin-1"),
        )
