"""Following a session while it runs: the stores attached to it or detached
from it after memfs mounted its stores (`--work-item`, `--session`).

A follower reads the session again (`GET /v1/sessions/{id}`: one request per
session, whatever the number of its stores) once per `--session-check-interval`
(a minute by default), and compares its memory stores with those it has
mounted: a store detached since is final-synced and unmounted first, then a
store attached since is mounted at its path, with the same credentials and
settings as the first ones. A store is the same store while its id, access,
mount path and name stay the same; a change of any is a detach and an attach.
A session seen going from `running` to `idle` at one check (its agent's turn
is over) has each of its read-write store processes asked to push its local
changes at once (`push_now`), as the SDK's worker flushes when its session
goes idle.

Where it runs:

- `memfs run` and a foreground `memfs mount`: a task of the trio program
  with which the supervisor process waits (`SessionFollower.start`, then
  `Supervisor.run_follower`), which starts and stops the store processes
  through its `Supervisor` (`add`, `remove`). The supervisor stops the
  follower, waiting for what it is doing, before any final sync.
- `memfs mount --daemon`: a process of its own (`python -m
  memfs.supervisor._followd`, `start_daemon_follower`), which gets the
  session, its credentials and the settings as one line of JSON on stdin (so
  the token is in no argv and no environment), starts store processes as a
  daemon mount does, stops one as `memfs unmount` does, and runs until
  SIGTERM: `memfs unmount --all` sends it (`_unfollow.stop_followers`).

`memfs unmount --all`, and `memfs unmount PATH` of a mount a follower
holds, stop the follower first and wait until it has stopped, so that no
mount of its session appears afterwards: SIGTERM ends a daemon follower;
`UNFOLLOW_SIGNAL` (SIGUSR2) asks a foreground process to stop its follower
and go on (`memfs run`'s command keeps running), which removes the
session's file.

What a follower saw is in the session's file of the runtime folder
(`_session_records`), rewritten whole after each check: the session, the
follower's pid, when it last checked and checks next, its last error, and
each store attached or detached (or that could not be mounted) with its
time. `memfs status` shows it (`session_records`); the file goes when the
follower ends.

A check that fails (no answer, an error answer) is logged once, until a
check succeeds again, and tried again at the next period: it never unmounts
anything. So is a store listed that memfs cannot use (its id, its access or
its path), and a store that cannot be mounted is logged once and tried again
at each check while the session lists it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._exceptions import MemfsError, MountError, StoreError, SyncError
from .._logging import LogFormat
from ..api import Resource, parse_resources
from ..control import ControlClient, ErrorReply, StoreSpec, running_stores, runtime_dir
from ._api import api_client
from ._commands import GONE_TIMEOUT, _running
from ._session_read import CHECK_RETRIES, CHECK_TIMEOUT, session_state
from ._session_records import (
    MAX_EVENTS,
    FollowedStore,
    SessionEvent,
    SessionRecord,
    SessionToFollow,
    session_file,
    write_session_file,
)
from ._specs import build_specs, mount_path_clash
from ._supervisor import STOP_MARGIN, FinalSync, Supervisor

if TYPE_CHECKING:
    import trio

log = logging.getLogger("memfs.supervisor")

FOLLOWER_MODULE = "memfs.supervisor._followd"
"""The daemon follower's program: its own module, which the package does not import."""

Announce = Callable[[str, bool], None]
"""Where a follower tells a person what it did: a line, and whether it is a
problem (a file a final sync left behind) rather than news."""


def _resource_key(r: Resource) -> tuple[str, str, str, str]:
    """What makes a store of the session the same store for the follower."""
    return (r.memory_store_id, r.access, r.mount_path or "", r.name or "")


def _access(read_only: bool) -> str:
    return "read-only" if read_only else "read-write"


# ---------------------------------------------------------------- the follower


