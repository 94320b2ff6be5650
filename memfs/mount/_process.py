"""The store process (`python -m memfs.mount`), one per store since pyfuse3
holds one session per process. It reads its `StoreLaunch` as one JSON line on
stdin, so the token never shows in `ps` (no line: it exits 0), and answers on
stdout `READY` once mounted or `ERROR <sentence>`, after a `WAITING <sentence>`
for each start attempt the API did not answer. On SIGTERM, SIGINT or `stop`
the final sync runs while still mounted, then the teardown, the state file
last; exit status 0 only when the final sync left nothing behind (refused contents not counted)."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from functools import partial

import pyfuse3
import trio

from .. import control
from .._exceptions import CacheInUse, MemfsError, MountError, SyncError
from .._logging import ProgressReport, setup_logging_from_env
from .._private import ensure_private_dir, open_log_file
from ..api import shown_store_id, store_id_problem
from ..cache import StoreCache
from ..control import Command, StoreSpec
from ..fs import KernelCache, mount_options
from ._folder import MountFolder
from ._store import PROGRESS_AFTER, MountedStore, store_client

log = logging.getLogger("memfs.mount")

CACHE_WAIT_MARGIN = 30.0


class StoreProcess:
    """One store mounted in this process, each resource's teardown declared
    where it is made."""

    def __init__(self, spec: StoreSpec) -> None:
        self.spec = spec
        self.stopping = trio.Event()
        """Set by SIGTERM, SIGINT, `stop`, the lifeline or the end of pyfuse3's loop."""
        self._final_sync_done = trio.Event()
        self._not_uploaded: dict[str, str] = {}
        self.exit_code = 1
        self._waive_window = False
        """Set by `stop`, which no writer outlives: the final sync waives the delete window."""
        self.state = control.StateFile(
            control.state_path(spec.runtime_dir, spec.store_id, spec.cache_dir)
        )
        self.socket_path = control.socket_path(spec.runtime_dir, spec.store_id, spec.cache_dir)

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        spec = self.spec
        async with contextlib.AsyncExitStack() as life:
            cache = await open_cache(spec)
            # Registered before the cache's close so that it runs after it: while
            # the state file says "stopping", a new process of this store waits
            # for the cache instead of failing.
            life.callback(self.state.remove)
            life.callback(cache.close)
            ensure_private_dir(spec.runtime_dir, "runtime folder")
            client = store_client(spec, on_wait=_say_waiting)
            life.push_async_callback(client.aclose)
            store = MountedStore(spec, cache, client)
            await store.first_pass()
            self._make_folder(life, store)
            self._mount(life, store)
            signals = life.enter_context(trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT))
            serving = await life.enter_async_context(trio.open_nursery())
            life.callback(serving.cancel_scope.cancel)
            server = control.ControlServer(self.socket_path, partial(self._answer, store))
            await serving.start(server.serve)
            serving.start_soon(self._fuse_main)
            serving.start_soon(partial(cache.housekeeping, busy=store.fs_busy))
            serving.start_soon(store.give_back_memory_when_quiet)
            async with trio.open_nursery() as syncing:
                syncing.start_soon(self._signals, signals)
                syncing.start_soon(store.periodic)
                syncing.start_soon(store.write_behind)
                syncing.start_soon(store.prefetch)
                if spec.follow_parent:
                    syncing.start_soon(self._lifeline)
                self.state.write(self._state(stopping=False).to_json())
                task_status.started()
                log.info(
                    "mounted %s at %s", spec.store_id, spec.mount_path, extra={"event": "mounted"}
                )
                await self.stopping.wait()
                self.state.write(self._state(stopping=True).to_json())
                syncing.cancel_scope.cancel()
            # The final sync runs while the folder is still mounted.
            shown = ProgressReport(f"memfs: final sync of {spec.store_id}", after=PROGRESS_AFTER)
            try:
                self._not_uploaded = await store.final_sync(
                    progress=shown, waive_window=self._waive_window
                )
            finally:
                shown.finish()
            self._final_sync_done.set()
        log.info(
            "unmounted %s from %s", spec.store_id, spec.mount_path, extra={"event": "unmounted"}
        )
        self.exit_code = 0 if not self._not_uploaded else 1

    def _make_folder(self, life: contextlib.AsyncExitStack, store: MountedStore) -> None:
        """Prepare the mount path, memfs's from here to the end; the journal
        remembers it meanwhile, so that the next run may reuse it after a kill."""
        spec, cache = self.spec, store.cache
        left_by_us = cache.get_meta("mount_folder") == spec.mount_path
        folder = MountFolder(
            spec.mount_path, spec.store_id, root=spec.mount_root, confined=spec.confined_to_root
        )
        folder.prepare(left_by_us=left_by_us)

        def remove_folder() -> None:
            folder.remove()
            if not os.path.lexists(spec.mount_path):
                cache.set_meta("mount_folder", None)

        life.callback(remove_folder)
        cache.set_meta("mount_folder", spec.mount_path)

    def _mount(self, life: contextlib.AsyncExitStack, store: MountedStore) -> None:
        spec = self.spec
        options = mount_options(
            spec.store_id, allow_other=spec.allow_other, read_only=spec.read_only
        )
        try:
            pyfuse3.init(store.fs, spec.mount_path, options)
        except (RuntimeError, OSError) as e:
            raise MountError(f"cannot mount {spec.store_id} at {spec.mount_path}: {e}")

        def unmount() -> None:
            with contextlib.suppress(Exception):
                pyfuse3.close(unmount=True)

        life.callback(unmount)
        store.engine.puller.kernel = KernelCache()

    def _state(self, *, stopping: bool) -> control.StoreState:
        return control.StoreState(
            store_id=self.spec.store_id,
            mount_path=self.spec.mount_path,
            pid=os.getpid(),
            socket=self.socket_path,
            stopping=stopping,
        )

    async def _answer(self, store: MountedStore, request: control.Request) -> control.Reply:
        """The control socket's handler."""
        match request.command:
            case Command.STATUS:
                return control.StatusReply(store.status())
            case Command.SYNC:
                try:
                    report = await store.engine.run_pass(asked=True)
                except SyncError as e:
                    return control.ErrorReply(str(e))
                return control.SyncReply(report.as_dict())
            case Command.STOP:
                if not self.stopping.is_set():
                    self._waive_window = True
                    if request.by is not None:
                        pid = request.peer_pid if request.peer_pid is not None else "unknown"
                        log.info(
                            "stopping %s: unmounted by `%s` from pid %s; final sync",
                            self.spec.store_id,
                            request.by,
                            pid,
                            extra={"event": "stop_asked"},
                        )
                self.stopping.set()
                await self._final_sync_done.wait()
                return control.StopReply(list(self._not_uploaded), store.final_sync_error)
            case Command.METRICS:
                return control.MetricsReply(store.metrics())
            case Command.PUSH_FILES:
                timeout = request.timeout or self.spec.final_sync_timeout
                confirmed = await store.engine.confirm(list(request.paths), timeout)
                return control.PushFilesReply(confirmed)
            case Command.PUSH_NOW:
                store.ask_push()
                return control.PushReply()

    async def _fuse_main(self) -> None:
        try:
            await pyfuse3.main()
        finally:
            self.stopping.set()

    async def _lifeline(self) -> None:
        """Stop when the foreground `memfs mount` that started this process is gone
        (its end of our stdin closed), whatever killed it."""
        with contextlib.suppress(OSError, trio.BrokenResourceError):
            async with trio.lowlevel.FdStream(os.dup(0)) as stream:
                while await stream.receive_some(4096):
                    pass
        log.warning(
            "the memfs mount process of %s is gone; stopping: final sync",
            self.spec.store_id,
            extra={"event": "parent_gone"},
        )
        self.stopping.set()

    async def _signals(self, signals: AsyncIterator[int]) -> None:
        async for _ in signals:
            log.info("stopping %s: final sync", self.spec.store_id, extra={"event": "stopping"})
            self.stopping.set()
            return


