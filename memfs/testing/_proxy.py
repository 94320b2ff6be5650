"""`FaultProxy`: an HTTP/1.1 proxy (h11 on both sides, keep-alive included) that makes a store
misbehave on purpose (docs/testing.md). Each request and answer is read whole, then relayed."""

from __future__ import annotations

import json
import random
import re
import secrets
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import asdict, dataclass, field
from dataclasses import fields as dataclass_fields
from functools import partial
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

import h11
import trio

from .._exceptions import StatusError
from ..api import error_class, error_envelope

CONTROL_PATH = "/__faults__"
MAX_HEAD_BYTES = 64 * 1024
# The error types of the statuses the API's contract does not tie to one type.
_OTHER_ERROR_TYPES = {408: "timeout_error", 409: "conflict_error"}


def error_type_of(status: int) -> str:
    """The `error.type` the API answers `status` with (`api_error` for any other)."""
    return _OTHER_ERROR_TYPES.get(status) or error_class(status, None).error_type or "api_error"


@dataclass
class FaultSettings:
    """What the proxy does to matching requests (docs/testing.md, "Fault
    settings"); change it any time with `FaultProxy.set`."""

    delay: float = 0.0
    status: int = 500
    error_type: str | None = None
    status_rate: float = 0.0
    status_next: int = 0
    retry_after: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    drop_rate: float = 0.0
    drop_next: int = 0
    lose_answer_rate: float = 0.0
    lose_answer_next: int = 0
    down: bool = False
    match_method: str | None = None
    match_path: str | None = None

    def change(self, **changes: Any) -> None:
        """Apply `changes` once every one is checked: an unknown name is a
        TypeError, a bad value a ValueError, each one sentence."""
        known = {f.name: f for f in dataclass_fields(self)}
        for name, value in changes.items():
            if name not in known:
                raise TypeError(f"no fault setting {name!r}; known: {', '.join(known)}")
            _check_setting(name, value, getattr(FaultSettings(), name))
        for name, value in changes.items():
            setattr(self, name, float(value) if isinstance(getattr(self, name), float) else value)


def _check_setting(name: str, value: Any, default: Any) -> None:
    """Refuse, in one sentence, a `value` setting `name` (whose default is `default`) cannot take."""
    whole = isinstance(value, int) and not isinstance(value, bool)
    number = whole or isinstance(value, float)
    if name.endswith("_rate"):
        ok, kind = number and 0 <= value <= 1, "a share from 0 to 1"
    elif name == "status":
        ok, kind = whole and 100 <= value <= 599, "an HTTP status from 100 to 599"
    elif isinstance(default, bool):
        ok, kind = isinstance(value, bool), "true or false"
    elif isinstance(default, float):
        ok, kind = number and value >= 0, "a number of seconds, 0 or more"
    elif isinstance(default, int):
        ok, kind = whole and value >= 0, "a count, 0 or more"
    elif isinstance(default, dict):
        ok = isinstance(value, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        )
        kind = "an object of strings"
    else:
        ok, kind = value is None or isinstance(value, str), "a string or None"
    if not ok:
        raise ValueError(f"fault setting {name} must be {kind}, not {value!r}")
    if name == "match_path" and value is not None:
        try:
            re.compile(value)
        except re.error as e:
            raise ValueError(f"fault setting match_path is not a regex ({e}): {value!r}") from None


@dataclass
class FaultCounters:
    """What the proxy saw and did since it started or was last reset
    (docs/testing.md, "Counters"); the control path is not counted."""

    requests_seen: int = 0
    forwarded: int = 0
    statuses_injected: int = 0
    drops_injected: int = 0
    answers_lost: int = 0
    refused_connections: int = 0
    requests_by_path: dict[str, int] = field(default_factory=dict)
    requests_by_method_path: dict[str, int] = field(default_factory=dict)
    targets: list[str] = field(default_factory=list)
    exchanges: list[tuple[str, str, int]] = field(default_factory=list)
    """(method, target, status the client got: 0 for none), the last MAX_TARGETS."""

    def statuses(self, method: str, pattern: str) -> list[int]:
        """The statuses answered to `method` requests whose target matches the regex `pattern`."""
        return [
            status
            for m, target, status in self.exchanges
            if m == method.upper() and re.search(pattern, target)
        ]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FaultCounters:
        """The counters of `state()["counters"]` as read back over HTTP."""
        counters = cls(**data)
        counters.exchanges = [(m, t, int(s)) for m, t, s in data.get("exchanges", [])]
        return counters


