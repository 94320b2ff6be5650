"""The composition root for one store: client, cache, filesystem and sync
loop, wired together, and the mount's whole life in one process.

`python -m memfs.mount` is the store process the supervisor starts (one per
store: pyfuse3 holds one session per process). It reads its `StoreSpec` as
JSON on stdin, so the token never shows in `ps`, and reports on stdout one
line: `READY` once the store is mounted, or `ERROR <sentence>`.

The life of a mount:

1. Open the cache; a cache left by an earlier (even killed) run is reused,
   with its changes still pending.
2. One full pass against the store: the whole tree is listed (basic view),
   recovered local changes are reconciled and pushed.
3. Prepare the mount path (`mkdir -p`, refuse anything standing there, clean
   a stale mount of this very store), mount, answer READY.
4. Serve: pyfuse3's loop, the periodic sync, the background prefetch and the
   control socket (`sync`, `status`, `stop`) run side by side.
5. On SIGTERM, SIGINT or `stop`: a final two-way pass (and more while they
   make progress) within `final_sync_timeout`, still mounted; then unmount and
   remove the folder. The exit status is 0 only when the store holds
   everything; what is left is named in the log and stays in the cache.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import time
from functools import partial
from typing import Any

import pyfuse3
import trio

from .._exceptions import CacheInUse, MemfsError, MountError, SyncError
from .._private import ensure_private_dir
from ..cache import StoreCache
from ..client import StoreClient
from ..control import StoreSpec
from ..fs import KernelCache, MemoryStoreFS, mount_options
from ..sync import FINAL_CONCURRENCY, NoKernel, SyncEngine, backoff_delay
from ._folder import prepare_mount_path, remove_mount_folder

log = logging.getLogger("memfs.mount")


class StoreProcess:
    """One store mounted in this process."""

    def __init__(self, spec: StoreSpec, cache: StoreCache) -> None:
        self.spec = spec
        # Few retries inside a pass: the sync loop has its own backoff between passes.
        final_concurrency = min(FINAL_CONCURRENCY, 2 * spec.sync_concurrency)
        self.client = StoreClient(
            spec.api_url,
            spec.token,
            auth=spec.auth,
            max_retries=3,
            backoff_max=2.0,
            max_connections=max(spec.sync_concurrency, final_concurrency),
        )
        self.cache = cache
        self.engine = SyncEngine(
            self.client,
            self.cache,
            read_only=spec.read_only,
            deletions=spec.sync_deletions,
            concurrency=spec.sync_concurrency,
            final_concurrency=final_concurrency,
        )
        self.cache.source = self.engine.fetch_content
        self.fs = MemoryStoreFS(self.cache, read_only=spec.read_only, uid=spec.uid, gid=spec.gid)
        self.mounted = False
        self.stopping = trio.Event()
        self.finished = trio.Event()
        self.stopped = trio.Event()
        self.result: dict[str, Any] = {}
        self.started_at = time.time()
        self.prefetched = False
        self._fs_requests_seen = 0
        ensure_private_dir(spec.runtime_dir, "runtime folder")
        self.socket_path = os.path.join(spec.runtime_dir, f"{spec.store_id}.sock")
        self.state_path = os.path.join(spec.runtime_dir, f"{spec.store_id}.json")

    async def run(self, task_status=trio.TASK_STATUS_IGNORED) -> int:
        spec = self.spec
        created = False
        try:
            if spec.read_only:
                self.engine.set_aside_local_changes()
            try:
                await self.engine.run_pass(full=True)
            except SyncError as e:
                if self.cache.get_meta("feed_ts") is None and not self.cache.file_count():
                    raise MountError(f"cannot mount {spec.store_id}: {e}")
                log.warning("mounting %s from the cache alone: %s", spec.store_id, e)
            created = prepare_mount_path(
                spec.mount_path,
                spec.store_id,
                left_by_us=self.cache.get_meta("mount_folder") == spec.mount_path,
            )
            if created:
                self.cache.set_meta("mount_folder", spec.mount_path)
            try:
                pyfuse3.init(
                    self.fs,
                    spec.mount_path,
                    mount_options(
                        spec.store_id, allow_other=spec.allow_other, read_only=spec.read_only
                    ),
                )
            except (RuntimeError, OSError) as e:
                raise MountError(f"cannot mount {spec.store_id} at {spec.mount_path}: {e}")
            self.mounted = True
            self.engine.kernel = KernelCache()
            with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async with trio.open_nursery() as outer:
                    await outer.start(self._control)
                    async with trio.open_nursery() as serving:
                        serving.start_soon(self._fuse_main)
                        serving.start_soon(partial(self.cache.housekeeping, busy=self._fs_busy))
                        async with trio.open_nursery() as syncing:
                            syncing.start_soon(self._signals, signals)
                            syncing.start_soon(self._periodic)
                            syncing.start_soon(self._prefetch)
                            if spec.follow_parent:
                                syncing.start_soon(self._lifeline)
                            self._write_state()
                            task_status.started()
                            log.info("mounted %s at %s", spec.store_id, spec.mount_path)
                            await self.stopping.wait()
                            self._write_state(stopping=True)
                            syncing.cancel_scope.cancel()
                        # The final sync runs while the folder is still mounted.
                        code = await self._final_sync()
                        serving.cancel_scope.cancel()
                    self._unmount()
                    if created or os.path.isdir(spec.mount_path):
                        self._remove_folder()
                        created = False
                    log.info("unmounted %s from %s", spec.store_id, spec.mount_path)
                    self.finished.set()
                    # Let `stop` requests read the result before the socket goes.
                    await trio.sleep(0.2)
                    outer.cancel_scope.cancel()
            return code
        finally:
            if self.mounted:
                self._unmount()
            if created:
                # Whatever failed after the folder was made, the folder memfs made goes.
                self._remove_folder()
            with contextlib.suppress(OSError):
                os.unlink(self.socket_path)
            self.cache.close()
            # Last: a new process of this store waits on the cache while this says "stopping".
            with contextlib.suppress(OSError):
                os.unlink(self.state_path)
            with contextlib.suppress(Exception):
                await self.client.aclose()
            self.stopped.set()

    def _remove_folder(self) -> None:
        remove_mount_folder(self.spec.mount_path)
        if not os.path.lexists(self.spec.mount_path):
            self.cache.set_meta("mount_folder", None)

    def _fs_busy(self) -> bool:
        """Whether the filesystem answered requests since the last call."""
        total = self.fs.requests.total()
        busy, self._fs_requests_seen = total != self._fs_requests_seen, total
        return busy

    async def _fuse_main(self) -> None:
        try:
            await pyfuse3.main()
        finally:
            self.stopping.set()

    def _unmount(self) -> None:
        if self.mounted:
            self.mounted = False
            self.engine.kernel = NoKernel()
            with contextlib.suppress(Exception):
                pyfuse3.close(unmount=True)

    async def _final_sync(self) -> int:
        """A full two-way pass within the timeout (deletes waive their window),
        then more while they make progress; report what is left."""
        spec = self.spec
        with trio.move_on_after(spec.final_sync_timeout) as scope:
            try:
                # A full two-way pass, then more while they make progress (deletes
                # are capped per pass) and something is still pending.
                report = await self.engine.run_pass(final=True)
                while self.engine.pending() and (report.pushed or report.deleted_remote):
                    report = await self.engine.run_pass(final=True)
            except SyncError as e:
                log.error("final sync of %s failed: %s", spec.store_id, e)
        if scope.cancelled_caught:
            log.error(
                "final sync of %s did not finish within %.0f s",
                spec.store_id,
                spec.final_sync_timeout,
            )
        pending = self.engine.pending()
        for path in pending:
            log.error(
                "not uploaded to %s: %s (kept in the cache; the next mount uploads it)",
                spec.store_id,
                path,
            )
        self.result = {"ok": not pending, "not_uploaded": pending}
        return 0 if not pending else 1

    async def _lifeline(self) -> None:
        """Stop when the foreground `memfs mount` that started this process is gone
        (its end of our stdin closed), whatever killed it."""
        with contextlib.suppress(OSError, trio.BrokenResourceError):
            async with trio.lowlevel.FdStream(os.dup(0)) as stream:
                while await stream.receive_some(4096):
                    pass
        log.warning(
            "the memfs mount process of %s is gone; stopping: final sync", self.spec.store_id
        )
        self.stopping.set()

    async def _signals(self, signals) -> None:
        async for _ in signals:
            log.info("stopping %s: final sync", self.spec.store_id)
            self.stopping.set()
            return

    async def _periodic(self) -> None:
        delay = self.spec.sync_interval
        while True:
            await trio.sleep(delay)
            try:
                await self.engine.run_pass()
                delay = self.spec.sync_interval
            except SyncError:
                delay = backoff_delay(self.spec.sync_interval, self.engine.status.failures_in_a_row)

    async def _prefetch(self) -> None:
        try:
            await self.engine.prefetch(self.spec.prefetch_concurrency)
        except MemfsError as e:
            log.warning("prefetch of %s stopped: %s", self.spec.store_id, e)
        except Exception:  # noqa: BLE001 - contents are fetched on first read instead
            log.exception("prefetch of %s stopped unexpectedly", self.spec.store_id)
        self.prefetched = True

    def status(self) -> dict[str, Any]:
        st = self.engine.status
        files = list(self.cache.files())
        return {
            "store_id": self.spec.store_id,
            "name": self.spec.name,
            "mount_path": self.spec.mount_path,
            "read_only": self.spec.read_only,
            "pid": os.getpid(),
            "files": len(files),
            "cached": sum(1 for f in files if f.cached),
            "prefetched": self.prefetched,
            "pending": self.engine.pending(),
            "refused": self.engine.refused(),
            "sync_mode": st.mode,
            "store_full": self.cache.full,
            "sync_mode_reason": st.mode_reason,
            "passes": st.passes,
            "last_pass": st.last.as_dict() if st.last else None,
            "last_error": st.last_error,
            "requests": self.client.stats.requests,
            "fuse_requests": dict(self.fs.requests),
        }

    def _write_state(self, *, stopping: bool = False) -> None:
        state = {
            "store_id": self.spec.store_id,
            "mount_path": self.spec.mount_path,
            "pid": os.getpid(),
            "socket": self.socket_path,
            "stopping": stopping,
        }
        tmp = self.state_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(state, f)
        os.replace(tmp, self.state_path)

    async def _control(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.socket_path)
        sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
        await sock.bind(self.socket_path)
        os.chmod(self.socket_path, 0o600)
        sock.listen(16)
        listener = trio.SocketListener(sock)
        task_status.started()
        await trio.serve_listeners(self._control_client, [listener])

    async def _control_client(self, stream: trio.SocketStream) -> None:
        async with stream:
            try:
                data = b""
                while not data.endswith(b"\n"):
                    chunk = await stream.receive_some(65536)
                    if not chunk:
                        break
                    data += chunk
                request = json.loads(data or b"{}")
                reply = await self._command(request.get("cmd"))
            except (ValueError, trio.BrokenResourceError):
                return
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await stream.send_all(json.dumps(reply).encode() + b"\n")

    async def _command(self, cmd: str | None) -> dict[str, Any]:
        if cmd == "status":
            return {"ok": True, "status": self.status()}
        if cmd == "sync":
            try:
                report = await self.engine.run_pass()
            except SyncError as e:
                return {"ok": False, "error": str(e)}
            return {"ok": True, "report": report.as_dict()}
        if cmd == "stop":
            self.stopping.set()
            await self.finished.wait()
            return dict(self.result)
        return {"ok": False, "error": f"unknown command {cmd!r}"}


async def open_cache(spec: StoreSpec) -> StoreCache:
    """The store's cache. While an earlier process of this store still holds it
    because it is finishing (its final sync), wait for it, at most the final
    sync's bound and a margin; a cache held by a process that is not stopping
    is refused at once."""
    deadline = time.monotonic() + spec.final_sync_timeout + 30
    waited = False
    while True:
        try:
            return StoreCache(spec.cache_dir, spec.store_id)
        except CacheInUse:
            if not _previous_is_stopping(spec) or time.monotonic() > deadline:
                raise
            if not waited:
                log.warning(
                    "waiting for the previous memfs process of %s to finish its final sync",
                    spec.store_id,
                )
                waited = True
            await trio.sleep(0.2)


def _previous_is_stopping(spec: StoreSpec) -> bool:
    try:
        with open(os.path.join(spec.runtime_dir, f"{spec.store_id}.json")) as f:
            state = json.load(f)
        os.kill(int(state["pid"]), 0)
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return bool(state.get("stopping"))


async def _store_main(spec: StoreSpec) -> int:
    ready_sent = False

    async def runner(task_status=trio.TASK_STATUS_IGNORED) -> None:
        nonlocal code
        proc = StoreProcess(spec, await open_cache(spec))
        code = await proc.run(task_status=task_status)

    code = 1
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(runner)
            sys.stdout.write("READY\n")
            sys.stdout.flush()
            ready_sent = True
    except (MemfsError, ExceptionGroup) as e:
        error = _memfs_error(e)
        if error is None:
            raise
        if not ready_sent:
            sys.stdout.write(f"ERROR {error}\n")
            sys.stdout.flush()
        log.error("%s", error)
        return 1
    return code


def _memfs_error(e: BaseException) -> MemfsError | None:
    """The MemfsError behind `e`: trio's nurseries wrap what a task raised in
    an ExceptionGroup, which would hide the sentence the supervisor needs."""
    while isinstance(e, BaseExceptionGroup) and len(e.exceptions) == 1:
        e = e.exceptions[0]
    return e if isinstance(e, MemfsError) else None


def main() -> int:
    # Every file and folder a store process makes (journal, contents, conflict
    # copies, state files) is the user's alone; the mount folder sets its own mode.
    os.umask(0o077)
    logging.basicConfig(
        level=os.environ.get("MEMFS_LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        spec = StoreSpec.from_json(sys.stdin.readline())
    except (ValueError, TypeError) as e:
        sys.stdout.write(f"ERROR the store process got no usable spec: {e}\n")
        return 2
    return trio.run(_store_main, spec)
