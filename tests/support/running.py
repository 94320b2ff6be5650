"""`memfs run` for tests: its command line with a `Mounter`'s folders, the
store's contents as the server holds them, and a wait for a file to appear."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from tests.support import ServerProcess
from tests.support.mounts import Mounter


def run_argv(
    mounter: Mounter, store_id: str, path: Path, *extra: str, api_url: str | None = None
) -> list[str]:
    """`memfs run` mounting `store_id` at `path` with the mounter's cache and
    token, `extra` options, and a final `--`: append the command."""
    argv = [sys.executable, "-m", "memfs", "run", "--store", f"{store_id}={path}"]
    argv += ["--root", str(mounter.root), "--cache-dir", str(mounter.cache_dir)]
    argv += ["--token-file", str(mounter.token_file), "--final-sync-timeout", "20"]
    if api_url:
        argv += ["--api-url", api_url]
    return [*argv, *extra, "--"]


def remote_files(server: ServerProcess, store_id: str) -> dict[str, str]:
    """path -> content of every memory the server holds for the store."""
    out: dict[str, str] = {}
    page = None
    with server.http() as http:
        while True:
            params: dict[str, str | int] = {"view": "full", "limit": 20}
            if page:
                params["page"] = page
            body = http.get(f"/v1/memory_stores/{store_id}/memories", params=params).json()
            out.update({m["path"]: m["content"] for m in body["data"]})
            page = body.get("next_page")
            if not page:
                return out


def wait_for_file(path: Path, timeout: float, what: str, alive=lambda: True) -> None:
    """Until `path` exists; AssertionError after `timeout` s or once `alive()` is false."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline or not alive():
            raise AssertionError(f"{what}: {path} did not appear")
        time.sleep(0.05)
