"""The child processes of a fake store, `memfs serve` (`ServerProcess`) and the fault proxy
(`FaultProxyProcess`), and one store on the server (`FakeStore`): blocking objects, so they work in
any test. The server's token reaches it in its environment, never on its command line, where `ps`
would show it. A `FakeStore` goes straight to the server, never through a fault proxy, so a test's
own set-up and checks cannot be hit by its faults."""

from __future__ import annotations

import os
import secrets
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import httpx

from ..api import (
    ACCESS_READ_ONLY,
    ACCESS_READ_WRITE,
    ANTHROPIC_VERSION,
    BETA,
    SERVE_TOKEN_ENV,
    SESSIONS_BETA,
    encode_work_item_secret,
)
from ._proxy import CONTROL_PATH, FaultCounters

START_TIMEOUT = 15.0
"""Seconds a child process has to print its URL, the first line of its stdout."""


def api_headers(token: str, *, beta: str | None = BETA) -> dict[str, str]:
    """The headers every request of the API carries, with `token` as x-api-key."""
    headers = {"x-api-key": token, "anthropic-version": ANTHROPIC_VERSION}
    if beta is not None:
        headers["anthropic-beta"] = beta
    return headers


def _first_line(stream: IO[bytes], timeout: float) -> str:
    """The first line `stream` gives within `timeout` seconds ("" if none)."""
    selector = selectors.DefaultSelector()
    selector.register(stream, selectors.EVENT_READ)
    data = b""
    deadline = time.monotonic() + timeout
    try:
        while b"\n" not in data:
            left = deadline - time.monotonic()
            if left <= 0 or not selector.select(left):
                break
            chunk = os.read(stream.fileno(), 4096)
            if not chunk:
                break
            data += chunk
    finally:
        selector.close()
    return data.decode(errors="replace").split("\n", 1)[0].strip()


def _start(cmd: list[str], timeout: float, **popen: Any) -> tuple[subprocess.Popen[bytes], str]:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, **popen)
    assert proc.stdout is not None
    return proc, _first_line(proc.stdout, timeout)


def _end(proc: subprocess.Popen[bytes] | None, timeout: float, *, kill: bool = False) -> int | None:
    """Stop `proc` (SIGTERM, or SIGKILL when `kill`), SIGKILL after `timeout`;
    its exit status (None when there was no process)."""
    if proc is None:
        return None
    if proc.poll() is None:
        if kill:
            proc.kill()
        else:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stdout:
        proc.stdout.close()
    return proc.returncode


