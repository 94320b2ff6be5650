"""`FakeStore`: one store on a `memfs serve`. Every call goes straight to the
server, never through a fault proxy, so a test's own set-up and checks
cannot be hit by its faults."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import httpx

from ._processes import ServerProcess


class FakeStore:
    """A store on `server`: `.url`, `.token` and `.store_id` to hand the program
    under test, and blocking helpers over HTTP. Paths are the API's (`/a.md`)."""

    def __init__(self, server: ServerProcess, store_id: str) -> None:
        self.server = server
        self.store_id = store_id
        self._memories = f"/v1/memory_stores/{store_id}/memories"

    @property
    def url(self) -> str:
        """The server's base URL (no fault proxy in between)."""
        return self.server.url

    @property
    def token(self) -> str:
        """A token the server accepts for this store (x-api-key or Bearer)."""
        return self.server.token

    def headers(self) -> dict[str, str]:
        """The API's headers with the token: what every request carries."""
        return self.server.headers()

    def seed(self, memories: Mapping[str, str]) -> dict[str, str]:
        """Write each `path: content` (create or replace); `path: memory id`. A
        path or content the store refuses is a ValueError with its sentence."""
        with self.server.http() as http:
            return {path: self._put(http, path, content) for path, content in memories.items()}

    def put(self, path: str, content: str) -> str:
        """Write one memory (create or replace); its id."""
        with self.server.http() as http:
            return self._put(http, path, content)

    def delete(self, path: str) -> bool:
        """Delete the memory at `path`; False when there was none."""
        with self.server.http() as http:
            memory = self._find(http, path)
            if memory is None:
                return False
            r = http.delete(f"{self._memories}/{memory['id']}")
            r.raise_for_status()
            return True

    def memories(self) -> dict[str, str]:
        """`path: content` of every memory the store holds now, by path."""
        with self.server.http() as http:
            return {
                m["path"]: m["content"]
                for m in self._pages(http, "/memories", {"view": "full", "limit": "20"})
            }

    def versions(self) -> list[dict[str, Any]]:
        """The store's version log, oldest first: one object per change
        (`operation`, `path`, `content`, `memory_id`)."""
        with self.server.http() as http:
            pages = self._pages(http, "/memory_versions", {"view": "full", "limit": "20"})
            return list(reversed(list(pages)))

    def __repr__(self) -> str:
        return f"FakeStore({self.store_id!r} on {self.url})"

    def _put(self, http: httpx.Client, path: str, content: str) -> str:
        r = http.post(self._memories, json={"path": path, "content": content})
        if r.status_code == 409:
            error = r.json().get("error", {})
            if error.get("conflicting_path") == path:
                memory_id: str = error["conflicting_memory_id"]
                r = http.post(f"{self._memories}/{memory_id}", json={"content": content})
        if r.is_client_error:
            message = r.json().get("error", {}).get("message", r.text)
            raise ValueError(f"the store refused {path!r}: {message}")
        r.raise_for_status()
        written: str = r.json()["id"]
        return written

    def _find(self, http: httpx.Client, path: str) -> dict[str, Any] | None:
        for memory in self._pages(http, "/memories", {"limit": "100"}):
            if memory["path"] == path:
                return memory
        return None

    def _pages(
        self, http: httpx.Client, resource: str, query: dict[str, str]
    ) -> Iterator[dict[str, Any]]:
        page: str | None = None
        while True:
            params = {**query, **({"page": page} if page else {})}
            r = http.get(f"/v1/memory_stores/{self.store_id}{resource}", params=params)
            r.raise_for_status()
            body = r.json()
            yield from (item for item in body["data"] if item.get("type") != "memory_prefix")
            page = body.get("next_page")
            if not page:
                return
