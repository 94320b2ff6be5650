"""The processes memfs starts: the environment they get, and store processes
started before they are needed.

No child of memfs gets a secret by its environment (`SECRET_ENV`: the store
processes get their token on stdin) or systemd's socket (`NOTIFY_ENV`:
readiness is the supervisor's to tell).

A store process spends a quarter of a second importing trio, pyfuse3 and
httpx before it can read its spec; the command line spends a good part of
that importing itself and settling its options before it has a spec to give.
So `memfs mount` and `memfs run` start their store processes first thing
(`EarlyStores`), and the two overlap. A store process reads, as its first
line of stdin, a `StoreLaunch` (memfs.control): its spec, the environment
the supervisor settled for it and its log file; one that reads the end of
its stdin instead was never needed and exits 0 without a word.

This module imports only the standard library: it runs before the rest of
memfs is imported.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
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
EARLY_COMMANDS = ("mount", "run")
"""The commands that start store processes."""
MAX_STORES = 8
"""memfs.api's `MAX_STORES_PER_SESSION`, written out: this module runs before
memfs.api is imported (a test keeps the two equal)."""


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


class EarlyStores:
    """Store processes started before their specs exist, each waiting for its
    launch line; `take` hands one over, or starts one when none is left."""

    def __init__(self, waiting: list[subprocess.Popen[str]] | None = None) -> None:
        self._waiting: list[subprocess.Popen[str]] = waiting or []

    @classmethod
    def for_command(cls, argv: Sequence[str]) -> EarlyStores:
        """As many store processes as `argv` (the command line, without the
        program) names stores, for the commands that mount; none for the
        others, or when asked for help."""
        early = cls()
        words = list(argv)
        if "--" in words:  # what follows is `memfs run`'s command, not memfs's
            words = words[: words.index("--")]
        command = next((w for w in words if not w.startswith("-")), None)
        if command not in EARLY_COMMANDS or "-h" in words or "--help" in words:
            return early
        stores = sum(w == "--store" or w.startswith("--store=") for w in words)
        with contextlib.suppress(OSError):
            for _ in range(min(max(stores, 1), MAX_STORES)):
                early._waiting.append(start_process(STORE_MODULE, child_env()))
        return early

    def __len__(self) -> int:
        """How many are waiting."""
        return len(self._waiting)

    def take(self) -> subprocess.Popen[str]:
        """A store process waiting for its launch line."""
        if self._waiting:
            return self._waiting.pop(0)
        return start_process(STORE_MODULE, child_env())

    def close(self) -> None:
        """End the store processes nobody took: they hold nothing yet."""
        while self._waiting:
            proc = self._waiting.pop()
            with contextlib.suppress(OSError):
                proc.kill()
            proc.wait()
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
