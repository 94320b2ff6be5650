"""One process per store, under one supervisor (pyfuse3 holds one FUSE
session per process).

The supervisor starts a store process for each spec (`python -m
memfs.mount`, the spec with the token on its stdin, no secret in its
environment); waits until every one says READY, or stops the others and
fails naming the store and the cause; and then either returns (`--daemon`)
or waits for SIGTERM/SIGINT and passes it on, exiting 0 only when every
store uploaded everything. `memfs run` ends with `final_sync`, which asks
every store at once over its control socket, as `memfs unmount` does, to
learn what each could not upload.

In the foreground, a store process's stdin stays open as a lifeline: when
the supervisor dies, by any signal, the store process reads its end and
stops with its final sync.

While it runs, a store can be added (`add`: its process started and READY
awaited, as for the first ones) or removed (`remove`: its final sync, as
`final_sync` does it for all): the session follower (`_follow`) does so for
stores attached to or detached from its session, as a task of the trio
program that waits in the foreground (`wait`, and `memfs run`'s wait).

What runs at once is trio's, on no thread: the READY wait reads every
child's stdout in a task of its own, the final syncs and the waits for
stopped stores run in one nursery (`_each_at_once`), a foreground wait runs
the follower beside its watch. What runs alone is a plain blocking call
(starting a process, the metrics endpoint's READY).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import signal
import subprocess
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING, Any, Protocol, TextIO, TypeVar

from .._children import STORE_MODULE, child_env, start_process
from .._exceptions import MountError, SyncError
from .._logging import LogFormat
from .._private import ensure_private_dir, open_log_file
from ..api import check_store_id
from ..control import (
    ControlClient,
    ErrorReply,
    StoreLaunch,
    StoreSpec,
    StoreState,
    socket_path,
    state_path,
)
from ..mount import force_unmount
from ._notify import notify

if TYPE_CHECKING:
    import trio

log = logging.getLogger("memfs.supervisor")

T = TypeVar("T")

READY_TIMEOUT = 300.0
FOLLOWER_CHECK = 0.2
"""Seconds between two looks of a foreground wait at its flags, its stores and its follower."""
STOP_MARGIN = 30.0
"""How much longer than its final sync bound a store process may take to stop before it is killed."""


@dataclass
class _Child:
    spec: StoreSpec
    proc: subprocess.Popen[str]
    ready: bool = False
    error: str | None = None
    reported: bool = False
    """Its failure was logged already (foreground only)."""

    def state(self) -> StoreState:
        """How `memfs unmount` would find it: its control socket and pid."""
        socket = socket_path(self.spec.runtime_dir, self.spec.store_id, self.spec.cache_dir)
        return StoreState(self.spec.store_id, self.spec.mount_path, self.proc.pid, socket)


class Follower(Protocol):
    """What the supervisor needs of a session follower: to run it beside its
    wait, and to stop it (letting what it is doing finish) before the stores
    stop."""

    @property
    def session_id(self) -> str: ...

    async def follow(self) -> None:
        """Follow until `stop_soon`; the follower is then no more the supervisor's."""

    def stop_soon(self) -> None: ...

    def drop(self) -> None:
        """No more the supervisor's, without having followed (its wait never ran)."""


@dataclass
class FinalSync:
    """What the final sync of one store left behind."""

    spec: StoreSpec
    not_uploaded: list[str] = field(default_factory=list)
    """The files the store does not hold: they stay in the cache for its next mount."""
    failure: str | None = None
    """Why the final sync could not be confirmed (the store process was gone,
    or did not answer); None when it answered."""
    sync_error: str | None = None
    """Why the final sync's pass failed, as the store process logged it
    (after a detach: the API's 403); with nothing left behind, nothing was lost."""

    @property
    def ok(self) -> bool:
        return not self.not_uploaded and self.failure is None


