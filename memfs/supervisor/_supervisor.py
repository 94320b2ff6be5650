"""One process per store, under one supervisor (pyfuse3 holds one FUSE
session per process).

The supervisor turns what the operator asked for (`--store`, `--resources`,
credentials) into one `StoreSpec` per store, refusing bad requests before
anything is mounted; starts a store process for each (`python -m
memfs.mount`, the spec with the token on its stdin); waits until every one
says READY, or stops the others and fails naming the store and the cause; and
then either returns (`--daemon`) or waits for SIGTERM/SIGINT and passes it
on, exiting 0 only when every store uploaded everything.

Running store processes are found through their state files and control
sockets in the runtime folder (`_mount.runtime_dir()`): `memfs unmount`,
`memfs sync` and `memfs status` talk to them there.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from .._exceptions import (
    ConfigError,
    MemfsError,
    MountError,
    StatusError,
    StoreError,
    SyncError,
)
from .._private import ensure_private_dir
from ..api import (
    ACCESS_READ_ONLY,
    ACCESS_READ_WRITE,
    DEFAULT_API_URL,
    MAX_STORES_PER_SESSION,
    SERVE_TOKEN_ENV,
    Resource,
    parse_resources,
    parse_work_item_secret,
    slugify,
)
from ..control import StoreSpec, runtime_dir
from ..mount import (
    force_unmount,
    is_stale_mount,
    memfs_mounts,
    mounted_source,
    remove_mount_folder,
)

log = logging.getLogger("memfs.supervisor")

READY_TIMEOUT = 300.0
MIN_SYNC_INTERVAL = 5.0
MAX_SYNC_CONCURRENCY = 32


def parse_store_arg(text: str) -> Resource:
    """`ID[:read_only|:read_write][=MOUNT_PATH]`."""
    head, sep, mount_path = text.partition("=")
    store_id, _, access = head.partition(":")
    access = access or ACCESS_READ_WRITE
    if not store_id:
        raise ConfigError(f"--store {text!r} names no store id")
    if access not in (ACCESS_READ_WRITE, ACCESS_READ_ONLY):
        raise ConfigError(
            f"--store {text!r}: the access must be read_only or read_write, not {access!r}"
        )
    if sep and not mount_path:
        raise ConfigError(f"--store {text!r} has an empty mount path after '='")
    return Resource(memory_store_id=store_id, access=access, mount_path=mount_path or None)


def load_resources(path: str) -> list[Resource]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise ConfigError(f"cannot read the resources file {path}: {e.strerror}")
    except ValueError as e:
        raise ConfigError(f"the resources file {path} is not JSON: {e}")
    return parse_resources(data)


def _read_secret_file(path: str, what: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            value = f.read().strip()
    except OSError as e:
        raise ConfigError(f"cannot read the {what} file {path}: {e.strerror or e}")
    except UnicodeDecodeError:
        raise ConfigError(f"the {what} file {path} is not UTF-8 text")
    if not value:
        raise ConfigError(f"the {what} file {path} is empty")
    return value


AUTH_BEARER = "bearer"
AUTH_API_KEY = "x-api-key"
API_KEY_PREFIX = "sk-ant-api"
"""A token that starts so is an API key, sent as `x-api-key`; any other as a bearer token."""

# Where credentials come from, after the flags, in their order of precedence,
# and how each kind travels: "token" (an API key by its prefix, else bearer),
# "secret" (a work item secret, whose sessions token is a bearer token), or
# always one header.
_ENV_SOURCES = (
    ("MEMFS_TOKEN", "token"),
    ("MEMFS_WORK_ITEM_SECRET", "secret"),
    ("ANTHROPIC_API_KEY", AUTH_API_KEY),
    ("ANTHROPIC_AUTH_TOKEN", AUTH_BEARER),
    ("ANTHROPIC_WORK_SECRET", "secret"),
)
URL_ENV = ("MEMFS_API_URL", "ANTHROPIC_BASE_URL")
SECRET_ENV = (*(name for name, _ in _ENV_SOURCES), SERVE_TOKEN_ENV)
"""Every variable that may hold a secret: none reaches a store process."""


@dataclass(frozen=True)
class Credentials:
    api_url: str
    token: str
    auth: str = AUTH_BEARER
    source: str = field(default="", compare=False)
    """Where the token came from: a flag or a variable's name (never the value)."""

    def __repr__(self) -> str:
        return (
            f"Credentials(api_url={self.api_url!r}, token=<hidden>, auth={self.auth!r}, "
            f"source={self.source!r})"
        )