class SessionFollower:
    """Keeps the stores of one session mounted as the session lists them."""

    def __init__(
        self,
        session: SessionToFollow,
        supervisor: Supervisor,
        *,
        daemon: bool = False,
        announce: Announce | None = None,
        interval: float | None = None,
    ) -> None:
        self.session = session
        self.supervisor = supervisor
        self.daemon = daemon
        self.announce: Announce = announce or (lambda line, problem: None)
        self.interval = session.interval if interval is None else interval
        self.mounted: dict[tuple[str, str, str, str], FollowedStore] = {
            _resource_key(m.resource): m for m in session.mounted
        }
        self.runtime_dir = runtime_dir()
        self.path = session_file(self.runtime_dir, session.session_id, session.settings.cache_dir)
        self.record = SessionRecord(session.session_id, os.getpid(), daemon, time.time())
        self._stop_asked = False
        self._stop: trio.Event | None = None
        """Set with `_stop_asked` while `follow` runs: it wakes what waits."""
        self._failing: str | None = None
        """The failure of the last check, logged once until a check succeeds."""
        self._refused: dict[tuple[str, str, str, str], str] = {}
        """Stores listed that could not be mounted, and why (each logged once)."""
        self._refused_items: set[str] = set()
        self._attaching: str | None = None
        """The mount path of the store being mounted, in the file already."""
        self._status: str | None = None
        """The session's `status` at the last check that read it."""

    @property
    def session_id(self) -> str:
        return self.session.session_id

    # -------------------------------------------------------------- the file

    def write_record(self) -> None:
        """The session's file, with the mount paths the follower holds."""
        paths = [m.mount_path for m in self.mounted.values()]
        self.record.mount_paths = paths + ([self._attaching] if self._attaching else [])
        write_session_file(self.path, self.record)

    def remove_record(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.path)

    def _event(self, event: SessionEvent) -> None:
        self.record.events.append(event)
        del self.record.events[:-MAX_EVENTS]

    # -------------------------------------------------------------- running

    def start(self) -> None:
        """Follow the session from the supervisor's foreground wait
        (`Supervisor.run_follower`), which stops it before its stores stop;
        the session's file is written now."""
        self.write_record()
        self.supervisor.follower = self

    def stop_soon(self) -> None:
        """Ask the follower to stop after what it is doing (a signal handler may call it)."""
        self._stop_asked = True
        if self._stop is not None:
            self._stop.set()

    async def follow(self) -> None:
        """Check the session once per period until `stop_soon`: what it is
        doing then (a check, a final sync) finishes first, a store still
        starting is abandoned. Its file goes when it ends."""
        import trio

        self._stop = trio.Event()
        if self._stop_asked:
            self._stop.set()
        try:
            while True:
                with trio.move_on_after(self.interval):
                    await self._stop.wait()
                if self._stop_asked:
                    break
                try:
                    await self.check()
                except Exception:
                    log.exception(
                        "following session %s failed unexpectedly",
                        self.session.session_id,
                        extra={"event": "session_follow_bug"},
                    )
        finally:
            self.drop()

    def drop(self) -> None:
        """No more the supervisor's follower; the session's file goes."""
        if self.supervisor.follower is self:
            self.supervisor.follower = None
        self.remove_record()

    # -------------------------------------------------------------- one check

    async def check(self) -> None:
        """Read the session once; unmount what was detached, mount what was attached."""
        sid = self.session.session_id
        now = time.time()
        self.record.checked_at = now
        self.record.next_check_at = now + self.interval
        creds = self.session.creds
        try:
            async with api_client(creds, retries=CHECK_RETRIES, timeout=CHECK_TIMEOUT) as client:
                status, listed = await session_state(client, sid)
        except StoreError as e:
            # The kind of failure, not its text: each answer has its own request id.
            kind = f"{type(e).__name__} {getattr(e, 'status', '')}"
            self.record.last_error = f"cannot read session {sid}: {e}"
            if self._failing != kind:
                log.warning(
                    "cannot read session %s: %s; trying again in %g s, the mounts stay",
                    sid,
                    e,
                    self.interval,
                    extra={"event": "session_check_failed"},
                )
            self._failing = kind
            self.write_record()
            return
        if self._failing is not None:
            log.info("session %s can be read again", sid, extra={"event": "session_check_ok"})
        self._failing = None
        self.record.last_error = None
        await self._status_seen(status)
        wanted = self._usable(listed)
        for key in [k for k in self.mounted if k not in wanted]:
            if self._stop_asked:
                break
            await self._detach(self.mounted.pop(key))
        for key, resource in wanted.items():
            if self._stop_asked:
                break
            if key not in self.mounted:
                await self._attach(key, resource)
        for key in [k for k in self._refused if k not in wanted]:
            del self._refused[key]
        self.write_record()

    async def _status_seen(self, status: str) -> None:
        """A session seen going from `running` to `idle` (the agent's turn is
        over, as the SDK's worker sees it before its idle flush): each of its
        read-write stores is asked to push its local changes now."""
        was, self._status = self._status, status
        if was != "running" or status != "idle":
            return
        log.info(
            "session %s went idle: its stores push their local changes now",
            self.session.session_id,
            extra={"event": "session_idle"},
        )
        running = {(s.store_id, s.mount_path): s for s in running_stores(self.runtime_dir)}
        for store in self.mounted.values():
            state = running.get((store.store_id, store.mount_path))
            if store.read_only or state is None or state.stopping:
                continue
            try:
                reply = await ControlClient(state).push_now_async()
            except SyncError as e:
                reply = ErrorReply(str(e))
            if isinstance(reply, ErrorReply):
                log.warning(
                    "cannot ask the memfs process of %s to push: %s; its next pass does",
                    store.mount_path,
                    reply.error,
                    extra={"event": "session_push_failed", "store_id": store.store_id},
                )

    def _usable(self, listed: list[dict[str, Any]]) -> dict[tuple[str, str, str, str], Resource]:
        """The stores listed, by key; one memfs cannot use is logged (once) and left out."""
        out: dict[tuple[str, str, str, str], Resource] = {}
        for item in listed:
            try:
                (resource,) = parse_resources([item])
            except MemfsError as e:
                shown = str(item.get("memory_store_id"))[:80]
                if shown not in self._refused_items:
                    log.warning(
                        "session %s lists a store memfs cannot use: %s",
                        self.session.session_id,
                        str(e).replace("resources[0]", f"the store {shown!r}"),
                        extra={"event": "session_store_refused"},
                    )
                    self._refused_items.add(shown)
                continue
            out[_resource_key(resource)] = resource
        return out

    async def _attach(self, key: tuple[str, str, str, str], resource: Resource) -> None:
        sid = self.session.session_id
        try:
            (spec,) = build_specs(
                [resource],
                self.session.creds,
                self.session.settings,
                root=self.session.root,
                from_session=True,
            )
            self._check_free(spec)
            # In the file before it can appear: `memfs unmount` of another of
            # the session's mounts then stops it too.
            self._attaching = spec.mount_path
            self.write_record()
            mounted = await self.supervisor.add(spec, abandon=self._stop)
        except MemfsError as e:
            reason = str(e)
            if self._refused.get(key) != reason:
                log.error(
                    "cannot mount store %s, attached to session %s: %s",
                    resource.memory_store_id,
                    sid,
                    reason,
                    extra={"event": "session_attach_failed", "store_id": resource.memory_store_id},
                )
                self._event(
                    SessionEvent(
                        time.time(),
                        "not_mounted",
                        resource.memory_store_id,
                        resource.mount_path or "",
                        resource.access,
                        reason,
                    )
                )
            self._refused[key] = reason
            return
        finally:
            self._attaching = None
        if not mounted:
            log.info(
                "stopped following session %s while mounting store %s: it is not mounted",
                sid,
                resource.memory_store_id,
                extra={"event": "session_attach_abandoned", "store_id": resource.memory_store_id},
            )
            return
        self._refused.pop(key, None)
        store = FollowedStore(resource, spec.store_id, spec.mount_path, spec.read_only)
        self.mounted[key] = store
        self._event(
            SessionEvent(time.time(), "attached", spec.store_id, spec.mount_path, resource.access)
        )
        log.info(
            "store %s was attached to session %s: mounted at %s (%s)",
            spec.store_id,
            sid,
            spec.mount_path,
            _access(spec.read_only),
            extra={"event": "session_store_attached", "store_id": spec.store_id},
        )
        self.announce(
            f"mounted {spec.store_id} at {spec.mount_path} ({_access(spec.read_only)}), "
            f"attached to session {sid}",
            False,
        )

    def _check_free(self, spec: StoreSpec) -> None:
        for other in self.mounted.values():
            if other.mount_path == spec.mount_path:
                raise MountError(f"store {other.store_id} is mounted at {spec.mount_path} already")
            clash = mount_path_clash(
                (spec.store_id, spec.mount_path), (other.store_id, other.mount_path)
            )
            if clash is not None:
                raise MountError(clash)
            if other.store_id == spec.store_id:
                raise MountError(f"store {spec.store_id} is mounted at {other.mount_path} already")

    async def _detach(self, store: FollowedStore) -> None:
        sid = self.session.session_id
        result = await self._unmount(store)
        if result.failure is not None:
            detail = f"its final sync could not be confirmed: {result.failure}"
        elif result.not_uploaded:
            n = len(result.not_uploaded)
            detail = (
                f"its final sync left {n} file{'s' if n != 1 else ''} behind, "
                "kept in the cache for its next mount"
            )
        elif result.sync_error is not None:
            detail = f"nothing left to upload, but its final sync failed: {result.sync_error}"
        else:
            detail = "final sync done, nothing left to upload"
        self._event(
            SessionEvent(
                time.time(),
                "detached",
                store.store_id,
                store.mount_path,
                store.resource.access,
                detail,
                list(result.not_uploaded),
            )
        )
        if result.ok:
            log.info(
                "store %s was detached from session %s: %s; unmounted %s",
                store.store_id,
                sid,
                detail,
                store.mount_path,
                extra={"event": "session_store_detached", "store_id": store.store_id},
            )
        else:
            log.warning(
                "store %s was detached from session %s: %s; unmounted %s",
                store.store_id,
                sid,
                detail,
                store.mount_path,
                extra={"event": "session_detach_left", "store_id": store.store_id},
            )
        for path in result.not_uploaded:
            self.announce(f"not uploaded from {store.mount_path}: {path}", True)
        self.announce(
            f"unmounted {store.mount_path}, detached from session {sid} ({detail})",
            not result.ok,
        )

    async def _unmount(self, store: FollowedStore) -> FinalSync:
        """The final sync and unmount of a store: through the supervisor when
        it started the store, else over the store's control socket as `memfs
        unmount` does (the daemon follower's first stores)."""
        result = await self.supervisor.remove(store.mount_path)
        if result is not None:
            return result
        spec = StoreSpec(
            store_id=store.store_id,
            mount_path=store.mount_path,
            api_url=self.session.creds.api_url,
            token="",
            cache_dir=self.session.settings.cache_dir,
            runtime_dir=self.runtime_dir,
        )
        for state in running_stores(self.runtime_dir):
            if state.store_id != store.store_id or state.mount_path != store.mount_path:
                continue
            timeout = self.session.settings.final_sync_timeout + STOP_MARGIN
            try:
                reply = await ControlClient(state).stop_async(timeout=timeout)
            except SyncError as e:
                return FinalSync(spec, failure=str(e))
            await _gone(state.pid, GONE_TIMEOUT)
            if isinstance(reply, ErrorReply):
                return FinalSync(spec, failure=reply.error)
            return FinalSync(
                spec, not_uploaded=list(reply.not_uploaded), sync_error=reply.sync_error
            )
        return FinalSync(spec, failure="it was no longer mounted")


