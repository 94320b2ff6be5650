"""docker/entrypoint.sh without docker: the real script, the real `memfs` (from
the virtualenv, on PATH) against a real `memfs serve`, and an agent (`sleep`)
in place of the container's command.

The entrypoint becomes `memfs run`, which lives as long as the agent (the
final sync runs when the agent ends), and /proc/<pid>/environ shows what a
process was started with, whatever `unset` did later: no process that
outlives the mount may have been started with a credential in its
environment."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import (
    ServerProcess,
    cmdlines_holding,
    serve_accepting,
    standard_base64_secret,
)
from tests.support.mounts import CREDENTIAL_ENV, Mounter

ROOT = Path(__file__).resolve().parents[2]
ENTRYPOINT = ROOT / "docker" / "entrypoint.sh"
API_KEY = "sk-ant-api03-" + secrets.token_urlsafe(24)
TOKEN = "entry-tok-" + secrets.token_hex(12)
SERVE_TOKEN = "serve-tok-" + secrets.token_hex(12)
SECRET_NAMES = {
    "MEMFS_TOKEN",
    "MEMFS_WORK_ITEM_SECRET",
    "MEMFS_SERVE_TOKEN",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_WORK_SECRET",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    db = tmp_path_factory.mktemp("serve") / "store.sqlite3"
    server = serve_accepting(db, [API_KEY, TOKEN])
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def mounter(server: ServerProcess, tmp_path: Path) -> Iterator[Mounter]:
    m = Mounter(server, tmp_path)
    try:
        yield m
    finally:
        m.cleanup()


def _environ(pid: int) -> dict[bytes, bytes]:
    with open(f"/proc/{pid}/environ", "rb") as f:
        items = [i for i in f.read().split(b"\0") if i]
    return dict(i.split(b"=", 1) if b"=" in i else (i, b"") for i in items)


def _command(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")[0]
    except OSError:
        return b""


def _children(pid: int, command: bytes) -> list[int]:
    """The child processes of `pid` that run `command`."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split() if _command(int(c)) == command]
    except OSError:
        return []


def _wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _assert_clean(pid: int, values: list[bytes]) -> None:
    environ = _environ(pid)
    assert SECRET_NAMES.isdisjoint(k.decode() for k in environ), sorted(environ)
    assert not any(v in item for item in environ.values() for v in values)