async def open_cache(spec: StoreSpec) -> StoreCache:
    """The store's cache, once an earlier process of this store that is
    stopping lets it go (at most this mount's final sync bound and a margin); one
    held by a process that is not stopping is refused at once."""
    deadline = time.monotonic() + spec.final_sync_timeout + CACHE_WAIT_MARGIN
    waited = False
    while True:
        try:
            return StoreCache(
                spec.cache_dir,
                spec.store_id,
                budget_bytes=spec.cache_size,
                memory_bytes=spec.cache_memory,
            )
        except CacheInUse:
            state_file = control.state_path(spec.runtime_dir, spec.store_id, spec.cache_dir)
            previous = control.read_state(state_file)
            if previous is None or not previous.stopping or time.monotonic() > deadline:
                raise
            if not waited:
                log.warning(
                    "waiting for the previous memfs process of %s to finish its final sync",
                    spec.store_id,
                    extra={"event": "waiting_for_previous"},
                )
                waited = True
            await trio.sleep(0.2)


def _say_waiting(sentence: str) -> None:
    """Before READY: the supervisor says it to the person waiting for the mount."""
    with contextlib.suppress(OSError, ValueError):
        print(f"WAITING {sentence}", flush=True)


async def _store_main(spec: StoreSpec) -> int:
    ready_sent = False
    process = StoreProcess(spec)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(process.run)
            print("READY", flush=True)
            ready_sent = True
    except (MemfsError, ExceptionGroup) as e:
        error = _memfs_error(e)
        if error is None:
            raise
        if ready_sent:
            log.error("%s", error, extra={"event": "store_failed"})
        else:  # the supervisor says it, once (an attach is tried again at each check)
            log.debug("%s", error, extra={"event": "store_failed"})
            print(f"ERROR {error}", flush=True)
        return 1
    return process.exit_code