MAX_TARGETS = 1000


async def _next_event(connection: h11.Connection, stream: trio.abc.Stream) -> Any:
    """The next h11 event of `connection`, reading `stream` as it needs."""
    while True:
        event = connection.next_event()
        if event is not h11.NEED_DATA:
            return event
        connection.receive_data(bytes(await stream.receive_some(65536)))


async def _body(connection: h11.Connection, stream: trio.abc.Stream) -> bytes:
    """The whole body of the message whose head was just read."""
    body = bytearray()
    while True:
        event = await _next_event(connection, stream)
        if isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            return bytes(body)
        else:
            raise ValueError("connection closed inside a body")


async def _send_message(
    connection: h11.Connection, stream: trio.abc.Stream, head: Any, body: bytes
) -> None:
    """`head` (an h11 Request or Response), then `body` and the message's end."""
    events = [head, *([h11.Data(data=body)] if body else []), h11.EndOfMessage()]
    await stream.send_all(b"".join(connection.send(event) or b"" for event in events))


def _next_cycle(connection: h11.Connection) -> bool:
    """Whether `connection` stays open for another request (and is ready for it)."""
    if connection.our_state is h11.DONE and connection.their_state is h11.DONE:
        connection.start_next_cycle()
        return True
    return False


def _response(status: int, body: bytes, extra: dict[str, str] | None = None) -> Any:
    """An h11 Response of the proxy's own, with a JSON `body`."""
    headers = {
        "content-type": "application/json",
        "content-length": str(len(body)),
        **(extra or {}),
    }
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = "Error"
    return h11.Response(status_code=status, headers=list(headers.items()), reason=reason.encode())


