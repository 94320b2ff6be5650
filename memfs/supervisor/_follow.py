"""Following a session (design.md): once per `--session-check-interval` it
is read, the stores detached since final-synced and unmounted, those attached
mounted. A failed check unmounts nothing. Its session file in the runtime
folder is what `memfs status` prints and `memfs unmount` reads."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from .._children import child_env
from .._exceptions import MemfsError, MountError, StoreError, SyncError
from .._logging import LogFormat
from ..api import Resource, parse_resources
from ..control import (
    ControlClient,
    ErrorReply,
    StateFile,
    StoreSettings,
    StoreSpec,
    known_fields,
    process_alive,
    running_stores,
    runtime_dir,
)
from ._specs import (
    Credentials,
    MountSettings,
    api_client,
    build_specs,
    fetch_session_resources,
    mount_path_clash,
    session_state,
)
from ._supervisor import (
    GONE_TIMEOUT,
    FinalSync,
    Supervisor,
    ask_final_sync,
    daemon_log,
    exited,
    start_helper,
)

log = logging.getLogger("memfs.supervisor")

DEFAULT_SESSION_CHECK_INTERVAL = 60.0
MIN_SESSION_CHECK_INTERVAL = 0.5
MAX_EVENTS = 200
"""Events a session's file keeps (the oldest go first)."""
FOLLOWER_MODULE = "memfs.supervisor._followd"


@dataclass(frozen=True)
class FollowedStore:
    resource: Resource
    mount_path: str

    @property
    def store_id(self) -> str:
        return self.resource.memory_store_id