class Supervisor:
    """Starts one store process per spec and sees them through to the end."""

    def __init__(
        self,
        specs: list[StoreSpec],
        *,
        daemon: bool = False,
        log_level: str = "INFO",
        metrics_addr: str | None = None,
        log_format: LogFormat = "text",
    ) -> None:
        self.specs = specs
        self.daemon = daemon
        self.log_level = log_level
        self.metrics_addr = metrics_addr
        self.log_format = log_format
        self.children: list[_Child] = []
        self.metrics: subprocess.Popen[str] | None = None
        self._stop_asked = False
        self._unfollow_asked = False
        self._old_handlers: dict[int, Any] | None = None
        self.removed: list[FinalSync] = []
        """The final syncs of the stores `remove` stopped (detached mid-session), in order."""
        self.follower: Follower | None = None
        """A session follower that may add and remove stores, run by the
        foreground wait (`run_follower`): with one, a foreground `wait` goes
        on when no store runs (one may be attached)."""

    def _start(self, spec: StoreSpec) -> _Child:
        spec = dataclasses.replace(spec, follow_parent=not self.daemon)
        env = {
            "MEMFS_LOG_LEVEL": self.log_level,
            "MEMFS_LOG_FORMAT": self.log_format,
            "MEMFS_RUNTIME_DIR": spec.runtime_dir,
        }
        log_file = None
        if self.daemon:
            # The store process opens its log itself, in the folder checked here.
            ensure_private_dir(spec.cache_dir, "cache folder", follow=True)
            store_dir = os.path.join(spec.cache_dir, check_store_id(spec.store_id))
            ensure_private_dir(store_dir, "cache folder")
            log_file = os.path.join(store_dir, "memfs.log")
        proc = start_process(STORE_MODULE, {**child_env(), **env})
        assert proc.stdin is not None
        # A process that is gone already (it could not even import memfs) is
        # reported by start_all, with its exit status, as one that never said READY.
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.write(StoreLaunch(spec, log_file).to_json() + "\n")
            proc.stdin.flush()
            if self.daemon:
                proc.stdin.close()
        return _Child(spec, proc)

    @staticmethod
    def _daemon_log(folder: str, name: str) -> TextIO:
        """A daemon's log file (its stderr), 0600 in a private folder."""
        ensure_private_dir(folder, "cache folder", follow=True)
        return os.fdopen(open_log_file(os.path.join(folder, name), follow=True), "a")

    def start_all(self) -> None:
        """Start every store and wait for READY; on any failure stop the rest and raise."""
        try:
            for spec in self.specs:
                self.children.append(self._start(spec))
        except BaseException:
            self.stop_all()  # those that have their specs already would mount
            raise
        failed = self._await_ready(self.children)
        if failed:
            self.stop_all()
            raise self._mount_error(failed[0])
        if self.metrics_addr:
            self._start_metrics(self.metrics_addr)
        if not self.daemon:
            notify("READY=1")

    def _await_ready(self, children: list[_Child]) -> list[_Child]:
        """Wait until each of `children` says READY or fails (at most
        READY_TIMEOUT), saying each WAITING line of theirs meanwhile; those
        that did not become ready."""
        import trio

        trio.run(self._answers, children, None)
        failed = [c for c in children if not c.ready]
        if not failed:
            for child in children:
                if child.proc.stdout is not None:
                    child.proc.stdout.close()
        return failed

    async def _answers(self, children: list[_Child], abandon: trio.Event | None) -> None:
        """Each child's answer, read at once, until all have answered, the
        wait is over or `abandon` is set."""
        import trio

        async with trio.open_nursery() as nursery:
            if abandon is not None:
                nursery.start_soon(_cancel_when_set, abandon, nursery.cancel_scope)
            with trio.move_on_after(READY_TIMEOUT):
                async with trio.open_nursery() as readers:
                    for child in children:
                        readers.start_soon(self._answer, child)
            nursery.cancel_scope.cancel()

    async def _answer(self, child: _Child) -> None:
        import trio

        assert child.proc.stdout is not None
        # Read unbuffered: a line left in a file object's buffer would wake no wait.
        fd = child.proc.stdout.fileno()
        partial = b""
        answer = None
        while answer is None:
            await trio.lowlevel.wait_readable(fd)
            chunk = os.read(fd, 65536)
            *lines, partial = (partial + chunk).split(b"\n")
            if not chunk:
                lines.append(partial)  # its last words, or b"": it exited
            answer = self._waiting_said(child, lines)
        if answer.startswith("READY"):
            child.ready = True
        else:
            error = answer[6:].strip() if answer.startswith("ERROR ") else None
            child.error = error or f"the store process exited ({child.proc.wait()})"

    @staticmethod
    def _waiting_said(child: _Child, lines: list[bytes]) -> str | None:
        """Say each WAITING line of a starting store process; its first other
        line (READY, ERROR or its end), None while it has said none yet."""
        for raw in lines:
            line = raw.decode("utf-8", "replace")
            if not line.startswith("WAITING "):
                return line
            log.warning(
                "%s",
                line[8:].strip(),
                extra={"event": "waiting_for_api", "store_id": child.spec.store_id},
            )
        return None

    @staticmethod
    def _mount_error(child: _Child) -> MountError:
        cause = child.error or f"it did not become ready within {READY_TIMEOUT:.0f} s"
        if child.spec.store_id in cause and child.spec.mount_path in cause:
            return MountError(cause)
        return MountError(
            f"store {child.spec.store_id} could not be mounted at {child.spec.mount_path}: {cause}"
        )

    async def add(self, spec: StoreSpec, abandon: trio.Event | None = None) -> bool:
        """Mount one more store while the others run: start its process and
        wait for its READY; MountError, its process stopped, when it cannot be
        mounted. When `abandon` is set before its READY (the session follower
        was told to stop), its process is stopped, whatever it mounted goes
        with it, and False is returned: nothing of it is left running."""
        child = self._start(spec)
        try:
            await self._answers([child], abandon)
        finally:
            if not child.ready and child.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    child.proc.send_signal(signal.SIGTERM)
        if not child.ready:
            await self._stopped(child)
            if child.error is None and abandon is not None and abandon.is_set():
                return False
            raise self._mount_error(child)
        assert child.proc.stdout is not None
        child.proc.stdout.close()
        self.specs.append(spec)
        self.children.append(child)
        return True

    async def remove(self, mount_path: str) -> FinalSync | None:
        """Stop the store this supervisor mounted at `mount_path` with its
        final sync, and forget it; what the final sync left behind. None when
        no store of this supervisor is mounted there."""
        child = next((c for c in self.children if c.spec.mount_path == mount_path), None)
        if child is None:
            return None
        self.children.remove(child)
        self.specs[:] = [s for s in self.specs if s.mount_path != mount_path]
        result = await self._final_sync(child)
        self.removed.append(result)
        return result

    async def run_follower(self, until: Callable[[], Awaitable[None]]) -> None:
        """Run the session follower, if any, while `until` runs; then stop it
        and wait for what it is doing to finish. `until` may stop it sooner
        (`stop_following`)."""
        import trio

        async with trio.open_nursery() as nursery:
            if self.follower is not None:
                nursery.start_soon(self.follower.follow)
            await until()
            if self.follower is not None:
                self.follower.stop_soon()

    async def stop_following(self) -> None:
        """Stop the session follower, if any, and wait for it (`memfs
        unmount` asked, by SIGUSR2); the stores stay mounted."""
        import trio

        self._unfollow_asked = False
        follower = self.follower
        if follower is None:
            return
        follower.stop_soon()
        while self.follower is follower:
            await trio.sleep(FOLLOWER_CHECK)
        log.info(
            "stopped following session %s; its mounts stay",
            follower.session_id,
            extra={"event": "session_unfollowed"},
        )

    def _drop_follower(self) -> None:
        """A follower still here when the stores stop never ran: `memfs
        run`'s command could not start, or the wait ended before it began."""
        if self.follower is not None:
            self.follower.drop()

    def _start_metrics(self, addr: str) -> None:
        """The metrics endpoint of these stores, a process of its own (it outlives a
        `--daemon` supervisor and ends with the stores); a failure stops the stores."""
        settings = {
            "addr": addr,
            "state_files": [state_path(s.runtime_dir, s.store_id, s.cache_dir) for s in self.specs],
        }
        stderr = self._daemon_log(self.specs[0].cache_dir, "metrics.log") if self.daemon else None
        self.metrics = start_process("memfs.supervisor._metrics", child_env(), stderr)
        assert self.metrics.stdin is not None and self.metrics.stdout is not None
        self.metrics.stdin.write(json.dumps(settings) + "\n")
        self.metrics.stdin.close()
        line = self.metrics.stdout.readline()
        self.metrics.stdout.close()
        if not line.startswith("READY"):
            self.stop_all()
            cause = line[6:].strip() if line.startswith("ERROR ") else "its process exited"
            raise MountError(f"cannot serve the metrics endpoint: {cause}")

    def stop_all(self) -> int:
        """SIGTERM every store process and wait; 0 when all of them exited 0.
        The metrics endpoint ends with them."""
        self._drop_follower()
        if not self.daemon:
            notify("STOPPING=1")
        for child in self.children:
            if child.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    child.proc.send_signal(signal.SIGTERM)
        codes = _each_at_once(self._stopped, self.children)
        self._stop_metrics()
        return 0 if all(code == 0 for code in codes) else 1

    def _stop_metrics(self) -> None:
        if self.metrics is not None and self.metrics.poll() is None:
            self.metrics.terminate()
            self.metrics.wait()

    @staticmethod
    async def _stopped(child: _Child) -> int:
        """Its exit status, once it has stopped; one that outlives its final
        sync's bound and the margin is killed and its mount lazily detached."""
        import trio

        limit = child.spec.final_sync_timeout + STOP_MARGIN
        with trio.move_on_after(limit):
            if child.proc.poll() is None:
                pidfd = os.pidfd_open(child.proc.pid)
                try:
                    await trio.lowlevel.wait_readable(pidfd)
                finally:
                    os.close(pidfd)
            return child.proc.wait()
        log.error(
            "store %s did not stop within %.0f s; killing it",
            child.spec.store_id,
            limit,
            extra={"event": "store_killed", "store_id": child.spec.store_id},
        )
        child.proc.kill()
        rc = child.proc.wait()
        force_unmount(child.spec.mount_path)
        return rc

    def final_sync(self) -> list[FinalSync]:
        """Stop every store with its final sync, all at once, and wait for
        each process to exit; what each left behind, in the order they were
        mounted.

        Each is asked over its control socket (`stop`, answered when its final
        sync is done, with the files it could not upload), the way `memfs
        unmount` asks: a SIGTERM would stop it the same way but name nothing."""
        self._drop_follower()
        if not self.daemon:
            notify("STOPPING=1")
        results = _each_at_once(self._final_sync, self.children)
        self._stop_metrics()
        return results

    async def _final_sync(self, child: _Child) -> FinalSync:
        result = FinalSync(child.spec)
        if child.proc.poll() is not None:
            result.failure = f"its store process had already ended (status {child.proc.returncode})"
            return result
        limit = child.spec.final_sync_timeout + STOP_MARGIN
        try:
            reply = await ControlClient(child.state()).stop_async(timeout=limit)
        except SyncError as e:
            result.failure = str(e)
            if child.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    child.proc.send_signal(signal.SIGTERM)
        else:
            if isinstance(reply, ErrorReply):
                result.failure = reply.error
            else:
                result.not_uploaded = list(reply.not_uploaded)
                result.sync_error = reply.sync_error
        rc = await self._stopped(child)
        if rc != 0 and result.ok:
            result.failure = f"its store process exited with status {rc}"
        return result

    def report_ended(self) -> int:
        """Log, once each, the store processes that stopped with an error
        before they were asked to; the number still running."""
        alive = 0
        for c in self.children:
            if c.proc.poll() is None:
                alive += 1
            elif c.proc.returncode != 0 and not c.reported:
                log.error(
                    "store %s stopped with status %s",
                    c.spec.store_id,
                    c.proc.returncode,
                    extra={"event": "store_exited", "store_id": c.spec.store_id},
                )
                c.reported = True
        return alive

    def catch_stop_signals(self) -> None:
        """From now on SIGTERM, SIGINT and SIGHUP ask `wait` to stop every store
        instead of ending this process: a foreground mount calls it before
        `start_all`, since systemd may send SIGTERM as soon as it hears READY."""
        if self._old_handlers is None:
            self._old_handlers = {
                s: signal.signal(s, self._on_stop_signal)
                for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
            }
            # For the rest of the process: `memfs unmount` may send it until
            # the follower's file is gone, which is at the end of `wait`.
            signal.signal(signal.SIGUSR2, self._on_unfollow_signal)

    def _on_stop_signal(self, signum: int, frame: FrameType | None) -> None:
        self._stop_asked = True

    def _on_unfollow_signal(self, signum: int, frame: FrameType | None) -> None:
        self._unfollow_asked = True

    def wait(self) -> int:
        """Foreground: run until SIGTERM/SIGINT (or every store has ended, when
        no session follower may add one), then stop all. SIGUSR2 stops the
        session follower (`memfs unmount` sends it) and lets the stores run.

        The signals set flags (`catch_stop_signals`, from before the stores
        start) that a trio program looks at while the follower runs beside it."""
        import trio

        self.catch_stop_signals()
        try:
            trio.run(self.run_follower, self._until_stopped)
        finally:
            for s, handler in (self._old_handlers or {}).items():
                signal.signal(s, handler)
            self._old_handlers = None
        return self.stop_all()

    async def _until_stopped(self) -> None:
        import trio

        while not self._stop_asked:
            if self._unfollow_asked:
                await self.stop_following()
            if not self.report_ended() and self.follower is None:
                break
            await trio.sleep(FOLLOWER_CHECK)


def _each_at_once(step: Callable[[_Child], Awaitable[T]], children: list[_Child]) -> list[T]:
    """What `step` gives for each of `children`, run all at once in one trio
    program; in their order."""
    import trio

    results: dict[int, T] = {}

    async def one(i: int, child: _Child) -> None:
        results[i] = await step(child)

    async def all_at_once() -> None:
        async with trio.open_nursery() as nursery:
            for i, child in enumerate(children):
                nursery.start_soon(one, i, child)

    trio.run(all_at_once)
    return [results[i] for i in range(len(children))]


async def _cancel_when_set(event: trio.Event, scope: trio.CancelScope) -> None:
    """Cancel `scope` once `event` is set (the session follower was told to
    stop while a store it adds starts)."""
    await event.wait()
    scope.cancel()