def _token_auth(token: str) -> str:
    return AUTH_API_KEY if token.startswith(API_KEY_PREFIX) else AUTH_BEARER


def resolve_credentials(
    *,
    api_url: str | None,
    token_file: str | None = None,
    secret_file: str | None = None,
    env: Mapping[str, str] | None = None,
    default_url: str = DEFAULT_API_URL,
) -> Credentials | None:
    """The token, how it travels, and the URL; None when there is no token.

    Token, first found: --token-file, --secret-file, MEMFS_TOKEN,
    MEMFS_WORK_ITEM_SECRET, ANTHROPIC_API_KEY (x-api-key), ANTHROPIC_AUTH_TOKEN
    (bearer), ANTHROPIC_WORK_SECRET. A token from --token-file or MEMFS_TOKEN
    is an API key when it starts with `sk-ant-api`; a work item secret's
    sessions token is a bearer token. URL, first found: `api_url`,
    MEMFS_API_URL, ANTHROPIC_BASE_URL, the api_base_url of the secret in use,
    `default_url`. A variable set to blanks counts as unset."""
    env = os.environ if env is None else env
    found: tuple[str, str, str] | None = None  # (source, kind, text)
    if token_file:
        found = ("--token-file", "token", _read_secret_file(token_file, "token"))
    elif secret_file:
        found = ("--secret-file", "secret", _read_secret_file(secret_file, "work item secret"))
    else:
        for name, kind in _ENV_SOURCES:
            if env.get(name, "").strip():
                found = (name, kind, env[name].strip())
                break
    if found is None:
        return None
    source, kind, text = found
    secret_url = None
    if kind == "secret":
        secret = parse_work_item_secret(text)
        token, auth, secret_url = secret.sessions_token, AUTH_BEARER, secret.api_base_url
    else:
        token, auth = text, _token_auth(text) if kind == "token" else kind
    url = api_url or next((env[n].strip() for n in URL_ENV if env.get(n, "").strip()), None)
    url = url or secret_url or default_url
    return Credentials(url.rstrip("/"), token, auth, source)


def default_cache_dir() -> str:
    if os.geteuid() == 0:
        return "/var/cache/memfs"
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(xdg, "memfs")


def check_mount_path(path: str, store_id: str) -> str:
    if not os.path.isabs(path):
        raise ConfigError(f"the mount path {path!r} of {store_id} must be absolute")
    if ".." in path.split("/"):
        raise ConfigError(f"the mount path {path!r} of {store_id} may not contain '..'")
    return path


NAME_REFUSALS = frozenset({400, 401, 403, 404})
"""Answers to `GET /v1/memory_stores/{id}` after which a store mounts under its
id: the hosted API may refuse a sessions token there while the memory
endpoints serve it. A store that does not exist fails at its first listing."""


async def _store_names(
    creds: Credentials, store_ids: list[str]
) -> tuple[dict[str, str], dict[str, str]]:
    """The stores' names, and for each store the API refused to name, why."""
    from ..client import StoreClient

    names: dict[str, str] = {}
    refused: dict[str, str] = {}
    async with StoreClient(creds.api_url, creds.token, auth=creds.auth, max_retries=3) as client:
        for sid in store_ids:
            try:
                names[sid] = (await client.get_store(sid)).name
            except StatusError as e:
                if e.status not in NAME_REFUSALS:
                    raise MountError(f"cannot look up store {sid}: {e}")
                refused[sid] = f"the API answered {e.status} {e.type}"
            except StoreError as e:
                raise MountError(f"cannot look up store {sid}: {e}")
    return names, refused