@dataclass
class SessionToFollow:
    """A session whose stores are mounted, and what a follower needs to mount more."""

    session_id: str
    creds: Credentials = field(repr=False)
    settings: StoreSettings
    root: str
    mounted: list[FollowedStore] = field(default_factory=list)
    interval: float = DEFAULT_SESSION_CHECK_INTERVAL

    def to_json(self) -> dict[str, Any]:
        """For the daemon follower's stdin only: it holds the token."""
        return {
            "session_id": self.session_id,
            "creds": asdict(self.creds),
            "spec_settings": {**self.settings.to_json(), "root": self.root},
            "mounted": [asdict(m) for m in self.mounted],
            "interval": self.interval,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SessionToFollow:
        settings = dict(d["spec_settings"])
        root = settings.pop("root")
        mounted = [FollowedStore(Resource(**m["resource"]), m["mount_path"]) for m in d["mounted"]]
        creds = Credentials(**d["creds"])
        each = StoreSettings.from_json(settings)
        return cls(d["session_id"], creds, each, root, mounted, float(d["interval"]))


def session_plan(
    creds: Credentials, session_id: str, mount: MountSettings
) -> tuple[list[StoreSpec], SessionToFollow]:
    """The specs of the session's stores and the session to follow."""
    resources = fetch_session_resources(creds, session_id, mount.start_timeout)
    each = mount.store_settings()
    specs = build_specs(resources, creds, each, root=mount.root, from_session=True)
    mounted = [FollowedStore(r, s.mount_path) for r, s in zip(resources, specs, strict=True)]
    interval = mount.session_check_interval
    return specs, SessionToFollow(session_id, creds, each, mount.root, mounted, interval)


@dataclass
class SessionEvent:
    """A store `attached`, `detached` or `not_mounted` while followed."""

    at: float
    event: str
    store_id: str
    mount_path: str
    access: str
    detail: str | None = None
    not_uploaded: list[str] = field(default_factory=list)


@dataclass
class SessionRecord:
    """What a session's file says: `memfs status` prints it."""

    session_id: str
    pid: int
    daemon: bool
    started_at: float
    checked_at: float | None = None
    next_check_at: float | None = None
    last_error: str | None = None
    events: list[SessionEvent] = field(default_factory=list)
    mount_paths: list[str] | None = None
    """Those the follower holds or is mounting (None from an older memfs: unknown)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: object) -> SessionRecord:
        values = known_fields(cls, data, "a session file holds a JSON object")
        values["events"] = [SessionEvent(**e) for e in values.get("events", [])]
        return cls(**values)


def session_files(folder: str | None = None) -> list[tuple[str, SessionRecord]]:
    """Each session file of the runtime folder whose follower is alive, with its record."""
    folder = runtime_dir() if folder is None else folder
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    found = []
    for name in names:
        if not name.endswith(".session"):
            continue
        path = os.path.join(folder, name)
        try:
            with open(path, "rb") as f:
                record = SessionRecord.from_json(json.loads(f.read()))
        except (OSError, ValueError, TypeError):
            continue
        if process_alive(record.pid):
            found.append((path, record))
    return found


def session_records() -> list[SessionRecord]:
    """Every followed session of this machine whose follower is alive."""
    return [record for _, record in session_files()]


Announce = Callable[[str, bool], None]
"""Where a follower tells a person what it did: a line, and whether it is a problem."""

Key = tuple[str, str, str, str]


def _key(r: Resource) -> Key:
    """What makes a store of the session the same store for the follower."""
    return (r.memory_store_id, r.access, r.mount_path or "", r.name or "")


class SessionFollower:
    """Keeps the stores of one session mounted as the session lists them."""

    def __init__(
        self,
        session: SessionToFollow,
        supervisor: Supervisor,
        announce: Announce | None = None,
    ) -> None:
        self.session = session
        self.supervisor = supervisor
        self.announce: Announce = announce or (lambda line, problem: None)
        self.mounted = {_key(m.resource): m for m in session.mounted}
        self.runtime_dir = runtime_dir()
        cache_dir = os.fsencode(os.path.realpath(session.settings.cache_dir))
        name = f"session-{session.session_id}-{hashlib.sha256(cache_dir).hexdigest()[:12]}.session"
        self.file = StateFile(os.path.join(self.runtime_dir, name))
        self.record = SessionRecord(session.session_id, os.getpid(), supervisor.daemon, time.time())
        import trio

        self._stop = trio.Event()
        self._failing: str | None = None  # the kind of the last check's failure
        self._refused: dict[Key, str] = {}  # stores that could not be mounted, and why
        self._refused_items: set[str] = set()
        self._attaching: str | None = None  # the mount path of the store being mounted
        self._status: str | None = None  # the session's status at the last check

    @property
    def session_id(self) -> str:
        return self.session.session_id

    def write_record(self) -> None:
        paths = [m.mount_path for m in self.mounted.values()]
        self.record.mount_paths = paths + ([self._attaching] if self._attaching else [])
        self.file.write(json.dumps(self.record.to_json()))

    def _event(self, *fields: Any, **more: Any) -> None:
        self.record.events.append(SessionEvent(time.time(), *fields, **more))
        del self.record.events[:-MAX_EVENTS]

    def start(self) -> None:
        """Follow from the supervisor's foreground wait (`run_follower`)."""
        self.write_record()
        self.supervisor.follower = self

    def stop_soon(self) -> None:
        """Stop after what it is doing (a signal handler may call it)."""
        self._stop.set()

    async def follow(self) -> None:
        """Check the session once per period until `stop_soon`, which a check
        under way sees through; a store still starting is abandoned."""
        import trio

        try:
            while True:
                with trio.move_on_after(self.session.interval):
                    await self._stop.wait()
                if self._stop.is_set():
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
        self.file.remove()

    async def check(self) -> None:
        sid = self.session_id
        interval = self.session.interval
        self.record.checked_at = time.time()
        self.record.next_check_at = self.record.checked_at + interval
        try:
            async with api_client(self.session.creds, retries=2, timeout=15.0) as client:
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
            if self._stop.is_set():
                break
            await self._detach(self.mounted.pop(key))
        for key, resource in wanted.items():
            if self._stop.is_set():
                break
            if key not in self.mounted:
                await self._attach(key, resource)
        self._refused = {k: why for k, why in self._refused.items() if k in wanted}
        self.write_record()

    async def _status_seen(self, status: str) -> None:
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
            if store.resource.read_only or state is None or state.stopping:
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
        """The stores listed, by key, less those memfs cannot use."""
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
        self.mounted[key] = FollowedStore(resource, spec.mount_path)
        self._event("attached", store_id, spec.mount_path, resource.access)
        where = f"{spec.mount_path} ({'read-only' if spec.read_only else 'read-write'})"
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
        """Through the supervisor when it started the store, else over its
        control socket (the daemon follower's first stores)."""
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
    wait until it follows; its pid."""
    stderr = daemon_log(session.settings.cache_dir, f"session-{session.session_id}.log")
    env = {**child_env(), "MEMFS_LOG_LEVEL": log_level, "MEMFS_LOG_FORMAT": log_format}
    launch = json.dumps(session.to_json())
    what = f"follow session {session.session_id}"
    return start_helper(FOLLOWER_MODULE, env, stderr, launch, what).pid
