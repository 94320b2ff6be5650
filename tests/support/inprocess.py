"""`memfs serve`'s app in the test's own process: the real `MemoryStoreApp`
on a real SQLite file, reached by the real `StoreClient` through
`httpx.ASGITransport`, with no socket and no subprocess.

`ScriptedTransport` sits between the two and can misbehave on purpose, as
`tests.support.faults.FaultProxy` does over a socket: answer the next
requests with an error status instead of passing them on, or pass a request
on and lose its answer (the store applied it; the client never hears of it).
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from memfs.client import StoreClient
from memfs.server import MemoryStoreApp
from memfs.server._db import Database

TOKEN = "in-process-token"
URL = "http://memfs.test"
FAST = {"backoff_base": 0.001, "backoff_max": 0.01}


_ERROR_TYPES = {
    400: "invalid_request_error",
    404: "not_found_error",
    409: "conflict_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}


@dataclass(frozen=True)
class Answer:
    """Answer with this status, headers and error type (by default the one
    the API gives that status) instead of passing the request on."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    error_type: str | None = None

    def envelope(self) -> bytes:
        error_type = self.error_type or _ERROR_TYPES.get(self.status, "api_error")
        return json.dumps(
            {
                "type": "error",
                "error": {"type": error_type, "message": "scripted"},
                "request_id": "req_scripted",
            }
        ).encode()


@dataclass(frozen=True)
class LoseAnswer:
    """Pass the request on, then drop the connection instead of answering."""


Fault = Answer | LoseAnswer


class ScriptedTransport(httpx.AsyncBaseTransport):
    """The app's ASGI transport, with the faults queued in `faults` applied
    to the next requests, one each. `seen` keeps (method, path) of every
    request, `reached_app` those the app was given."""

    def __init__(self, app: MemoryStoreApp) -> None:
        self.inner = httpx.ASGITransport(app=app)
        self.faults: deque[Fault] = deque()
        self.seen: list[tuple[str, str]] = []
        self.reached_app: list[tuple[str, str]] = []

    def script(self, *faults: Fault) -> None:
        self.faults.extend(faults)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        key = (request.method, request.url.path)
        self.seen.append(key)
        fault = self.faults.popleft() if self.faults else None
        if isinstance(fault, Answer):
            return httpx.Response(fault.status, headers=fault.headers, content=fault.envelope())
        self.reached_app.append(key)
        response = await self.inner.handle_async_request(request)
        if isinstance(fault, LoseAnswer):
            await response.aclose()
            raise httpx.RemoteProtocolError("scripted: the answer was lost", request=request)
        return response


class InProcessStore:
    """One database, one app, one scripted transport; `client()` makes clients of it."""

    def __init__(self, folder: Path, tokens: dict | None = None) -> None:
        self.db = Database(str(folder / "store.sqlite3"))
        self.app = MemoryStoreApp(self.db, {TOKEN: None} if tokens is None else tokens)
        self.transport = ScriptedTransport(self.app)

    def client(self, token: str = TOKEN, **options) -> StoreClient:
        return StoreClient(URL, token, transport=self.transport, **(FAST | options))

    def close(self) -> None:
        self.db.close()
