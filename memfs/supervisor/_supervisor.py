"""One process per store, under one supervisor (pyfuse3 holds one FUSE
session per process).

The supervisor starts a store process for each spec (`python -m
memfs.mount`, the spec with the token on its stdin, no secret in its
environment); waits until every one says READY, or stops the others and
fails naming the store and the cause; and then either returns (`--daemon`)
or waits for SIGTERM/SIGINT and passes it on, exiting 0 only when every
store uploaded everything.

In the foreground, a store process's stdin stays open as a lifeline: when
the supervisor dies, by any signal, the store process reads its end and
stops with its final sync.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from types import FrameType

from .._exceptions import MountError
from .._private import ensure_private_dir
from ..control import StoreSpec
from ..mount import force_unmount
from ._credentials import SECRET_ENV

log = logging.getLogger("memfs.supervisor")

READY_TIMEOUT = 300.0
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


class Supervisor:
    """Starts one store process per spec and sees them through to the end."""

    def __init__(
        self,
        specs: list[StoreSpec],
        *,
        daemon: bool = False,
        log_level: str = "INFO",
        log_format: str = "text",
    ) -> None:
        self.specs = specs
        self.daemon = daemon
        self.log_level = log_level
        self.log_format = log_format
        self.children: list[_Child] = []

    def _start(self, spec: StoreSpec) -> _Child:
        spec = dataclasses.replace(spec, follow_parent=not self.daemon)
        env = {k: v for k, v in os.environ.items() if k not in SECRET_ENV}
        env["MEMFS_LOG_LEVEL"] = self.log_level
        env["MEMFS_LOG_FORMAT"] = self.log_format
        env["MEMFS_RUNTIME_DIR"] = spec.runtime_dir
        if self.daemon:
            store_dir = os.path.join(spec.cache_dir, spec.store_id)
            ensure_private_dir(spec.cache_dir, "cache folder", follow=True)
            ensure_private_dir(store_dir, "cache folder")
            flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
            stderr = os.fdopen(os.open(os.path.join(store_dir, "memfs.log"), flags, 0o600), "a")
        else:
            stderr = None
        proc = subprocess.Popen(
            [sys.executable, "-m", "memfs.mount"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
            start_new_session=True,
            text=True,
        )
        if stderr is not None:
            stderr.close()
        assert proc.stdin is not None
        proc.stdin.write(spec.to_json() + "\n")
        proc.stdin.flush()
        if self.daemon:
            proc.stdin.close()
        return _Child(spec, proc)

    def start_all(self) -> None:
        """Start every store and wait for READY; on any failure stop the rest and raise."""
        self.children = [self._start(spec) for spec in self.specs]
        sel = selectors.DefaultSelector()
        for child in self.children:
            assert child.proc.stdout is not None
            sel.register(child.proc.stdout, selectors.EVENT_READ, child)
        deadline = time.monotonic() + READY_TIMEOUT
        waiting = len(self.children)
        while waiting:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            for key, _ in sel.select(timeout=min(remaining, 1.0)):
                answered: _Child = key.data
                assert answered.proc.stdout is not None
                line = answered.proc.stdout.readline()
                sel.unregister(key.fileobj)
                waiting -= 1
                if line.startswith("READY"):
                    answered.ready = True
                else:
                    error = line[6:].strip() if line.startswith("ERROR ") else None
                    answered.error = error or f"the store process exited ({answered.proc.wait()})"
        sel.close()
        failed = [c for c in self.children if not c.ready]
        if failed:
            self.stop_all()
            first = failed[0]
            cause = first.error or f"it did not become ready within {READY_TIMEOUT:.0f} s"
            if first.spec.store_id in cause and first.spec.mount_path in cause:
                raise MountError(cause)
            raise MountError(
                f"store {first.spec.store_id} could not be mounted at {first.spec.mount_path}: {cause}"
            )
        for child in self.children:
            if child.proc.stdout is not None:
                child.proc.stdout.close()

    def stop_all(self) -> int:
        """SIGTERM every store process and wait; 0 when all of them exited 0."""
        for child in self.children:
            if child.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    child.proc.send_signal(signal.SIGTERM)
        code = 0
        for child in self.children:
            limit = child.spec.final_sync_timeout + STOP_MARGIN
            try:
                rc = child.proc.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                log.error(
                    "store %s did not stop within %.0f s; killing it",
                    child.spec.store_id,
                    limit,
                    extra={"event": "store_killed", "store_id": child.spec.store_id},
                )
                child.proc.kill()
                rc = child.proc.wait()
                force_unmount(child.spec.mount_path)
            if rc != 0:
                code = 1
        return code

    def wait(self) -> int:
        """Foreground: run until SIGTERM/SIGINT (or every store has ended), then stop all."""
        stop = False

        def on_signal(signum: int, frame: FrameType | None) -> None:
            nonlocal stop
            stop = True

        old = {
            s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
        }
        try:
            while not stop:
                alive = [c for c in self.children if c.proc.poll() is None]
                if not alive:
                    break
                for c in self.children:
                    if c.proc.returncode not in (None, 0) and not c.reported:
                        log.error(
                            "store %s stopped with status %s",
                            c.spec.store_id,
                            c.proc.returncode,
                            extra={"event": "store_exited", "store_id": c.spec.store_id},
                        )
                        c.reported = True
                time.sleep(0.2)
        finally:
            for s, handler in old.items():
                signal.signal(s, handler)
        return self.stop_all()
