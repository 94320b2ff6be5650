"""Following a session while it runs: the stores attached to it or detached
from it after memfs mounted its stores (`--work-item`, `--session`).

Once per `--session-check-interval` a follower reads the session (one
request, whatever the number of its stores) and compares its memory stores
with those it has mounted: a store detached since is final-synced and
unmounted first, then one attached since is mounted with the same
credentials and settings. A store is the same while its id, access, mount
path and name stay the same. A session seen going from `running` to `idle`
has its read-write stores asked to push their changes now (`push_now`), as
the SDK's worker flushes. A check that fails, a store memfs cannot use and
a store that cannot be mounted are each logged once and tried again at the
next check; a failed check never unmounts anything.

It runs as a task of the foreground supervisor's trio program (`memfs
run`, `memfs mount`), through its `add` and `remove`; or, for `memfs mount
--daemon`, in a process of its own (`_followd`, `start_daemon_follower`)
handed the session on stdin (the token in no argv, no environment) that
runs until SIGTERM. What it saw is in the session's file (`_session_records`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._children import child_env
from .._exceptions import MemfsError, MountError, StoreError, SyncError
from .._logging import LogFormat
from ..api import Resource, parse_resources
from ..control import ControlClient, ErrorReply, StoreSpec, running_stores, runtime_dir
from ._api import api_client, session_state
from ._commands import GONE_TIMEOUT
from ._session_records import (
    FOLLOWER_MODULE,
    MAX_EVENTS,
    FollowedStore,
    SessionEvent,
    SessionRecord,
    SessionToFollow,
    session_file,
)
from ._specs import build_specs, mount_path_clash
from ._supervisor import FinalSync, Supervisor, ask_final_sync, daemon_log, exited, start_helper

if TYPE_CHECKING:
    import trio

log = logging.getLogger("memfs.supervisor")

CHECK_TIMEOUT = 15.0
CHECK_RETRIES = 2
"""A check: seconds an attempt may take, and its retries."""

Announce = Callable[[str, bool], None]
"""Where a follower tells a person what it did: a line, and whether it is a
problem (a file a final sync left behind) rather than news."""

Key = tuple[str, str, str, str]


def _key(r: Resource) -> Key:
    """What makes a store of the session the same store for the follower."""
    return (r.memory_store_id, r.access, r.mount_path or "", r.name or "")


def _access(read_only: bool) -> str:
    return "read-only" if read_only else "read-write"


class SessionFollower:
    """Keeps the stores of one session mounted as the session lists them."""

    def __init__(
        self,
        session: SessionToFollow,
        supervisor: Supervisor,
        *,
        daemon: bool = False,
        announce: Announce | None = None,
    ) -> None:
        self.session = session
        self.supervisor = supervisor
        self.announce: Announce = announce or (lambda line, problem: None)
        self.mounted = {_key(m.resource): m for m in session.mounted}
        self.runtime_dir = runtime_dir()
        self.path = session_file(self.runtime_dir, session.session_id, session.settings.cache_dir)
        self.record = SessionRecord(session.session_id, os.getpid(), daemon, time.time())
        self._stop_asked = False
        self._stop: trio.Event | None = None
        """Set with `_stop_asked` while `follow` runs: it wakes what waits."""
        self._failing: str | None = None
        """The kind of failure of the last check, logged once until a check succeeds."""
        self._refused: dict[Key, str] = {}
        """Stores listed that could not be mounted, and why (each logged once)."""
        self._refused_items: set[str] = set()
        self._attaching: str | None = None
        """The mount path of the store being mounted, in the file already."""
        self._status: str | None = None
        """The session's `status` at the last check."""

    @property
    def session_id(self) -> str:
        return self.session.session_id

    def write_record(self) -> None:
        """The session's file, with the mount paths the follower holds."""
        paths = [m.mount_path for m in self.mounted.values()]
        self.record.mount_paths = paths + ([self._attaching] if self._attaching else [])
        self.record.write(self.path)

    def _event(self, *fields: Any, **more: Any) -> None:
        self.record.events.append(SessionEvent(time.time(), *fields, **more))
        del self.record.events[:-MAX_EVENTS]

    def start(self) -> None:
        """Follow from the supervisor's foreground wait (`run_follower`),
        which stops it before its stores stop; the session's file is written now."""
        self.write_record()
        self.supervisor.follower = self

    def stop_soon(self) -> None:
        """Stop after what it is doing (a signal handler may call it)."""
        self._stop_asked = True
        if self._stop is not None:
            self._stop.set()

    async def follow(self) -> None:
        """Check the session once per period until `stop_soon`: a check or a
        final sync under way finishes first, a store still starting is
        abandoned. Its file goes when it ends."""
        import trio

        self._stop = trio.Event()
        if self._stop_asked:
            self._stop.set()
        try:
            while True:
                with trio.move_on_after(self.session.interval):
                    await self._stop.wait()
                if self._stop_asked:
                    break
                try:
                    await self.check()
                except Exception:
                    log.exception(
                        "following session %s failed unexpectedly",
                        self.session_id,
                        extra={"event": "session_follow_bug"},
                    )
        finally:
            self.drop()

    def drop(self) -> None:
        """No more the supervisor's follower; the session's file goes."""
        if self.supervisor.follower is self:
            self.supervisor.follower = None
        with contextlib.suppress(OSError):
            os.unlink(self.path)

    async def check(self) -> None:
        """Read the session once; unmount what was detached, mount what was attached."""
        sid = self.session_id
        interval = self.session.interval
        self.record.checked_at = time.time()
        self.record.next_check_at = self.record.checked_at + interval
        try:
            async with api_client(
                self.session.creds, retries=CHECK_RETRIES, timeout=CHECK_TIMEOUT
            ) as client:
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
                    interval,
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
        self._refused = {k: why for k, why in self._refused.items() if k in wanted}
        self.write_record()

    async def _status_seen(self, status: str) -> None:
        """From `running` to `idle` (the agent's turn is over): each
        read-write store is asked to push its local changes now."""
        was, self._status = self._status, status
        if was != "running" or status != "idle":
            return
        log.info(
            "session %s went idle: its stores push their local changes now",
            self.session_id,
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

    def _usable(self, listed: list[dict[str, Any]]) -> dict[Key, Resource]:
        """The stores listed, by key; one memfs cannot use is logged (once) and left out."""
        out: dict[Key, Resource] = {}
        for item in listed:
            try:
                (resource,) = parse_resources([item])
            except MemfsError as e:
                shown = str(item.get("memory_store_id"))[:80]
                if shown not in self._refused_items:
                    log.warning(
                        "session %s lists a store memfs cannot use: %s",
                        self.session_id,
                        str(e).replace("resources[0]", f"the store {shown!r}"),
                        extra={"event": "session_store_refused"},
                    )
                    self._refused_items.add(shown)
                continue
            out[_key(resource)] = resource
        return out

    async def _attach(self, key: Key, resource: Resource) -> None:
        sid = self.session_id
        store_id = resource.memory_store_id
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
                    store_id,
                    sid,
                    reason,
                    extra={"event": "session_attach_failed", "store_id": store_id},
                )
                path = resource.mount_path or ""
                self._event("not_mounted", store_id, path, resource.access, reason)
            self._refused[key] = reason
            return
        finally:
            self._attaching = None
        if not mounted:
            log.info(
                "stopped following session %s while mounting store %s: it is not mounted",
                sid,
                store_id,
                extra={"event": "session_attach_abandoned", "store_id": store_id},
            )
            return
        self._refused.pop(key, None)
        self.mounted[key] = FollowedStore(resource, store_id, spec.mount_path, spec.read_only)
        self._event("attached", store_id, spec.mount_path, resource.access)
        where = f"{spec.mount_path} ({_access(spec.read_only)})"
        log.info(
            "store %s was attached to session %s: mounted at %s",
            store_id,
            sid,
            where,
            extra={"event": "session_store_attached", "store_id": store_id},
        )
        self.announce(f"mounted {store_id} at {where}, attached to session {sid}", False)

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
        sid = self.session_id
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
        left = list(result.not_uploaded)
        self._event(
            "detached", store.store_id, store.mount_path, store.resource.access, detail, left
        )
        args = (store.store_id, sid, detail, store.mount_path)
        if result.ok:
            log.info(
                "store %s was detached from session %s: %s; unmounted %s",
                *args,
                extra={"event": "session_store_detached", "store_id": store.store_id},
            )
        else:
            log.warning(
                "store %s was detached from session %s: %s; unmounted %s",
                *args,
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
            runtime_dir=self.runtime_dir,
            **self.session.settings.settings(),
        )
        for state in running_stores(self.runtime_dir):
            if (state.store_id, state.mount_path) == (store.store_id, store.mount_path):
                try:
                    result = await ask_final_sync(spec, state)
                except SyncError as e:
                    return FinalSync(spec, failure=str(e))
                await exited(state.pid, GONE_TIMEOUT)
                return result
        return FinalSync(spec, failure="it was no longer mounted")


def start_daemon_follower(
    session: SessionToFollow, *, log_level: str, log_format: LogFormat
) -> int:
    """Start the follower of a `--daemon` mount, a process of its own, and
    wait until it follows; its pid. MountError when it could not start."""
    stderr = daemon_log(session.settings.cache_dir, f"session-{session.session_id}.log")
    env = {**child_env(), "MEMFS_LOG_LEVEL": log_level, "MEMFS_LOG_FORMAT": log_format}
    launch = json.dumps(session.to_json())
    what = f"follow session {session.session_id}"
    return start_helper(FOLLOWER_MODULE, env, stderr, launch, what).pid
