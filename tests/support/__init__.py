"""Helpers the tests share: a real `memfs serve` subprocess and the API's headers.

Nothing here mocks the store: tests talk HTTP to a real server on loopback,
backed by a real SQLite file. The server and the fault proxy are the public
ones of `memfs.testing` (docs/testing.md), with this suite's fixed token.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

from memfs.api import BETA
from memfs.testing import ServerProcess as _ServerProcess
from memfs.testing import api_headers as _api_headers

TEST_TOKEN = "test-token"


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
    return _api_headers(token, beta=beta)


class ServerProcess(_ServerProcess):
    """`memfs.testing.ServerProcess` with memfs's own tests' default: the
    token `TEST_TOKEN` (which `api_headers()` sends) instead of a random one."""

    def __init__(self, db_path: Path, *, token: str = TEST_TOKEN, **kwargs: Any) -> None:
        super().__init__(db_path, token=token, **kwargs)


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
