"""Stopping session followers from outside (`memfs unmount`), so that no
mount of their sessions appears after it returns (`memfs.supervisor._follow`
says what a follower is and where it runs).

A daemon follower (`memfs mount --daemon`) is a process of its own: SIGTERM
ends it. A foreground one is a task of `memfs mount` or `memfs run`:
`UNFOLLOW_SIGNAL` asks that process to stop it, and nothing else.
Either way the follower abandons a store it is mounting and its session's
file goes.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import time

from ._commands import _running, _wait_gone
from ._follow import FOLLOWER_MODULE
from ._session_records import SessionRecord, session_files

UNFOLLOW_SIGNAL = signal.SIGUSR2
"""Sent to a foreground process that follows a session (`memfs mount`
without `--daemon`, `memfs run`): stop following, keep the rest running."""


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def _is_follower_process(pid: int) -> bool:
    return FOLLOWER_MODULE.encode() in _cmdline(pid)


def _holds(record: SessionRecord, mount_paths: list[str]) -> bool:
    held = {os.path.abspath(p) for p in record.mount_paths or []}
    return any(os.path.abspath(p) in held for p in mount_paths)


def stop_followers(
    folder: str | None = None, *, holding: list[str] | None = None
) -> list[SessionRecord]:
    """Stop the session followers of this machine (only those whose session
    holds one of the mounts `holding`, when given), and wait until each has
    stopped, so that none mounts a store later: one told to stop abandons
    the store it is mounting (its process stopped, its mount gone). Their
    records, as last read before the stop. Their sessions' other mounts
    stay: `memfs unmount` stops them next.

    A daemon follower (`memfs mount --daemon`) gets SIGTERM and is waited
    for until its process has ended; a foreground one (`memfs mount`, `memfs
    run`) gets `UNFOLLOW_SIGNAL` and is waited for until its session's file
    is gone (its follower stopped) or its process has ended. The wait is as
    long as the follower's own bounds: a read of the session, a store's
    start, a detached store's final sync."""
    stopped = []
    for path, record in session_files(folder):
        if holding is not None and not _holds(record, holding):
            continue
        if record.daemon:
            if not _is_follower_process(record.pid):
                continue
            with contextlib.suppress(ProcessLookupError):
                os.kill(record.pid, signal.SIGTERM)
            _wait_gone(record.pid, math.inf)
        else:
            if b"memfs" not in _cmdline(record.pid):
                continue
            with contextlib.suppress(ProcessLookupError):
                os.kill(record.pid, UNFOLLOW_SIGNAL)
            while os.path.exists(path) and _running(record.pid):
                time.sleep(0.05)
        stopped.append(record)
    return stopped