def _memfs_error(e: BaseException) -> MemfsError | None:
    """The MemfsError behind `e`, unwrapped from trio's ExceptionGroups."""
    while isinstance(e, BaseExceptionGroup) and len(e.exceptions) == 1:
        e = e.exceptions[0]
    return e if isinstance(e, MemfsError) else None


def main() -> int:
    # Every file and folder a store process makes (journal, contents, conflict
    # copies, state files) is the user's alone; the mount folder sets its own mode.
    os.umask(0o077)
    line = sys.stdin.readline()
    if not line:
        return 0  # the supervisor went before it sent the launch: nothing to mount
    try:
        launch = control.StoreLaunch.from_json(line)
    except (ValueError, TypeError) as e:
        sys.stdout.write(f"ERROR the store process got no usable spec: {e}\n")
        return 2
    # Its store id names the cache folder, the log, runtime files and a mount option.
    problem = store_id_problem(launch.spec.store_id)
    if problem is not None:
        shown = shown_store_id(launch.spec.store_id)
        sys.stdout.write(f"ERROR {shown} is not a store id: {problem}\n")
        return 2
    if launch.log_file is not None:
        try:
            fd = open_log_file(launch.log_file)  # checked again: the user's alone
            os.dup2(fd, 2)  # from now on stderr, ours and our children's, goes there
            os.close(fd)
        except OSError as e:
            sys.stdout.write(f"ERROR cannot open the log file {launch.log_file}: {e.strerror}\n")
            return 1
        except MemfsError as e:
            sys.stdout.write(f"ERROR {e}\n")
            return 1
    setup_logging_from_env("INFO", store_id=launch.spec.store_id)
    return trio.run(_store_main, launch.spec)
