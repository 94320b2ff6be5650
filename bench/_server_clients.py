"""The two clients `server_bench.py` drives `memfs serve` with, each owning
one keep-alive connection and answering the same four calls with the
memory's wire dict.

- `StoreClientConn`: memfs's own `StoreClient` (httpx, retries, wire types),
  what a mount uses. Its CPU per request is larger than the server's, so on
  two cores the client, not the server, sets the pace with many clients.
- `RawConn`: the same requests byte for byte in what they mean (method,
  path, query, headers, JSON body) written on one socket by hand, and each
  answer read by its content-length and parsed as JSON. It costs a fraction
  of httpx's CPU, so what it measures is the server. A status other than 200
  fails the bench: it never retries.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode, urlsplit

import trio

from memfs import __version__
from memfs.api import ANTHROPIC_VERSION, BETA
from memfs.client import StoreClient


class BenchFailure(Exception):
    """An answer or the stored state is not what the bench expected."""


class StoreClientConn:
    def __init__(self, url: str, token: str) -> None:
        self.client = StoreClient(url, token, max_connections=1)

    async def __aenter__(self) -> StoreClientConn:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.aclose()

    @property
    def retries(self) -> int:
        return self.client.stats.retries

    async def get_store(self, store: str) -> None:
        await self.client.get_store(store)

    async def create(self, store: str, path: str, content: str) -> dict[str, Any]:
        return vars(await self.client.create_memory(store, path, content, view="basic"))

    async def update(self, store: str, memory_id: str, content: str) -> dict[str, Any]:
        m = await self.client.update_memory(store, memory_id, content=content, view="basic")
        return vars(m)

    async def get(self, store: str, memory_id: str) -> dict[str, Any]:
        return vars(await self.client.get_memory(store, memory_id))

    async def paths(self, store: str) -> list[str]:
        return [m.path async for m in self.client.iter_memories(store, limit=100)]


class RawConn:
    def __init__(self, url: str, token: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.retries = 0
        self.headers = (
            f"host: {parts.netloc}\r\n"
            "accept: application/json\r\n"
            "accept-encoding: gzip, deflate\r\n"
            "connection: keep-alive\r\n"
            f"user-agent: memfs/{__version__}\r\n"
            f"anthropic-version: {ANTHROPIC_VERSION}\r\n"
            f"anthropic-beta: {BETA}\r\n"
            f"authorization: Bearer {token}\r\n"
        ).encode()
        self.stream: trio.SocketStream | None = None
        self.buffer = b""

    async def __aenter__(self) -> RawConn:
        self.stream = await trio.open_tcp_stream(self.host, self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.stream is not None:
            await self.stream.aclose()

    async def _read_more(self) -> None:
        assert self.stream is not None
        chunk = await self.stream.receive_some(65536)
        if not chunk:
            raise BenchFailure("the server closed the connection")
        self.buffer += chunk

    async def call(
        self, method: str, path: str, query: dict[str, str], body: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        assert self.stream is not None
        target = path + "?" + urlencode({"beta": "true", **query})
        head = f"{method} {target} HTTP/1.1\r\n".encode() + self.headers
        payload = b""
        if body is not None:
            payload = json.dumps(body, separators=(",", ":")).encode()
            head += b"content-type: application/json\r\n"
        if payload or method == "POST":
            head += b"content-length: %d\r\n" % len(payload)
        await self.stream.send_all(head + b"\r\n" + payload)
        while b"\r\n\r\n" not in self.buffer:
            await self._read_more()
        raw_head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        lines = raw_head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        length = None
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
            elif name.strip().lower() == "transfer-encoding":
                raise BenchFailure("a chunked answer: the raw client reads content-length only")
        if length is None:
            raise BenchFailure(f"{method} {path}: an answer without content-length")
        while len(self.buffer) < length:
            await self._read_more()
        data, self.buffer = self.buffer[:length], self.buffer[length:]
        if status != 200:
            raise BenchFailure(f"{method} {path} answered {status}: {data[:200]!r}")
        answer: dict[str, Any] = json.loads(data)
        return answer

    async def get_store(self, store: str) -> None:
        await self.call("GET", f"/v1/memory_stores/{store}", {})

    async def create(self, store: str, path: str, content: str) -> dict[str, Any]:
        body = {"path": path, "content": content}
        return await self.call(
            "POST", f"/v1/memory_stores/{store}/memories", {"view": "basic"}, body
        )

    async def update(self, store: str, memory_id: str, content: str) -> dict[str, Any]:
        url = f"/v1/memory_stores/{store}/memories/{memory_id}"
        return await self.call("POST", url, {"view": "basic"}, {"content": content})

    async def get(self, store: str, memory_id: str) -> dict[str, Any]:
        url = f"/v1/memory_stores/{store}/memories/{memory_id}"
        return await self.call("GET", url, {"view": "full"})

    async def paths(self, store: str) -> list[str]:
        paths: list[str] = []
        page: str | None = None
        while True:
            query = {"limit": "100", "view": "basic", **({"page": page} if page else {})}
            answer = await self.call("GET", f"/v1/memory_stores/{store}/memories", query)
            paths += [item["path"] for item in answer["data"]]
            page = answer["next_page"]
            if not page:
                return paths


CLIENTS = {"store": StoreClientConn, "raw": RawConn}