class Entrypoint:
    """The entrypoint as a container would run it, in this test's folders."""

    def __init__(self, mounter: Mounter, server: ServerProcess, tmp: Path) -> None:
        self.mounter = mounter
        self.server = server
        self.tmpdir = tmp / "tmpdir"
        self.tmpdir.mkdir()
        self.stderr = tmp / "entrypoint.stderr"
        self.store_id = server.create_store("entrypoint")["id"]
        self.path = mounter.root / "s"
        self.proc: subprocess.Popen | None = None

    def env(self, credentials: dict[str, str]) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in CREDENTIAL_ENV}
        env.pop("MEMFS_API_URL", None)
        env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}"
        env["MEMFS_RUNTIME_DIR"] = str(self.mounter.runtime_dir)
        env["MEMFS_RESOURCES"] = str(self.tmpdir / "no-resources.json")
        env["MEMFS_STORES"] = f"{self.store_id}={self.path}"
        env["XDG_CACHE_HOME"] = str(self.mounter.cache_dir)
        env["TMPDIR"] = str(self.tmpdir)
        env["MEMFS_SERVE_TOKEN"] = SERVE_TOKEN  # not for memfs mount: it must go too
        return {**env, **credentials}

    def start(self, credentials: dict[str, str], *agent: str) -> subprocess.Popen:
        with open(self.stderr, "wb") as err:
            self.proc = subprocess.Popen(
                ["bash", str(ENTRYPOINT), *(agent or ("sleep", "300"))],
                env=self.env(credentials),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        return self.proc

    def stop(self) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(90)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()

    def cleanup(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.stop()
        # As root the cache is /var/cache/memfs whatever XDG_CACHE_HOME says.
        if os.geteuid() == 0:
            shutil.rmtree(f"/var/cache/memfs/{self.store_id}", ignore_errors=True)


@pytest.fixture
def entrypoint(mounter, server, tmp_path) -> Iterator[Entrypoint]:
    e = Entrypoint(mounter, server, tmp_path)
    try:
        yield e
    finally:
        e.cleanup()


def _credentials(server: ServerProcess, case: str) -> dict[str, str]:
    if case == "MEMFS_TOKEN":
        return {"MEMFS_TOKEN": TOKEN, "MEMFS_API_URL": server.url}
    if case == "ANTHROPIC_API_KEY":
        return {"ANTHROPIC_API_KEY": API_KEY, "ANTHROPIC_BASE_URL": server.url}
    secret = standard_base64_secret({"sessions_token": TOKEN, "api_base_url": server.url})
    if case == "ANTHROPIC_WORK_SECRET beside the host's ANTHROPIC_API_KEY":
        # A worker host's own key, which the server does not take: memfs mount
        # uses the secret, so the entrypoint must hand over the secret too.
        host_key = "sk-ant-api03-" + secrets.token_urlsafe(24)
        return {
            "ANTHROPIC_WORK_SECRET": secret,
            "ANTHROPIC_API_KEY": host_key,
            "ANTHROPIC_BASE_URL": server.url,
        }
    return {"ANTHROPIC_WORK_SECRET": secret}  # the secret is also the only source of the URL


# memfs serve records each token of its own as an API key (`api_actor`),
# whichever header carries it; only a sessions token it minted is a session.
ACTORS = {
    "MEMFS_TOKEN": "api_actor",
    "ANTHROPIC_API_KEY": "api_actor",
    "ANTHROPIC_WORK_SECRET": "api_actor",
    "ANTHROPIC_WORK_SECRET beside the host's ANTHROPIC_API_KEY": "api_actor",
}


@pytest.mark.parametrize("case", list(ACTORS))
def test_no_long_lived_process_holds_a_credential(case, entrypoint, server, mounter):
    credentials = _credentials(server, case)
    values = [v.strip().encode() for k, v in credentials.items() if k in SECRET_NAMES]
    values.append(SERVE_TOKEN.encode())
    proc = entrypoint.start(credentials)
    marker = entrypoint.path / ".anthropic-memory-store"
    _wait_for(
        lambda: marker.exists() or proc.poll() is not None, 60, "the entrypoint to mount the store"
    )
    assert proc.poll() is None, entrypoint.stderr.read_text()
    # The entrypoint became `memfs run` (the same pid): the agent is its child.
    (agent,) = _wait_for(lambda: _children(proc.pid, b"sleep"), 30, "the agent to start")

    _assert_clean(proc.pid, values)  # the entrypoint, which waits for the agent
    _assert_clean(agent, values)
    (store,) = mounter.store_pids()
    _assert_clean(store, values)
    assert cmdlines_holding(values) == []
    assert list(entrypoint.tmpdir.iterdir()) == [], "the credentials' file is gone"

    (entrypoint.path / "from-the-agent.md").write_text("kept")
    assert entrypoint.stop() == 128 + signal.SIGTERM  # the agent's status
    err = entrypoint.stderr.read_text()
    assert "Traceback" not in err and not any(v.decode() in err for v in values)
    assert not entrypoint.path.exists()
    with server.http() as http:
        r = http.get(f"/v1/memory_stores/{entrypoint.store_id}/memory_versions")
    (version,) = r.json()["data"]
    assert (version["path"], version["created_by"]["type"]) == ("/from-the-agent.md", ACTORS[case])


def test_an_agent_started_without_memory_holds_no_credential(entrypoint, server, tmp_path):
    """MEMFS_OPTIONAL=1 and a token the store refuses: the agent runs in the
    entrypoint's place (exec), still without the credentials."""
    credentials = {"MEMFS_TOKEN": "refused-" + TOKEN, "MEMFS_API_URL": server.url}
    credentials["MEMFS_OPTIONAL"] = "1"
    proc = entrypoint.start(credentials)

    _wait_for(
        lambda: proc.poll() is not None or _command(proc.pid) == b"sleep", 60, "the agent to start"
    )
    assert proc.poll() is None, entrypoint.stderr.read_text()
    _assert_clean(proc.pid, [TOKEN.encode(), SERVE_TOKEN.encode()])
    assert "starting without memory" in entrypoint.stderr.read_text()
    assert list(entrypoint.tmpdir.iterdir()) == []
    proc.kill()
    proc.wait()


def test_an_optional_mount_that_works_runs_the_agent_under_memfs_run(entrypoint, server, tmp_path):
    """MEMFS_OPTIONAL=1 keeps the entrypoint's shell as `memfs run`'s parent:
    the agent's writes still reach the store and its status still comes out."""
    credentials = {"MEMFS_TOKEN": TOKEN, "MEMFS_API_URL": server.url, "MEMFS_OPTIONAL": "1"}
    script = f"echo optional > {entrypoint.path}/optional.md; exit 7"
    proc = entrypoint.start(credentials, "sh", "-c", script)
    assert proc.wait(90) == 7, entrypoint.stderr.read_text()
    assert "without memory" not in entrypoint.stderr.read_text()
    assert list(entrypoint.tmpdir.iterdir()) == []
    with server.http() as http:
        r = http.get(f"/v1/memory_stores/{entrypoint.store_id}/memories", params={"view": "full"})
    assert [(m["path"], m["content"]) for m in r.json()["data"]] == [("/optional.md", "optional\n")]