async def _gone(pid: int, timeout: float) -> None:
    """`_commands._wait_gone` in a trio program."""
    import trio

    with trio.move_on_after(timeout):
        while _running(pid):
            await trio.sleep(0.05)


# ---------------------------------------------------------------- the daemon follower


def start_daemon_follower(
    session: SessionToFollow,
    *,
    log_level: str,
    log_format: LogFormat,
    interval: float | None = None,
) -> int:
    """Start the follower of a `--daemon` mount, a process of its own, and
    wait until it follows; its pid. MountError when it could not start."""
    from .._children import child_env, start_process

    cache_dir = session.settings.cache_dir
    stderr = Supervisor._daemon_log(cache_dir, f"session-{session.session_id}.log")
    env = {**child_env(), "MEMFS_LOG_LEVEL": log_level, "MEMFS_LOG_FORMAT": log_format}
    proc = start_process(FOLLOWER_MODULE, env, stderr)
    assert proc.stdin is not None and proc.stdout is not None
    launch = {
        "session": session.to_json(),
        "interval": session.interval if interval is None else interval,
    }
    with contextlib.suppress(BrokenPipeError):
        proc.stdin.write(json.dumps(launch) + "\n")
        proc.stdin.close()
    line = proc.stdout.readline()
    proc.stdout.close()
    if not line.startswith("READY"):
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()
        cause = line[6:].strip() if line.startswith("ERROR ") else "its process exited"
        raise MountError(f"cannot follow session {session.session_id}: {cause}")
    return proc.pid
