"""Progress on a terminal: the first download of a large store and a final
sync that takes more than a second show `N/M files` on stderr, one line
rewritten with `\\r` and ended with a newline; never when stderr is a pipe.

A foreground `memfs mount` gets a pseudo-terminal as its stderr (the store
processes inherit it), as it would in a person's shell.
"""

from __future__ import annotations

import os
import pty
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support.faults import FaultProxyProcess
from tests.support.mounts import Mounter, memfs_mounts_under

pytestmark = pytest.mark.fuse

FILES = 230
"""More contents than the 200 above which a first download shows its progress."""


def _seed(server, store_id: str, n: int) -> None:
    with server.http() as client:
        for i in range(n):
            r = client.post(
                f"/v1/memory_stores/{store_id}/memories",
                json={"path": f"/notes/{i:04}.md", "content": f"note {i}\n"},
            )
            r.raise_for_status()


class _Terminal:
    """A pseudo-terminal whose output is collected as it comes."""

    def __init__(self) -> None:
        self.master, self.slave = pty.openpty()
        self.data = b""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.data += chunk

    def text(self) -> str:
        return self.data.decode(errors="replace")

    def close(self) -> None:
        os.close(self.slave)
        self._reader.join(timeout=5)
        os.close(self.master)


def _foreground(mounter: Mounter, store: str, *, stderr, api_url: str | None = None, extra=()):
    env = mounter.env
    if api_url:
        env["MEMFS_API_URL"] = api_url
    args = [sys.executable, "-m", "memfs", "mount", "--store", store]
    args += ["--cache-dir", str(mounter.cache_dir), "--token-file", str(mounter.token_file)]
    proc = subprocess.Popen(
        [*args, *extra],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=stderr,
        env=env,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("mounted "), line
    return proc


def _stop(proc: subprocess.Popen, timeout: float = 90) -> int:
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=timeout)


def _wait_for(predicate, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_first_download_shows_its_progress_on_a_terminal(mounter, memfs_server):
    store_id = memfs_server.create_store("Large")["id"]
    _seed(memfs_server, store_id, FILES)
    path = mounter.root / "large"
    terminal = _Terminal()
    try:
        proc = _foreground(mounter, f"{store_id}={path}", stderr=terminal.slave)
        try:
            done = f"memfs: downloading {store_id}: {FILES}/{FILES} files\n"
            _wait_for(lambda: done.replace("\n", "\r\n") in terminal.text())
        finally:
            assert _stop(proc) == 0
    finally:
        terminal.close()
    out = terminal.text()
    # One line rewritten in place: every count after a carriage return.
    counts = re.findall(rf"\rmemfs: downloading {store_id}: (\d+)/{FILES} files", out)
    assert counts and int(counts[-1]) == FILES, out
    assert [int(c) for c in counts] == sorted(int(c) for c in counts), out
    assert memfs_mounts_under(mounter.tmp) == []


def test_a_slow_final_sync_shows_its_progress_on_a_terminal(mounter, memfs_server):
    store_id = memfs_server.create_store("Slow at stop")["id"]
    path = mounter.root / "slow"
    terminal = _Terminal()
    with FaultProxyProcess(memfs_server.url) as proxy:
        try:
            proc = _foreground(
                mounter, f"{store_id}={path}", stderr=terminal.slave, api_url=proxy.url
            )
            try:
                for i in range(120):
                    (path / f"f{i:03}.md").write_text(f"file {i}\n")
                # 0.4 s a request, 32 at once: the final sync takes about two seconds.
                proxy.set(delay=0.4)
            finally:
                assert _stop(proc) == 0
        finally:
            terminal.close()
    out = terminal.text()
    assert re.search(rf"\rmemfs: final sync of {store_id}: \d+/120 files", out), out
    assert f"memfs: final sync of {store_id}: 120/120 files\r\n" in out, out
    assert memfs_mounts_under(mounter.tmp) == []


def test_no_progress_when_stderr_is_not_a_terminal(mounter, memfs_server, tmp_path: Path):
    store_id = memfs_server.create_store("Large, piped")["id"]
    _seed(memfs_server, store_id, FILES)
    path = mounter.root / "piped"
    stderr = open(tmp_path / "stderr", "w+")  # noqa: SIM115 - the child writes it
    try:
        proc = _foreground(mounter, f"{store_id}={path}", stderr=stderr)
        try:
            _wait_for(lambda: all(s["prefetched"] for s in mounter.status()))
        finally:
            assert _stop(proc) == 0
    finally:
        stderr.close()
    out = (tmp_path / "stderr").read_text()
    assert "\r" not in out
    assert "files" not in out and "downloading" not in out, out
    assert f"mounted {store_id} at {path}" in out  # the log itself is there


def test_no_progress_in_a_json_log_even_on_a_terminal(mounter, memfs_server):
    store_id = memfs_server.create_store("Large, JSON")["id"]
    _seed(memfs_server, store_id, FILES)
    path = mounter.root / "json"
    terminal = _Terminal()
    try:
        proc = _foreground(
            mounter, f"{store_id}={path}", stderr=terminal.slave, extra=("--log-format", "json")
        )
        try:
            _wait_for(lambda: all(s["prefetched"] for s in mounter.status()))
        finally:
            assert _stop(proc) == 0
    finally:
        terminal.close()
    out = terminal.text()
    assert "downloading" not in out and "\r\n" in out, out
    assert not [line for line in out.split("\r\n") if line and not line.startswith("{")], out
