"""The processes memfs starts: none gets a secret by its environment (store processes get their
token on stdin) nor systemd's socket (readiness is the supervisor's to tell)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from typing import TextIO

SECRET_ENV = (
    "MEMFS_TOKEN",
    "MEMFS_WORK_ITEM_SECRET",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_WORK_SECRET",
    "MEMFS_SERVE_TOKEN",
)

NOTIFY_ENV = "NOTIFY_SOCKET"

STORE_MODULE = "memfs.mount"


def child_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """memfs's environment, less what may hold a secret and systemd's socket."""
    drop = {*SECRET_ENV, NOTIFY_ENV}
    return {k: v for k, v in (os.environ if environ is None else environ).items() if k not in drop}


def start_process(
    module: str, env: Mapping[str, str], stderr: TextIO | None = None
) -> subprocess.Popen[str]:
    """`python -P -m module` (no import from the working folder), in a session of its own,
    over its stdin and stdout; `stderr` (a daemon's log, else ours) is closed once handed over."""
    proc = subprocess.Popen(
        [sys.executable, "-P", "-m", module],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        env=dict(env),
        start_new_session=True,
        text=True,
    )
    if stderr is not None:
        stderr.close()
    return proc
