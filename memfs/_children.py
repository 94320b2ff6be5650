"""The processes memfs starts, and the environment they get.

No child of memfs gets a secret by its environment (`SECRET_ENV`: the store
processes get their token on stdin) or systemd's socket (`NOTIFY_ENV`:
readiness is the supervisor's to tell). A store process reads, as its
first line of stdin, a `StoreLaunch` (memfs.control): its spec and its
log file; the environment the supervisor settled for it (log level and
format, runtime folder) is its environment from the start.
"""

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
"""Every variable that may hold a secret: none reaches a child of memfs
(the credentials' sources of memfs.supervisor and `memfs serve`'s token)."""

NOTIFY_ENV = "NOTIFY_SOCKET"

STORE_MODULE = "memfs.mount"
"""The store process's program: `python -m memfs.mount`."""


def child_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """memfs's environment, less what may hold a secret and systemd's socket."""
    drop = {*SECRET_ENV, NOTIFY_ENV}
    return {k: v for k, v in (os.environ if environ is None else environ).items() if k not in drop}


def start_process(
    module: str, env: Mapping[str, str], stderr: TextIO | None = None
) -> subprocess.Popen[str]:
    """`python -m module` in a session of its own, talking over its stdin and
    stdout; `stderr` (a daemon's log, else ours) is closed here once handed over."""
    proc = subprocess.Popen(
        [sys.executable, "-m", module],
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
