"""A tiny app that keeps notes in a Memory Store over HTTP: the program under
test of this sample project. It knows nothing of memfs.

It retries what the API says to retry (408, 429, 5xx, 529, and connections
that fail), waiting `retry-after` when the store sends it. A save survives
losing its answer: if the create did happen, the retry finds the path taken
(409) and writes that memory instead, which is a no-op when the content is
already there.
"""

from __future__ import annotations

import time

import httpx

RETRY_STATUSES = {408, 429, 500, 502, 503, 504, 529}
HEADERS = {"anthropic-version": "2023-06-01", "anthropic-beta": "agent-memory-2026-07-22"}


class StoreUnavailable(Exception):
    """The store did not answer usefully after every attempt."""


class NotesApp:
    def __init__(
        self, url: str, token: str, store_id: str, *, attempts: int = 6, backoff: float = 0.05
    ) -> None:
        self.http = httpx.Client(
            base_url=f"{url}/v1/memory_stores/{store_id}",
            headers={**HEADERS, "x-api-key": token},
            timeout=5.0,
        )
        self.attempts = attempts
        self.backoff = backoff

    def save(self, path: str, text: str) -> None:
        """Create or replace the note at `path`."""
        r = self._send("POST", "/memories", json={"path": path, "content": text})
        if r.status_code == 409 and r.json()["error"]["type"] == "memory_path_conflict_error":
            memory_id = r.json()["error"]["conflicting_memory_id"]
            r = self._send("POST", f"/memories/{memory_id}", json={"content": text})
        r.raise_for_status()

    def notes(self) -> dict[str, str]:
        """Every note, `path: text`."""
        notes, page = {}, None
        while True:
            params = {"view": "full", "limit": 20, **({"page": page} if page else {})}
            r = self._send("GET", "/memories", params=params)
            r.raise_for_status()
            body = r.json()
            notes.update({m["path"]: m["content"] for m in body["data"]})
            page = body["next_page"]
            if not page:
                return notes

    def close(self) -> None:
        self.http.close()

    def _send(self, method: str, url: str, **kwargs) -> httpx.Response:
        for attempt in range(self.attempts):
            wait = self.backoff * 2**attempt
            try:
                r = self.http.request(method, url, **kwargs)
            except httpx.TransportError:
                time.sleep(wait)
                continue
            if r.status_code not in RETRY_STATUSES:
                return r
            time.sleep(float(r.headers.get("retry-after", wait)))
        raise StoreUnavailable(f"{method} {url} failed {self.attempts} times")
