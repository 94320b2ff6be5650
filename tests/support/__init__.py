"""Helpers the tests share: a real `memfs serve` subprocess and the API's headers.

Nothing here mocks the store: tests talk HTTP to a real server on loopback,
backed by a real SQLite file.
"""

from __future__ import annotations

import base64
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from memfs.api import ANTHROPIC_VERSION, BETA

TEST_TOKEN = "test-token"
START_TIMEOUT = 15.0


def standard_base64_secret(obj: dict) -> str:
    """A work item secret in the standard base64 alphabet, with at least one
    '+' and one '/' in it (a URL-safe decoder alone would misread it), padding
    dropped and whitespace around, as a file or a variable may hold it."""
    for i in range(64):
        text = base64.standard_b64encode(json.dumps({**obj, "pad": "~?" * i}).encode()).decode()
        if "+" in text and "/" in text:
            return "\n  " + text.rstrip("=") + "\n"
    raise AssertionError("no encoding with both '+' and '/'")


def api_headers(token: str = TEST_TOKEN, *, beta: str | None = BETA) -> dict[str, str]:
    """The headers every request of the contract carries, with an x-api-key."""
    headers = {"x-api-key": token, "anthropic-version": ANTHROPIC_VERSION}
    if beta is not None:
        headers["anthropic-beta"] = beta
    return headers


class ServerProcess:
    """`python -m memfs serve` on 127.0.0.1 with its own SQLite file.

    `.url` is read from the first stdout line. `restart()` keeps the database
    and the port, so clients holding the URL keep working; `stop()` sends
    SIGTERM (then SIGKILL after a timeout) and returns the exit status."""

    def __init__(
        self,
        db_path: Path,
        *,
        token: str = TEST_TOKEN,
        extra_args: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.db_path = Path(db_path)
        self.token = token
        self.extra_args = list(extra_args or [])
        self.env = env
        self.port = 0
        self.url = ""
        self.proc: subprocess.Popen[bytes] | None = None
        self.stderr_path = self.db_path.with_suffix(".stderr.log")

    @property
    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "memfs", "serve", "--host", "127.0.0.1"]
        cmd += ["--port", str(self.port), "--db", str(self.db_path)]
        if self.token:
            cmd += ["--token", self.token]
        return cmd + self.extra_args

    def start(self) -> ServerProcess:
        env = dict(os.environ)
        env.pop("MEMFS_SERVE_TOKEN", None)
        env.update(self.env or {})
        stderr = open(self.stderr_path, "ab")  # noqa: SIM115 (the child owns it)
        try:
            self.proc = subprocess.Popen(
                self.command(), stdout=subprocess.PIPE, stderr=stderr, env=env
            )
        finally:
            stderr.close()
        line = self._first_line()
        if not line.startswith("http://"):
            self.kill()
            raise RuntimeError(
                f"memfs serve did not print its URL (got {line!r}); stderr:\n{self.stderr}"
            )
        self.url = line
        self.port = int(line.rsplit(":", 1)[1])
        return self

    def _first_line(self) -> str:
        assert self.proc is not None and self.proc.stdout is not None
        selector = selectors.DefaultSelector()
        selector.register(self.proc.stdout, selectors.EVENT_READ)
        data = b""
        deadline = time.monotonic() + START_TIMEOUT
        try:
            while b"\n" not in data:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    break
                chunk = os.read(self.proc.stdout.fileno(), 4096)
                if not chunk:
                    break
                data += chunk
        finally:
            selector.close()
        return data.decode(errors="replace").split("\n", 1)[0].strip()

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM, wait, SIGKILL if needed; the exit status (None if never started)."""
        if self.proc is None:
            return None
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout:
            proc.stdout.close()
        return proc.returncode

    def kill(self) -> None:
        """SIGKILL: a crash, with no chance to clean up."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if proc.stdout:
            proc.stdout.close()

    def restart(self) -> ServerProcess:
        """Stop and start again on the same database and port."""
        self.stop()
        return self.start()

    def headers(self, **kw) -> dict[str, str]:
        return api_headers(self.token, **kw)

    def http(self) -> httpx.Client:
        """A synchronous httpx client with this server's URL and headers."""
        return httpx.Client(base_url=self.url, headers=self.headers(), timeout=10.0)

    def create_store(self, name: str = "test store", **fields) -> dict:
        """Create a store over HTTP and return its JSON."""
        with self.http() as client:
            r = client.post("/v1/memory_stores", json={"name": name, **fields})
        r.raise_for_status()
        return r.json()


def conflict_files(folder) -> list[Path]:
    """The conflict copies under a store's conflicts folder (one folder per conflict)."""
    return sorted(p for p in Path(folder).rglob("*") if p.is_file())


def serve_accepting(db_path: Path, tokens: list[str]) -> ServerProcess:
    """A started `memfs serve` that accepts `tokens`, given in its environment
    (MEMFS_SERVE_TOKEN) so that none shows on its command line; its HTTP
    helpers send the first one."""
    server = ServerProcess(db_path, token="", env={"MEMFS_SERVE_TOKEN": ",".join(tokens)})
    server.start()
    server.token = tokens[0]
    return server


def cmdlines_holding(values: list[bytes]) -> list[str]:
    """`pid: cmdline` of every process whose command line (what `ps` shows to
    every user) holds one of `values`."""
    hits = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if any(v in cmdline for v in values):
            hits.append(f"{entry}: {cmdline!r}")
    return hits