class ServerProcess:
    """`python -m memfs serve` on 127.0.0.1 (a free port) with its own SQLite
    file (docs/testing.md, "`ServerProcess`"). `token` is the one token it
    accepts (random when None; "" lets the server make one); `extra_args`
    are more `memfs serve` flags, `env` more variables."""

    def __init__(
        self,
        db_path: Path | str,
        *,
        token: str | None = None,
        extra_args: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.db_path = Path(db_path)
        self.token = "memfs-test-" + secrets.token_urlsafe(12) if token is None else token
        self.extra_args = list(extra_args or [])
        self.env = env
        self.port = 0
        self.url = ""
        self.proc: subprocess.Popen[bytes] | None = None
        self.stderr_path = self.db_path.with_suffix(".stderr.log")

    @property
    def stderr(self) -> str:
        """What the server wrote on stderr so far (every start appends)."""
        try:
            return self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def command(self) -> list[str]:
        """The command line (no secret in it); a subclass may wrap it."""
        cmd = [sys.executable, "-m", "memfs", "serve", "--host", "127.0.0.1"]
        cmd += ["--port", str(self.port), "--db", str(self.db_path)]
        return cmd + self.extra_args

    def environment(self) -> dict[str, str]:
        """This process's environment, `env` on top, and the token in
        MEMFS_SERVE_TOKEN (beside any tokens `env` gives there)."""
        env = dict(os.environ)
        env.pop(SERVE_TOKEN_ENV, None)
        env.update(self.env or {})
        tokens = [t for t in (self.token, env.get(SERVE_TOKEN_ENV, "")) if t]
        if tokens:
            env[SERVE_TOKEN_ENV] = ",".join(tokens)
        return env

    def start(self, timeout: float = START_TIMEOUT) -> ServerProcess:
        """Start the server and wait until it listens; RuntimeError with its
        stderr when it does not within `timeout` seconds."""
        with open(self.stderr_path, "ab") as stderr:
            self.proc, line = _start(self.command(), timeout, stderr=stderr, env=self.environment())
        if not line.startswith("http://"):
            self.kill()
            raise RuntimeError(
                f"memfs serve did not print its URL (got {line!r}); stderr:\n{self.stderr}"
            )
        self.url = line
        self.port = int(line.rsplit(":", 1)[1])
        return self

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM, wait, SIGKILL if needed; the exit status (None if not running)."""
        proc, self.proc = self.proc, None
        return _end(proc, timeout)

    def kill(self) -> None:
        """SIGKILL: a crash, with no chance to clean up."""
        proc, self.proc = self.proc, None
        _end(proc, 10.0, kill=True)

    def restart(self) -> ServerProcess:
        """Stop and start again on the same database and port."""
        self.stop()
        return self.start()

    def headers(self, *, beta: str | None = BETA) -> dict[str, str]:
        """The API's headers with this server's token."""
        return api_headers(self.token, beta=beta)

    def http(self) -> httpx.Client:
        """A synchronous httpx client with this server's URL and headers."""
        return httpx.Client(base_url=self.url, headers=self.headers(), timeout=10.0)

    def _post(self, path: str, body: dict[str, Any], beta: str = BETA) -> dict[str, Any]:
        with self.http() as client:
            r = client.post(path, json=body, headers={"anthropic-beta": beta})
        r.raise_for_status()
        answer: dict[str, Any] = r.json()
        return answer

    def create_store(self, name: str = "test store", **fields: Any) -> dict[str, Any]:
        """Create a store over HTTP and return its JSON (`["id"]` is its id)."""
        return self._post("/v1/memory_stores", {"name": name, **fields})

    def create_session(
        self, *store_ids: str, read_only: tuple[str, ...] = (), **fields: Any
    ) -> dict[str, Any]:
        """Create a session holding `store_ids` read-write and `read_only`
        read-only; its JSON, whose `sessions_token` (only here) reaches those
        stores as `Authorization: Bearer`."""
        resources = [
            {"type": "memory_store", "memory_store_id": sid, "access": access}
            for sids, access in ((store_ids, ACCESS_READ_WRITE), (read_only, ACCESS_READ_ONLY))
            for sid in sids
        ]
        return self._post("/v1/sessions", {"resources": resources, **fields}, SESSIONS_BETA)

    def set_session_status(self, session_id: str, status: str) -> dict[str, Any]:
        """Set the session's `status` (`running`, `idle`...), memfs serve's own
        extension; the session."""
        return self._post(f"/v1/sessions/{session_id}/status", {"status": status}, SESSIONS_BETA)

    def work_item(self, session: dict[str, Any]) -> dict[str, Any]:
        """The work item a worker's poll would hand out for `session` (as
        `create_session` answers it): `{id, environment_id, data, secret}`."""
        return {
            "id": "work_" + secrets.token_hex(12),
            "environment_id": session["environment_id"],
            "data": {"type": "session", "id": session["id"]},
            "secret": encode_work_item_secret(session["sessions_token"], self.url),
        }

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class FaultProxyProcess:
    """The fault proxy (`python -m memfs.testing.faults`) in a child process,
    in front of `target`, driven over HTTP (docs/testing.md, "`FaultProxyProcess`")."""

    def __init__(self, target: str, *, seed: int | None = None) -> None:
        self.target = target
        self.seed = seed
        self.url = ""
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = START_TIMEOUT) -> FaultProxyProcess:
        """Start the proxy and wait until it listens."""
        cmd = [sys.executable, "-m", "memfs.testing.faults", "--target", self.target]
        if self.seed is not None:
            cmd += ["--seed", str(self.seed)]
        self.proc, self.url = _start(cmd, timeout)
        if not self.url.startswith("http://"):
            self.stop()
            raise RuntimeError(f"the fault proxy did not print its URL (got {self.url!r})")
        return self

    def set(self, **changes: Any) -> dict[str, Any]:
        """Change settings (see `FaultSettings`) and return the new state; an
        unknown name is a TypeError, a bad value a ValueError."""
        r = httpx.post(self.url + CONTROL_PATH, json=changes, timeout=5.0)
        if r.status_code == 400:
            message = r.json().get("error", r.text)
            raise (TypeError if message.startswith("no fault setting") else ValueError)(message)
        r.raise_for_status()
        state: dict[str, Any] = r.json()
        return state

    def reset(self) -> dict[str, Any]:
        """No faults, counters at zero."""
        return self.set(reset=True)

    def state(self) -> dict[str, Any]:
        """`{"settings": ..., "counters": ...}` as JSON values."""
        r = httpx.get(self.url + CONTROL_PATH, timeout=5.0)
        r.raise_for_status()
        state: dict[str, Any] = r.json()
        return state

    def counters(self) -> FaultCounters:
        """What the proxy saw and did since it started or was reset."""
        return FaultCounters.from_json(self.state()["counters"])

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 5 seconds."""
        proc, self.proc = self.proc, None
        _end(proc, 5.0)

    def __enter__(self) -> FaultProxyProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


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