def build_specs(
    resources: list[Resource],
    creds: Credentials | None,
    *,
    root: str,
    cache_dir: str,
    uid: int | None,
    gid: int | None,
    allow_other: bool,
    sync_interval: float,
    sync_deletions: str,
    final_sync_timeout: float,
    sync_concurrency: int = 16,
) -> list[StoreSpec]:
    """One spec per store, every refusal made before anything is mounted."""
    if len(resources) > MAX_STORES_PER_SESSION:
        raise ConfigError(
            f"{len(resources)} stores were given; at most {MAX_STORES_PER_SESSION} can be mounted at once"
        )
    if sync_interval < MIN_SYNC_INTERVAL:
        raise ConfigError(
            f"the sync interval must be at least {MIN_SYNC_INTERVAL:.0f} seconds, not {sync_interval:g}"
        )
    if final_sync_timeout <= 0:
        raise ConfigError("the final sync timeout must be a positive number of seconds")
    if not 1 <= sync_concurrency <= MAX_SYNC_CONCURRENCY:
        raise ConfigError(
            f"the sync concurrency must be between 1 and {MAX_SYNC_CONCURRENCY}, not {sync_concurrency}"
        )
    seen = set()
    for r in resources:
        if r.memory_store_id in seen:
            raise ConfigError(f"store {r.memory_store_id} is given twice")
        seen.add(r.memory_store_id)
    if not resources:
        return []
    if creds is None:
        raise ConfigError(
            "the session's memories cannot be mounted without a token: give --token-file or MEMFS_TOKEN, "
            "or the work item secret with --secret-file or MEMFS_WORK_ITEM_SECRET "
            "(or the SDKs' ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN or ANTHROPIC_WORK_SECRET)"
        )
    # Folders other users could write into are refused before anything mounts.
    ensure_private_dir(cache_dir, "cache folder", follow=True)
    ensure_private_dir(runtime_dir(), "runtime folder")
    need_names = [r.memory_store_id for r in resources if not r.mount_path and not r.name]
    names: dict[str, str] = {}
    refused: dict[str, str] = {}
    if need_names:
        import trio

        names, refused = trio.run(_store_names, creds, need_names)
    specs = []
    paths: dict[str, str] = {}
    for r in resources:
        sid = r.memory_store_id
        name = r.name or names.get(sid) or ""
        path = r.mount_path or os.path.join(root, slugify(name or sid))
        if not r.mount_path and not name:
            why = refused.get(sid, "it has no name")
            log.warning("cannot read the name of store %s (%s); mounting it at %s", sid, why, path)
        check_mount_path(path, r.memory_store_id)
        path = os.path.normpath(path)
        if path in paths:
            raise ConfigError(
                f"stores {paths[path]} and {r.memory_store_id} would both mount at {path}"
            )
        paths[path] = r.memory_store_id
        specs.append(
            StoreSpec(
                store_id=r.memory_store_id,
                mount_path=path,
                api_url=creds.api_url,
                token=creds.token,
                auth=creds.auth,
                cache_dir=cache_dir,
                runtime_dir=runtime_dir(),
                read_only=r.read_only,
                uid=uid,
                gid=gid,
                allow_other=allow_other,
                sync_interval=sync_interval,
                sync_deletions=sync_deletions,
                final_sync_timeout=final_sync_timeout,
                sync_concurrency=sync_concurrency,
                name=name,
            )
        )
    return specs


@dataclass
class _Child:
    spec: StoreSpec
    proc: subprocess.Popen
    ready: bool = False
    error: str | None = None


