"""One process per store (pyfuse3 holds one FUSE session per process): the supervisor hands each its
spec and token on stdin, waits until all say READY (or stops them and names the store that failed
and why), then returns (`--daemon`) or waits in the foreground. A foreground store process's stdin
is its lifeline: when the supervisor dies, the store stops with its final sync."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import signal
import socket
import subprocess
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING, Any, Protocol, TextIO, TypeVar

from .._children import NOTIFY_ENV, STORE_MODULE, child_env, start_process
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

if TYPE_CHECKING:
    import trio

log = logging.getLogger("memfs.supervisor")

T = TypeVar("T")

READY_TIMEOUT = 300.0
FOLLOWER_CHECK = 0.2
GONE_TIMEOUT = 60.0
"""How long `memfs unmount` waits for a store process to exit after its final sync."""
STOP_MARGIN = 30.0
"""How much longer than its final sync's bound a store process may take to stop."""


def notify(message: str) -> None:
    """Tell systemd `message` over `$NOTIFY_SOCKET`, when set; the mounts work without it."""
    address = os.environ.get(NOTIFY_ENV, "")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
            s.connect(address)
            s.sendall(message.encode())
    except OSError as e:
        log.warning(
            "cannot tell systemd %s through $NOTIFY_SOCKET: %s",
            message,
            e.strerror or e,
            extra={"event": "systemd_notify"},
        )


def daemon_log(folder: str, name: str) -> TextIO:
    """A daemon's log file (its stderr), 0600 in a private folder."""
    ensure_private_dir(folder, "cache folder", follow=True)
    return os.fdopen(open_log_file(os.path.join(folder, name), follow=True), "a")


def start_helper(
    module: str, env: dict[str, str], stderr: TextIO | None, launch: str, what: str
) -> subprocess.Popen[str]:
    """Start a helper process (the metrics endpoint, a daemon follower), hand
    it `launch` on stdin and wait for its READY; MountError `cannot <what>:
    <cause>` when it says ERROR or exits instead."""
    proc = start_process(module, env, stderr)
    assert proc.stdin is not None and proc.stdout is not None
    with contextlib.suppress(BrokenPipeError):
        proc.stdin.write(launch + "\n")
        proc.stdin.close()
    line = proc.stdout.readline()
    proc.stdout.close()
    if not line.startswith("READY"):
        proc.kill()
        proc.wait()
        cause = line[6:].strip() if line.startswith("ERROR ") else "its process exited"
        raise MountError(f"cannot {what}: {cause}")
    return proc


@dataclass
class _Child:
    spec: StoreSpec
    proc: subprocess.Popen[str]
    ready: bool = False
    error: str | None = None
    reported: bool = False
    """Its failure was logged already (foreground only)."""


class Follower(Protocol):
    """A session follower (`_follow`, which imports this module)."""

    @property
    def session_id(self) -> str: ...

    async def follow(self) -> None: ...

    def stop_soon(self) -> None: ...

    def drop(self) -> None: ...


@dataclass
class FinalSync:
    """What the final sync of one store left behind."""

    spec: StoreSpec
    not_uploaded: list[str] = field(default_factory=list)
    failure: str | None = None
    """Why the final sync could not be confirmed; None when it answered."""
    sync_error: str | None = None
    """Why its pass failed (after a detach: the API's 403)."""

    @property
    def ok(self) -> bool:
        return not self.not_uploaded and self.failure is None


async def ask_final_sync(spec: StoreSpec, state: StoreState) -> FinalSync:
    """Stop a running store with its final sync over its control socket;
    SyncError when it does not answer."""
    reply = await ControlClient(state).stop_async(timeout=spec.final_sync_timeout + STOP_MARGIN)
    if isinstance(reply, ErrorReply):
        return FinalSync(spec, failure=reply.error)
    return FinalSync(spec, list(reply.not_uploaded), sync_error=reply.sync_error)