class FaultProxy:
    """The proxy in the caller's trio run: an async context manager serving on
    `url` until its block ends. `seed` makes the `*_rate` dice repeat."""

    def __init__(
        self, target: str, *, host: str = "127.0.0.1", port: int = 0, seed: int | None = None
    ) -> None:
        parts = urlsplit(target)
        self.target_host = parts.hostname or "127.0.0.1"
        self.target_port = parts.port or 80
        self.host = host
        self.port = port
        self.url = ""
        self.settings = FaultSettings()
        self.counters = FaultCounters()
        self.random = random.Random(seed)
        self.before_forward: Callable[[str, str], Awaitable[None]] | None = None
        """Awaited with (method, target) just before a matching request is forwarded."""
        self._stack = AsyncExitStack()

    def set(self, **changes: Any) -> None:
        """Change settings (see `FaultSettings`); an unknown name raises
        TypeError, a bad value ValueError, and then nothing changes."""
        self.settings.change(**changes)

    def reset(self) -> None:
        """No faults, counters at zero."""
        self.settings = FaultSettings()
        self.counters = FaultCounters()

    @property
    def requests_seen(self) -> int:
        return self.counters.requests_seen

    def state(self) -> dict[str, Any]:
        """The settings and counters as JSON values: what `GET /__faults__` answers."""
        return {"settings": asdict(self.settings), "counters": asdict(self.counters)}

    async def __aenter__(self) -> FaultProxy:
        self._stack = AsyncExitStack()
        nursery = await self._stack.enter_async_context(trio.open_nursery())
        self._stack.callback(nursery.cancel_scope.cancel)
        await nursery.start(self.serve)
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        return await self._stack.__aexit__(*exc)

    async def serve(self, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
        """Accept connections until cancelled; reports the URL once listening."""
        listeners = await trio.open_tcp_listeners(self.port, host=self.host)
        self.port = listeners[0].socket.getsockname()[1]
        self.url = f"http://{self.host}:{self.port}"
        async with trio.open_nursery() as nursery:
            nursery.start_soon(partial(trio.serve_listeners, self._connection, listeners))
            task_status.started(self.url)

    def _applies(self, method: str, path: str) -> bool:
        s = self.settings
        if s.match_method and method.upper() != s.match_method.upper():
            return False
        return not (s.match_path and not re.search(s.match_path, path))

    async def _connection(self, client: trio.SocketStream) -> None:
        inbound = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
        upstream: trio.SocketStream | None = None
        outbound = h11.Connection(h11.CLIENT)
        try:
            while True:
                request = await _next_event(inbound, client)
                if not isinstance(request, h11.Request):
                    return
                body = await _body(inbound, client)
                method = request.method.decode("ascii")
                path = request.target.decode("latin-1")
                if path.split("?")[0] == CONTROL_PATH:
                    await _send_message(inbound, client, *self._control(method, body))
                    if not _next_cycle(inbound):
                        return
                    continue
                self._count(method, path)
                s = self.settings
                if s.down:
                    self.counters.refused_connections += 1
                    self._exchanged(method, path, 0)
                    return
                applies = self._applies(method, path)
                if applies and s.delay > 0:
                    await trio.sleep(s.delay)
                if applies and (s.drop_next > 0 or self.random.random() < s.drop_rate):
                    s.drop_next = max(0, s.drop_next - 1)
                    self.counters.drops_injected += 1
                    self._exchanged(method, path, 0)
                    return
                if applies and (s.status_next > 0 or self.random.random() < s.status_rate):
                    s.status_next = max(0, s.status_next - 1)
                    self.counters.statuses_injected += 1
                    answer = self._fault_response(s.status, s.retry_after, s.headers)
                    await _send_message(inbound, client, *answer)
                    self._exchanged(method, path, s.status)
                    if not _next_cycle(inbound):
                        return
                    continue
                if applies and self.before_forward is not None:
                    await self.before_forward(method.upper(), path)
                if upstream is None:
                    try:
                        upstream = await trio.open_tcp_stream(self.target_host, self.target_port)
                    except OSError:
                        return
                await _send_message(outbound, upstream, request, body)
                response = await _next_event(outbound, upstream)
                while isinstance(response, h11.InformationalResponse):
                    response = await _next_event(outbound, upstream)
                if not isinstance(response, h11.Response):
                    raise ValueError("upstream closed before answering")
                answer_body = await _body(outbound, upstream)
                self.counters.forwarded += 1
                if applies and (
                    s.lose_answer_next > 0 or self.random.random() < s.lose_answer_rate
                ):
                    s.lose_answer_next = max(0, s.lose_answer_next - 1)
                    self.counters.answers_lost += 1
                    self._exchanged(method, path, 0)
                    return
                await _send_message(inbound, client, response, answer_body)
                self._exchanged(method, path, response.status_code)
                if not (_next_cycle(inbound) and _next_cycle(outbound)):
                    return
        except (
            trio.BrokenResourceError,
            trio.ClosedResourceError,
            h11.ProtocolError,
            ValueError,
            OSError,
        ):
            return
        finally:
            if upstream is not None:
                await upstream.aclose()
            await client.aclose()

    def _count(self, method: str, path: str) -> None:
        c = self.counters
        c.requests_seen += 1
        c.targets = [*c.targets[-MAX_TARGETS + 1 :], path]
        route = path.split("?")[0]
        c.requests_by_path[route] = c.requests_by_path.get(route, 0) + 1
        key = f"{method.upper()} {route}"
        c.requests_by_method_path[key] = c.requests_by_method_path.get(key, 0) + 1

    def _exchanged(self, method: str, target: str, status: int) -> None:
        exchanges = self.counters.exchanges[-MAX_TARGETS + 1 :]
        self.counters.exchanges = [*exchanges, (method.upper(), target, status)]

    def _fault_response(
        self, status: int, retry_after: float, headers: dict[str, str]
    ) -> tuple[Any, bytes]:
        request_id = "req_fault_" + secrets.token_hex(8)
        error_type = self.settings.error_type or error_type_of(status)
        error = StatusError(f"injected {status} by the fault proxy", error_type=error_type)
        body = json.dumps(error_envelope(error, request_id)).encode()
        extra = {"request-id": request_id}
        if status == 429:
            extra["retry-after"] = f"{retry_after:g}"
        return _response(status, body, {**extra, **headers}), body

    def _control(self, method: str, body: bytes) -> tuple[Any, bytes]:
        if method.upper() == "POST":
            try:
                changes = json.loads(body or b"{}")
                if changes.pop("reset", False):
                    self.reset()
                self.set(**changes)
            except (ValueError, TypeError) as e:
                refusal = json.dumps({"error": str(e)}).encode()
                return _response(400, refusal), refusal
        state = json.dumps(self.state()).encode()
        return _response(200, state), state
