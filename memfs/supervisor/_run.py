"""`memfs run`: mount the stores, run one command in memfs's process group, then the final sync and
the unmount. A signal sent to memfs alone is passed on, one the terminal sent the whole group is not
(sigtimedwait says who sent it); signals during the final sync are dropped. The command gets no
credential variable, no `NOTIFY_SOCKET` and no descriptor but 0-2."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial

from .._children import child_env
from .._logging import LogFormat
from ..control import StoreSpec
from ._commands import UNFOLLOW_SIGNAL
from ._follow import Announce, SessionFollower, SessionToFollow
from ._supervisor import FinalSync, Supervisor

log = logging.getLogger("memfs.supervisor")

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
"""The signals memfs passes to the command."""
_HELD = {*FORWARDED, signal.SIGCHLD, UNFOLLOW_SIGNAL}
"""SIGCHLD too: it says at once that the command or a store process ended."""
SIGNAL_CHECK = 0.1
_SI_KERNEL = 0x80
"""`si_code` of a signal the kernel sent (the terminal's), never kill(2)'s:
Linux's value, which Python's signal module does not name."""

EXIT_NOT_EXECUTABLE = 126
EXIT_NOT_FOUND = 127
"""What a shell answers for a command it cannot start."""


@dataclass
class RunResult:
    """How the command ended and what the final sync left behind."""

    status: int
    """As a shell reports it: 128+N for signal N, 127 or 126 when it never started."""
    not_started: str | None = None
    stores: list[FinalSync] = field(default_factory=list)
    detached: list[FinalSync] = field(default_factory=list)
    """The final syncs of the stores detached from the session during the run."""

    @property
    def left_behind(self) -> bool:
        """A final sync (at the end, or of a store detached meanwhile) left
        files behind or could not be confirmed."""
        return not all(s.ok for s in self.stores + self.detached)


def run(
    specs: list[StoreSpec],
    argv: Sequence[str],
    *,
    log_level: str = "INFO",
    log_format: LogFormat = "text",
    metrics_addr: str | None = None,
    session: SessionToFollow | None = None,
    announce: Announce | None = None,
    stdin_devnull: bool = False,
) -> RunResult:
    """Mount every store (MountError, with nothing left mounted, when one
    cannot be), run `argv` to its end, then the final sync and the unmount.
    `session`: follow it meanwhile, telling `announce` what it does."""
    supervisor = Supervisor(
        specs, log_level=log_level, log_format=log_format, metrics_addr=metrics_addr
    )
    supervisor.start_all()
    try:
        with _held_signals():
            if session is not None:
                # One that comes after the wait (the follower stopped already) is dropped.
                signal.signal(UNFOLLOW_SIGNAL, lambda signum, frame: None)
                SessionFollower(session, supervisor, announce=announce).start()
            result = _run_command(supervisor, argv, stdin_devnull=stdin_devnull)
            result.stores = supervisor.final_sync()
            result.detached = list(supervisor.removed)
    except BaseException:
        # Whatever went wrong here, no store stays mounted behind memfs.
        supervisor.stop_all()
        raise
    return result


def _run_command(supervisor: Supervisor, argv: Sequence[str], stdin_devnull: bool) -> RunResult:
    import trio

    stdin = subprocess.DEVNULL if stdin_devnull else None
    try:
        child = subprocess.Popen(list(argv), env=child_env(), stdin=stdin, preexec_fn=_in_child)
    except OSError as e:
        code = EXIT_NOT_FOUND if isinstance(e, FileNotFoundError) else EXIT_NOT_EXECUTABLE
        return RunResult(code, not_started=f"cannot run {argv[0]}: {_reason(argv[0], e)}")
    log.info("running %s (pid %d)", argv[0], child.pid)
    trio.run(supervisor.run_follower, partial(_pass_signals, supervisor, child))
    status = 128 - child.returncode if child.returncode < 0 else child.returncode
    log.info("the command exited with status %d; final sync", status)
    return RunResult(status)


async def _pass_signals(supervisor: Supervisor, child: subprocess.Popen[bytes]) -> None:
    """Until the command exits, pass it the signals sent to memfs alone."""
    import trio

    while child.poll() is None:
        info = signal.sigtimedwait(_HELD, 0)
        if info is None or info.si_signo == signal.SIGCHLD:
            supervisor.report_ended()
            await trio.sleep(SIGNAL_CHECK if info is None else 0)
            continue
        if info.si_signo == UNFOLLOW_SIGNAL:
            await supervisor.stop_following()
            continue
        with contextlib.suppress(OSError):
            if info.si_code == _SI_KERNEL and os.getpgid(child.pid) == os.getpgrp():
                continue  # the terminal sent it to the whole group: the command has it
        log.info("passing %s to the command", signal.Signals(info.si_signo).name)
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.pid, info.si_signo)


def _reason(command: str, e: OSError) -> str:
    """What a shell would say, without the shell's wording of a path."""
    if isinstance(e, FileNotFoundError) and "/" not in command:
        return "command not found"
    if e.errno == errno.EACCES:
        return "permission denied"
    return (e.strerror or str(e)).lower()


def _in_child() -> None:
    """Before exec: the signals as a shell leaves them, none held, none
    ignored (memfs may have been started with SIGINT ignored)."""
    for signum in FORWARDED:
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, ())


@contextlib.contextmanager
def _held_signals() -> Iterator[None]:
    """Block the signals memfs takes with sigtimedwait; after, drop those still
    pending (they came during the final sync) and unblock them."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
    try:
        yield
    finally:
        while signal.sigtimedwait(_HELD, 0) is not None:
            pass
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