async def exited(pid: int, timeout: float) -> bool:
    """Whether the process `pid` ends (a zombie has) within `timeout` seconds."""
    import trio

    with trio.move_on_after(timeout):
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            return True
        try:
            await trio.lowlevel.wait_readable(pidfd)
        finally:
            os.close(pidfd)
        return True
    return False


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
        self.env = {"MEMFS_LOG_LEVEL": log_level, "MEMFS_LOG_FORMAT": log_format}
        self.metrics_addr = metrics_addr
        self.children: list[_Child] = []
        self.metrics: subprocess.Popen[str] | None = None
        self._stop_asked = False
        self._unfollow_asked = False
        self._old_handlers: dict[int, Any] | None = None
        self.removed: list[FinalSync] = []
        """The final syncs of the stores `remove` stopped, in order."""
        self.follower: Follower | None = None
        """With one, a foreground `wait` goes on when no store runs."""

    def _start(self, spec: StoreSpec) -> _Child:
        spec = dataclasses.replace(spec, follow_parent=not self.daemon)
        log_file = None
        if self.daemon:
            # The store process opens its log itself, in the folder checked here.
            ensure_private_dir(spec.cache_dir, "cache folder", follow=True)
            store_dir = os.path.join(spec.cache_dir, check_store_id(spec.store_id))
            ensure_private_dir(store_dir, "cache folder")
            log_file = os.path.join(store_dir, "memfs.log")
        env = {**child_env(), **self.env, "MEMFS_RUNTIME_DIR": spec.runtime_dir}
        proc = start_process(STORE_MODULE, env)
        assert proc.stdin is not None
        # One gone already is reported, with its exit status, as one that never said READY.
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.write(StoreLaunch(spec, log_file).to_json() + "\n")
            proc.stdin.flush()
            if self.daemon:
                proc.stdin.close()
        return _Child(spec, proc)

    def start_all(self) -> None:
        """Start every store and wait for READY; on any failure stop the rest and raise."""
        import trio

        try:
            for spec in self.specs:
                self.children.append(self._start(spec))
            trio.run(self._answers, self.children, trio.Event())
            failed = [c for c in self.children if not c.ready]
            if failed:
                raise self._mount_error(failed[0])
            if self.metrics_addr:
                self._start_metrics(self.metrics_addr)
        except BaseException:
            self.stop_all()  # those that have their specs already would mount
            raise
        if not self.daemon:
            notify("READY=1")

    async def _answers(self, children: list[_Child], abandon: trio.Event) -> None:
        """Each child's answer, until all have answered, the wait is over or
        `abandon` is set."""
        import trio

        async def cancel_when_abandoned() -> None:
            await abandon.wait()
            nursery.cancel_scope.cancel()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(cancel_when_abandoned)
            with trio.move_on_after(READY_TIMEOUT):
                async with trio.open_nursery() as readers:
                    for child in children:
                        readers.start_soon(self._answer, child)
            nursery.cancel_scope.cancel()

    @staticmethod
    async def _answer(child: _Child) -> None:
        """Its first line other than WAITING (logged): READY, ERROR or its end."""
        import trio

        assert child.proc.stdout is not None
        # Read unbuffered: a line left in a file object's buffer would wake no wait.
        fd = child.proc.stdout.fileno()
        partial = b""
        lines: list[bytes] = []
        while not lines:
            await trio.lowlevel.wait_readable(fd)
            chunk = os.read(fd, 65536)
            *lines, partial = (partial + chunk).split(b"\n")
            if not chunk:
                lines.append(partial)  # its last words, or b"": it exited
            while lines and lines[0].startswith(b"WAITING "):
                log.warning(
                    "%s",
                    lines.pop(0)[8:].strip().decode("utf-8", "replace"),
                    extra={"event": "waiting_for_api", "store_id": child.spec.store_id},
                )
        answer = lines[0].decode("utf-8", "replace")
        if answer.startswith("READY"):
            child.ready = True
            child.proc.stdout.close()
        else:
            error = answer[6:].strip() if answer.startswith("ERROR ") else None
            child.error = error or f"the store process exited ({child.proc.wait()})"

    @staticmethod
    def _mount_error(child: _Child) -> MountError:
        cause = child.error or f"it did not become ready within {READY_TIMEOUT:.0f} s"
        if child.spec.store_id in cause and child.spec.mount_path in cause:
            return MountError(cause)
        return MountError(
            f"store {child.spec.store_id} could not be mounted at {child.spec.mount_path}: {cause}"
        )

    async def add(self, spec: StoreSpec, abandon: trio.Event) -> bool:
        """Mount one more store while the others run; MountError when it
        cannot be, False when `abandon` is set before its READY."""
        child = self._start(spec)
        try:
            await self._answers([child], abandon)
        finally:
            if not child.ready:
                child.proc.terminate()  # Popen polls first: a process that ended gets no signal
        if not child.ready:
            await self._stopped(child)
            if child.error is None and abandon.is_set():
                return False
            raise self._mount_error(child)
        self.children.append(child)
        return True

    async def remove(self, mount_path: str) -> FinalSync | None:
        """Stop the store mounted at `mount_path` with its final sync; None when there is none."""
        child = next((c for c in self.children if c.spec.mount_path == mount_path), None)
        if child is None:
            return None
        self.children.remove(child)
        result = await self._final_sync(child)
        self.removed.append(result)
        return result

    async def run_follower(self, until: Callable[[], Awaitable[None]]) -> None:
        """Run the session follower, if any, while `until` runs; then stop it."""
        import trio

        async with trio.open_nursery() as nursery:
            if self.follower is not None:
                nursery.start_soon(self.follower.follow)
            await until()
            if self.follower is not None:
                self.follower.stop_soon()

    async def stop_following(self) -> None:
        """Stop the session follower, if any, and wait for it; the stores stay."""
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

    def _start_metrics(self, addr: str) -> None:
        """A process of its own: it outlives a `--daemon` supervisor."""
        state_files = [
            state_path(c.spec.runtime_dir, c.spec.store_id, c.spec.cache_dir) for c in self.children
        ]
        launch = json.dumps({"addr": addr, "state_files": state_files})
        stderr = daemon_log(self.children[0].spec.cache_dir, "metrics.log") if self.daemon else None
        what = "serve the metrics endpoint"
        self.metrics = start_helper("memfs.supervisor._metrics", child_env(), stderr, launch, what)

    def stop_all(self) -> int:
        """SIGTERM every store process and wait; 0 when all of them exited 0."""
        self._stopping()
        for child in self.children:
            child.proc.terminate()
        codes = _each_at_once(self._stopped, self.children)
        self._stop_metrics()
        return 0 if all(code == 0 for code in codes) else 1

    def final_sync(self) -> list[FinalSync]:
        """Stop every store with its final sync, all at once; what each left
        behind, in their order."""
        self._stopping()
        results = _each_at_once(self._final_sync, self.children)
        self._stop_metrics()
        return results

    def _stopping(self) -> None:
        # A follower still here never ran: `memfs run`'s command could not start.
        if self.follower is not None:
            self.follower.drop()
        if not self.daemon:
            notify("STOPPING=1")

    def _stop_metrics(self) -> None:
        if self.metrics is not None and self.metrics.poll() is None:
            self.metrics.terminate()
            self.metrics.wait()

    @staticmethod
    async def _stopped(child: _Child) -> int:
        """Its exit status, once it has stopped; one that outlives its final
        sync's bound and the margin is killed and its mount lazily detached."""
        limit = child.spec.final_sync_timeout + STOP_MARGIN
        if child.proc.poll() is not None or await exited(child.proc.pid, limit):
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

    async def _final_sync(self, child: _Child) -> FinalSync:
        if child.proc.poll() is not None:  # 0: its own final sync (an unmount) left nothing
            ended = f"its store process had already ended (status {child.proc.returncode})"
            return FinalSync(child.spec, failure=ended if child.proc.returncode else None)
        spec = child.spec
        socket = socket_path(spec.runtime_dir, spec.store_id, spec.cache_dir)
        try:
            result = await ask_final_sync(
                spec, StoreState(spec.store_id, spec.mount_path, child.proc.pid, socket)
            )
        except SyncError as e:
            result = FinalSync(child.spec, failure=str(e))
            child.proc.terminate()
        rc = await self._stopped(child)
        if rc != 0 and result.ok:
            result.failure = f"its store process exited with status {rc}"
        return result

    def report_ended(self) -> int:
        """Log, once each, the store processes that failed before they were
        asked to stop; the number still running."""
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
        """From now on SIGTERM, SIGINT and SIGHUP ask `wait` to stop every
        store: before `start_all`, since systemd may send SIGTERM at READY."""
        if self._old_handlers is None:
            self._old_handlers = {
                s: signal.signal(s, self._on_signal)
                for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
            }
            # For the rest of the process: `memfs unmount` may send it until
            # the follower's file is gone, which is at the end of `wait`.
            signal.signal(signal.SIGUSR2, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if signum == signal.SIGUSR2:
            self._unfollow_asked = True
        else:
            self._stop_asked = True

    def wait(self) -> int:
        """Foreground: run until SIGTERM/SIGINT (or every store has ended and no
        follower may add one), then stop all; SIGUSR2 stops the follower only."""
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
    """What `step` gives for each of `children`, all run at once; in their order."""
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