class Supervisor:
    """Starts one store process per spec and sees them through to the end."""

    def __init__(
        self, specs: list[StoreSpec], *, daemon: bool = False, log_level: str = "INFO"
    ) -> None:
        self.specs = specs
        self.daemon = daemon
        self.log_level = log_level
        self.children: list[_Child] = []

    def _start(self, spec: StoreSpec) -> _Child:
        spec = dataclasses.replace(spec, follow_parent=not self.daemon)
        env = {k: v for k, v in os.environ.items() if k not in SECRET_ENV}
        env["MEMFS_LOG_LEVEL"] = self.log_level
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
        # In the foreground the pipe stays open as a lifeline: when this process
        # dies, by any signal, the store process reads its end and stops.
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
                child: _Child = key.data
                line = key.fileobj.readline()  # type: ignore[union-attr]
                sel.unregister(key.fileobj)
                waiting -= 1
                if line.startswith("READY"):
                    child.ready = True
                else:
                    child.error = line[6:].strip() if line.startswith("ERROR ") else None
                    child.error = child.error or f"the store process exited ({child.proc.wait()})"
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
            limit = child.spec.final_sync_timeout + 30
            try:
                rc = child.proc.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                log.error(
                    "store %s did not stop within %.0f s; killing it", child.spec.store_id, limit
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

        def on_signal(signum, frame):
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
                    if c.proc.returncode not in (None, 0) and not getattr(c, "_reported", False):
                        log.error(
                            "store %s stopped with status %s", c.spec.store_id, c.proc.returncode
                        )
                        c._reported = True  # type: ignore[attr-defined]
                time.sleep(0.2)
        finally:
            for s, handler in old.items():
                signal.signal(s, handler)
        return self.stop_all()


# --------------------------------------------------------------- control


@dataclass
class RunningStore:
    store_id: str
    mount_path: str
    pid: int
    socket: str


def running_stores() -> list[RunningStore]:
    """Store processes of this machine, from their state files (stale ones are skipped)."""
    folder = runtime_dir()
    out = []
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    for name in names:
        if not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(folder, name)) as f:
                state = json.load(f)
            os.kill(int(state["pid"]), 0)
        except (OSError, ValueError, KeyError):
            continue
        out.append(
            RunningStore(state["store_id"], state["mount_path"], int(state["pid"]), state["socket"])
        )
    return out


def control(store: RunningStore, cmd: str, timeout: float = 300.0) -> dict:
    """Send one command to a store process and return its answer."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(store.socket)
            s.sendall(json.dumps({"cmd": cmd}).encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
    except OSError as e:
        raise SyncError(f"cannot reach the memfs process of {store.mount_path}: {e.strerror or e}")
    try:
        return json.loads(data)
    except ValueError:
        raise SyncError(f"the memfs process of {store.mount_path} gave no answer")


def select_stores(paths: list[str], *, all_if_empty: bool = True) -> list[RunningStore]:
    stores = running_stores()
    if not paths:
        if not all_if_empty:
            return []
        return stores
    chosen = []
    for p in paths:
        real = os.path.abspath(p)
        match = [s for s in stores if os.path.abspath(s.mount_path) == real]
        if not match:
            raise MountError(f"no memfs mount is running at {real}")
        chosen += match
    return chosen


def unmount(paths: list[str], *, all_: bool) -> int:
    """Stop the store processes of these mount paths with their final sync."""
    if not paths and not all_:
        raise ConfigError("name the mount paths to unmount, or give --all")
    stores = running_stores()
    targets: list[RunningStore] = []
    stale: list[str] = []
    if all_:
        targets = stores
        for _source, point, _fstype in memfs_mounts():
            if is_stale_mount(point) and not any(
                os.path.abspath(s.mount_path) == point for s in stores
            ):
                stale.append(point)
    else:
        for p in paths:
            real = os.path.abspath(p)
            match = [s for s in stores if os.path.abspath(s.mount_path) == real]
            if match:
                targets += match
            elif (mounted_source(real) or "").startswith("memfs:") and is_stale_mount(real):
                stale.append(real)
            else:
                raise MountError(f"no memfs mount is running at {real}")
    code = 0
    for store in targets:
        try:
            reply = control(store, "stop", timeout=600)
        except SyncError as e:
            log.error("%s", e)
            code = 1
            continue
        if not reply.get("ok"):
            code = 1
            for path in reply.get("not_uploaded", []):
                sys.stderr.write(f"memfs: not uploaded from {store.mount_path}: {path}\n")
        _wait_gone(store.pid, 60)
        print(f"unmounted {store.mount_path}")
    for point in stale:
        force_unmount(point)
        remove_mount_folder(point)
        print(f"cleaned up a stale mount at {point}")
    return code


def _wait_gone(pid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except OSError:
            return
        time.sleep(0.05)


def sync(paths: list[str]) -> list[tuple[RunningStore, dict]]:
    stores = select_stores(paths)
    if not stores:
        raise MountError("no memfs mounts are running")
    return [(s, _safe_control(s, "sync")) for s in stores]


def status() -> list[tuple[RunningStore, dict]]:
    return [(s, _safe_control(s, "status", timeout=10)) for s in running_stores()]


def _safe_control(store: RunningStore, cmd: str, timeout: float = 600) -> dict:
    try:
        return control(store, cmd, timeout)
    except MemfsError as e:
        return {"ok": False, "error": str(e)}
