"""`memfs unmount`, `memfs sync` and `memfs status`: the commands that talk
to running store processes over their control sockets."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import TypeVar

from .._exceptions import ConfigError, MemfsError, MountError, SyncError
from ..control import (
    ControlClient,
    ErrorReply,
    PushFilesReply,
    StatusReply,
    StopReply,
    StoreState,
    SyncReply,
    process_alive,
    running_stores,
    runtime_dir,
)
from ..mount import (
    force_unmount,
    is_stale_mount,
    memfs_mounts,
    mounted_source,
    remove_mount_folder,
)
from ._follow import FOLLOWER_MODULE, SessionRecord, session_files
from ._supervisor import GONE_TIMEOUT, exited

log = logging.getLogger("memfs.supervisor")

UNFOLLOW_SIGNAL = signal.SIGUSR2
"""Asks a foreground process that follows a session to stop following only."""

_R = TypeVar("_R", StatusReply, SyncReply, PushFilesReply)


def _at(stores: list[StoreState], path: str) -> list[StoreState]:
    return [s for s in stores if os.path.abspath(s.mount_path) == path]


def unmount(paths: list[str], *, all_: bool) -> int:
    """Stop the store processes of these mount paths with their final sync."""
    if not paths and not all_:
        raise ConfigError("name the mount paths to unmount, or give --all")
    stores = running_stores()
    targets: list[StoreState] = []
    stale: list[str] = []
    if all_:
        targets = stores
        stale = [p for p in memfs_mounts() if is_stale_mount(p) and not _at(stores, p)]
    else:
        for p in paths:
            real = os.path.abspath(p)
            match = _at(stores, real)
            if match:
                targets += match
            elif (mounted_source(real) or "").startswith("memfs:") and is_stale_mount(real):
                stale.append(real)
            else:
                raise MountError(not_listed(real) or f"no memfs mount is running at {real}")
    import trio

    code = 0
    for store in targets:
        try:
            reply = ControlClient(store).stop(by="memfs unmount")
        except SyncError as e:
            log.error("%s", e, extra={"event": "stop_unanswered", "store_id": store.store_id})
            code = 1
            continue
        if not reply.ok:
            code = 1
        if isinstance(reply, StopReply):
            for path in reply.not_uploaded:
                sys.stderr.write(f"memfs: not uploaded from {store.mount_path}: {path}\n")
        trio.run(exited, store.pid, GONE_TIMEOUT)
        print(f"unmounted {store.mount_path}")
    for point in stale:
        if not force_unmount(point):
            sys.stderr.write(f"memfs: cannot unmount {point}: only its user or root can\n")
            code = 1
            continue
        remove_mount_folder(point)
        print(f"cleaned up a stale mount at {point}")
    return code


def not_listed(path: str | None = None) -> str | None:
    """Why no store process of this runtime folder answers for `path` (None:
    for any mount) although a memfs mount holds it: one sentence, or None."""
    listed = {os.path.abspath(s.mount_path) for s in running_stores()}
    path = os.path.abspath(path) if path else None
    for point in memfs_mounts():
        inside = path is None or path == point or path.startswith(point.rstrip("/") + "/")
        if point in listed or not inside:
            continue
        if is_stale_mount(point):
            return f"{point} is a memfs mount whose process is gone: memfs unmount {point} cleans it up"
        return (
            f"{point} is a memfs mount started with another runtime folder than "
            f"{runtime_dir()}: set MEMFS_RUNTIME_DIR to that one"
        )
    return None


def sync(paths: list[str]) -> list[tuple[StoreState, SyncReply | ErrorReply]]:
    """A pass now in each store mounted at `paths` (default: all), answered when done."""
    stores = running_stores()
    if paths:
        chosen = []
        for p in paths:
            match = _at(stores, os.path.abspath(p))
            if not match:
                why = not_listed(p)
                raise MountError(why or f"no memfs mount is running at {os.path.abspath(p)}")
            chosen += match
        stores = chosen
    if not stores:
        why = not_listed()
        raise MountError("no memfs mounts are running" + (f"; {why}" if why else ""))
    return _ask_each(stores, ControlClient.sync)


def file_in_mount(path: str) -> tuple[StoreState, str] | None:
    """The running store whose mount holds `path`, and its memory path there."""
    real = os.path.realpath(path)
    for store in running_stores():
        top = os.path.realpath(store.mount_path)
        if real.startswith(top.rstrip("/") + "/"):
            return store, "/" + os.path.relpath(real, top)
    return None


def push_files(store: StoreState, paths: list[str], timeout: float) -> PushFilesReply | ErrorReply:
    """These memory paths of `store` pushed now, each confirmed (or not) within `timeout` s."""
    ((_, reply),) = _ask_each([store], lambda c: c.push_files(paths, timeout=timeout))
    return reply


def status() -> list[tuple[StoreState, StatusReply | ErrorReply]]:
    return _ask_each(running_stores(), ControlClient.status)


def _ask_each(
    stores: list[StoreState], ask: Callable[[ControlClient], _R | ErrorReply]
) -> list[tuple[StoreState, _R | ErrorReply]]:
    """Each store's reply; one that cannot be asked gets an ErrorReply saying why."""
    results: list[tuple[StoreState, _R | ErrorReply]] = []
    for store in stores:
        try:
            reply = ask(ControlClient(store))
        except MemfsError as e:
            reply = ErrorReply(str(e))
        results.append((store, reply))
    return results


def stop_followers(
    folder: str | None = None, *, holding: list[str] | None = None
) -> list[SessionRecord]:
    """Stop the session followers of this machine (only those whose session
    holds one of the mounts `holding`, when given) and wait until each has
    stopped, so that none mounts a store later; their records. A daemon
    follower gets SIGTERM, a foreground one `UNFOLLOW_SIGNAL`."""
    wanted = {os.path.abspath(p) for p in holding or []}
    stopped = []
    for path, record in session_files(folder):
        held = {os.path.abspath(p) for p in record.mount_paths or []}
        if holding is not None and not held & wanted:
            continue
        try:
            with open(f"/proc/{record.pid}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if (FOLLOWER_MODULE.encode() if record.daemon else b"memfs") not in cmdline:
            continue
        with contextlib.suppress(ProcessLookupError):
            os.kill(record.pid, signal.SIGTERM if record.daemon else UNFOLLOW_SIGNAL)
        while (record.daemon or os.path.exists(path)) and process_alive(record.pid):
            time.sleep(0.05)
        stopped.append(record)
    return stopped
