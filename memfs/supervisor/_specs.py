"""From the settings (`MountSettings`) and the token (`resolve_credentials`) to one `StoreSpec` per
store, every refusal made before anything is mounted; and the supervisor's API calls. A mount path a
session gives must lead strictly under the mount root: whoever creates the session chooses it."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from .._exceptions import ConfigError, MountError, NotFound, StatusError, StoreError
from .._private import ensure_private_dir
from ..api import (
    ACCESS_READ_ONLY,
    ACCESS_READ_WRITE,
    DEFAULT_API_URL,
    MAX_STORES_PER_SESSION,
    SERVE_TOKEN_ENV,
    STORE_ID_FORM,
    Deletions,
    Resource,
    check_store_id,
    is_ancestor,
    parse_resources,
    parse_work_item_secret,
    slugify,
    store_id_problem,
)
from ..control import AuthHeader, StoreSettings, StoreSpec, runtime_dir
from ..mount import start_refusal

if TYPE_CHECKING:
    from ..client import StoreClient

log = logging.getLogger("memfs.supervisor")

T = TypeVar("T")

API_KEY_PREFIX = "sk-ant-api"
"""A token that starts so is an API key, sent as `x-api-key`; any other as a bearer token."""

_Found = Literal["token", "secret", "bearer", "x-api-key"]
"""What a source holds: a token, a work item secret, or a token for one header."""

ENV_SOURCES: tuple[tuple[str, _Found], ...] = (
    ("MEMFS_TOKEN", "token"),
    ("MEMFS_WORK_ITEM_SECRET", "secret"),
    ("ANTHROPIC_WORK_SECRET", "secret"),
    ("ANTHROPIC_API_KEY", "x-api-key"),
    ("ANTHROPIC_AUTH_TOKEN", "bearer"),
)
"""Where credentials come from after the flags, in their order of precedence."""
WORKER_OWN_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
"""A worker host's own credentials: never used when a work item secret is given."""
URL_ENV = ("MEMFS_API_URL", "ANTHROPIC_BASE_URL")
CREDENTIAL_SOURCES = (*(name for name, _ in ENV_SOURCES), SERVE_TOKEN_ENV)
"""The variables memfs reads secrets from: every one is in `SECRET_ENV`."""


@dataclass(frozen=True)
class Credentials:
    api_url: str
    token: str = field(repr=False)
    auth: AuthHeader = "bearer"
    source: str = field(default="", compare=False)
    """Where the token came from: a flag or a variable's name (never the value)."""


@dataclass(frozen=True)
class ConfigFallback:
    """What the config file (`where`) names: used only when no flag and no
    variable gives a token (or a URL)."""

    token_file: str | None = None
    secret_file: str | None = None
    api_url: str | None = None
    where: str = ""


def read_secret_file(path: str, what: str) -> str:
    """The text of the `what` file; ConfigError, quoting nothing of it, when
    it cannot be read or is not UTF-8."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise ConfigError(f"cannot read the {what} file {path}: {e.strerror or e}")
    except UnicodeDecodeError:
        raise ConfigError(f"the {what} file {path} is not UTF-8 text")


def _read_secret_file(path: str, what: str) -> str:
    value = read_secret_file(path, what).strip()
    if not value:
        raise ConfigError(f"the {what} file {path} is empty")
    return value


def resolve_credentials(
    *,
    api_url: str | None,
    token_file: str | None = None,
    secret_file: str | None = None,
    env: Mapping[str, str] | None = None,
    default_url: str = DEFAULT_API_URL,
    token_file_source: str = "--token-file",
    secret_file_source: str = "--secret-file",
    fallback: ConfigFallback = ConfigFallback(),
    work_item_secret: str | None = None,
    work_item_source: str = "the work item",
    for_session: bool = False,
) -> Credentials | None:
    """The token, how it travels, and the URL; None when there is no token.

    Token, first found: --token-file, --secret-file (`*_source` names the
    variable either came from), `work_item_secret`, then `ENV_SOURCES` in
    order, then `fallback` (the config file's). When a work item secret is
    given by any source, or `for_session` (a session's work), the host's own
    `WORKER_OWN_ENV` are not read. A token is an API key (x-api-key) when it
    starts with `sk-ant-api`, else a bearer token, as a secret's sessions
    token is. URL, first found: `api_url`, `URL_ENV`, the fallback's, the
    secret's api_base_url, `default_url`. A variable set to blanks is unset."""
    env = os.environ if env is None else env

    def given(name: str) -> bool:
        return bool(env.get(name, "").strip())

    secret_given = bool(
        secret_file
        or work_item_secret
        or given("MEMFS_WORK_ITEM_SECRET")
        or given("ANTHROPIC_WORK_SECRET")
        or fallback.secret_file
    )
    found: tuple[str, _Found, str] | None = None  # (source, what it holds, text)
    if token_file:
        found = (token_file_source, "token", _read_secret_file(token_file, "token"))
    elif secret_file:
        found = (secret_file_source, "secret", _read_secret_file(secret_file, "work item secret"))
    elif work_item_secret:
        found = (work_item_source, "secret", work_item_secret.strip())
    else:
        for name, kind in ENV_SOURCES:
            if (secret_given or for_session) and name in WORKER_OWN_ENV:
                continue
            if given(name):
                found = (name, kind, env[name].strip())
                break
    if found is None:
        if fallback.token_file:
            text = _read_secret_file(fallback.token_file, "token")
            found = (f"token-file in {fallback.where}", "token", text)
        elif fallback.secret_file:
            text = _read_secret_file(fallback.secret_file, "work item secret")
            found = (f"secret-file in {fallback.where}", "secret", text)
    if found is None:
        return None
    source, kind, text = found
    secret_url = None
    auth: AuthHeader
    if kind == "secret":
        secret = parse_work_item_secret(text)
        token, auth, secret_url = secret.sessions_token, "bearer", secret.api_base_url
    elif kind == "token":
        token, auth = text, "x-api-key" if text.startswith(API_KEY_PREFIX) else "bearer"
    else:
        token, auth = text, kind
    url = api_url or next((env[n].strip() for n in URL_ENV if given(n)), None)
    url = url or fallback.api_url or secret_url or default_url
    return Credentials(url.rstrip("/"), token, auth, source)


def api_client(
    creds: Credentials, *, retries: int, timeout: float = 30.0, start_timeout: float | None = None
) -> StoreClient:
    """A client of the API `creds` name. `start_timeout`: its first call is a
    mount's, its wait bounded and each attempt without an answer said."""
    from ..client import StoreClient

    return StoreClient(
        creds.api_url,
        creds.token,
        auth=creds.auth,
        max_retries=retries,
        timeout=timeout,
        start_timeout=start_timeout,
        on_wait=lambda sentence: log.warning("%s", sentence, extra={"event": "waiting_for_api"}),
    )


def call_api(
    creds: Credentials,
    request: Callable[[StoreClient], Awaitable[T]],
    start_timeout: float | None,
) -> T:
    """What `request` returns, from code that runs no event loop."""
    import trio

    async def with_client() -> T:
        async with api_client(creds, retries=3, start_timeout=start_timeout) as client:
            return await request(client)

    return trio.run(with_client)


async def session_state(client: StoreClient, session_id: str) -> tuple[str, list[dict[str, Any]]]:
    """The session's `status` and its memory stores as JSON objects for
    `parse_resources`, from one read."""
    session = await client.get_session(session_id)
    return session.status, [asdict(r) for r in session.memory_stores]


def fetch_session_resources(
    creds: Credentials, session_id: str, start_timeout: float | None = None
) -> list[Resource]:
    """The session's memory stores, checked as a resources file is."""
    try:
        _, stores = call_api(creds, lambda client: session_state(client, session_id), start_timeout)
    except StoreError as e:
        raise MountError(f"cannot read session {session_id} at {creds.api_url}: {e}")
    return parse_resources(stores)


NAME_REFUSALS = frozenset({400, 401, 403, 404})
"""Answers to `GET /v1/memory_stores/{id}` after which a store mounts under
its id: the hosted API may refuse a sessions token there alone."""


@dataclass(frozen=True, kw_only=True)
class MountSettings:
    """Every setting of a command that mounts, named as its flag is
    (`--sync-interval`: `sync_interval`), checked as the command line read it."""

    store: tuple[str, ...]
    resources: str | None
    work_item: str | None
    session: str | None
    root: str
    api_url: str | None
    token_file: str | None
    secret_file: str | None
    cache_dir: str | None
    uid: int | None
    gid: int | None
    allow_other: bool
    sync_interval: float
    sync_deletions: Deletions
    final_sync_timeout: float
    sync_concurrency: int
    start_timeout: float
    write_behind: bool
    cache_size: int
    cache_memory: int
    session_check_interval: float
    metrics_addr: str | None
    daemon: bool

    def store_settings(self) -> StoreSettings:
        """What every store of the mount is given, the cache folder made absolute."""
        shared = {f.name: getattr(self, f.name) for f in fields(StoreSettings)}
        cache_dir = os.path.abspath(self.cache_dir or default_cache_dir())
        return StoreSettings(**{**shared, "cache_dir": cache_dir})


def store_arg_problem(text: str) -> str | None:
    """What is wrong with a `--store` value, as the end of a sentence that
    names it first; None when nothing is."""
    head, sep, mount_path = text.partition("=")
    store_id, _, access = head.partition(":")
    if not store_id:
        return "names no store id"
    if store_id_problem(store_id) is not None:
        return f"names no store id of the API's form ({STORE_ID_FORM})"
    if access and access not in (ACCESS_READ_WRITE, ACCESS_READ_ONLY):
        return f"has access {access!r}: it must be read_only or read_write"
    return "has an empty mount path after '='" if sep and not mount_path else None


def parse_store_arg(text: str) -> Resource:
    """`ID[:read_only|:read_write][=MOUNT_PATH]`."""
    problem = store_arg_problem(text)
    if problem is not None:
        raise ConfigError(f"--store {text!r} {problem}")
    head, _, mount_path = text.partition("=")
    store_id, _, access = head.partition(":")
    return Resource(
        memory_store_id=store_id, access=access or ACCESS_READ_WRITE, mount_path=mount_path or None
    )


def load_resources(path: str) -> list[Resource]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise ConfigError(f"cannot read the resources file {path}: {e.strerror}")
    except (ValueError, RecursionError) as e:
        raise ConfigError(f"the resources file {path} is not JSON: {e}")
    return parse_resources(data)


def default_cache_dir() -> str:
    if os.geteuid() == 0:
        return "/var/cache/memfs"
    return os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "memfs")


def check_mount_path(path: str, store_id: str) -> str:
    """`path` normalised (`//`, `.` and a trailing slash dropped), when it is
    absolute and without `..`; ConfigError otherwise."""
    if not os.path.isabs(path):
        raise ConfigError(f"the mount path {path!r} of {store_id} must be absolute")
    if ".." in path.split("/"):
        raise ConfigError(f"the mount path {path!r} of {store_id} may not contain '..'")
    return "/" + os.path.normpath(path).lstrip("/")


def check_session_mount_path(path: str, store_id: str, root: str) -> None:
    """ConfigError unless a mount path a session gave leads strictly under the mount root."""
    place, real_root = os.path.realpath(path), os.path.realpath(root)
    if not is_ancestor(real_root, place):
        shown = path if place == path else f"{path} (which leads to {place})"
        raise ConfigError(
            f"the mount path {shown} of {store_id}, given by the session, is not a folder "
            f"under the mount root {root}; a session's stores mount only there"
        )


def mount_path_clash(one: tuple[str, str], other: tuple[str, str]) -> str | None:
    """Why two stores, (store id, normalised mount path) each, cannot both be
    mounted where their paths lead, one inside the other included; None when they can."""
    (one_id, one_path), (other_id, other_path) = one, other
    one_place, other_place = os.path.realpath(one_path), os.path.realpath(other_path)
    if one_place == other_place:
        return f"stores {other_id} and {one_id} would both mount at {one_path}"
    if is_ancestor(other_place, one_place) or is_ancestor(one_place, other_place):
        return (
            f"stores {other_id} and {one_id} would mount one inside the other "
            f"({other_path} and {one_path}); give each a folder of its own"
        )
    return None


async def _store_names(
    client: StoreClient, creds: Credentials, store_ids: list[str]
) -> tuple[dict[str, str], dict[str, str]]:
    """The stores' names, and for each store the API refused to name, why.
    A refusal of the token or a 404, confirmed on a memory endpoint, or a 404
    from a URL that names `/v1`, mounts nothing (`start_refusal`)."""
    names: dict[str, str] = {}
    refused: dict[str, str] = {}
    for sid in store_ids:
        try:
            names[sid] = (await client.get_store(sid)).name
        except StatusError as e:
            if e.status not in NAME_REFUSALS:
                raise MountError(f"cannot look up store {sid}: {e}")
            error: StoreError = e
            if e.status in (401, 404):
                try:
                    await client.list_memories_page(sid, limit=1)
                except StoreError as again:
                    error = again
            refusal = start_refusal(error, api_url=creds.api_url, credential_source=creds.source)
            if refusal is not None:
                raise MountError(f"cannot mount {sid}: {refusal}")
            if isinstance(error, NotFound) and error is not e:  # the store's memories too
                raise MountError(f"cannot mount {sid}: store {sid} was not found: {error}")
            refused[sid] = f"the API answered {e.status} {e.type}"
        except StoreError as e:
            raise MountError(f"cannot look up store {sid}: {e}")
    return names, refused


def check_store_count(resources: list[Resource]) -> None:
    """At most `MAX_STORES_PER_SESSION` stores; ConfigError saying so."""
    if len(resources) > MAX_STORES_PER_SESSION:
        raise ConfigError(
            f"{len(resources)} stores were given; at most {MAX_STORES_PER_SESSION} can be mounted at once"
        )


def build_specs(
    resources: list[Resource],
    creds: Credentials | None,
    settings: StoreSettings,
    *,
    root: str,
    from_session: bool = False,
) -> list[StoreSpec]:
    """One spec per store, every refusal made before anything is mounted.
    `from_session`: each mount path must lead under `root`, and the store
    process creates its folders from a descriptor of the root."""
    check_store_count(resources)
    seen = set()
    for r in resources:
        # Wherever it came from, a store id names nothing before it is checked.
        check_store_id(r.memory_store_id)
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
    ensure_private_dir(settings.cache_dir, "cache folder", follow=True)
    ensure_private_dir(runtime_dir(), "runtime folder")
    need_names = [r.memory_store_id for r in resources if not r.mount_path and not r.name]
    names: dict[str, str] = {}
    refused: dict[str, str] = {}
    if need_names:
        names, refused = call_api(
            creds,
            lambda client: _store_names(client, creds, need_names),
            settings.start_timeout,
        )
    specs: list[StoreSpec] = []
    for r in resources:
        sid = r.memory_store_id
        name = r.name or names.get(sid) or ""
        path = r.mount_path or os.path.join(root, slugify(name or sid))
        if not r.mount_path and not name:
            why = refused.get(sid, "it has no name")
            log.warning(
                "cannot read the name of store %s (%s); mounting it at %s",
                sid,
                why,
                path,
                extra={"event": "store_name_unknown"},
            )
        path = check_mount_path(path, sid)
        if from_session:
            check_session_mount_path(path, sid, root)
        for taken in specs:
            clash = mount_path_clash((sid, path), (taken.store_id, taken.mount_path))
            if clash is not None:
                raise ConfigError(clash)
        specs.append(
            StoreSpec(
                store_id=sid,
                mount_path=path,
                api_url=creds.api_url,
                token=creds.token,
                auth=creds.auth,
                runtime_dir=runtime_dir(),
                credential_source=creds.source,
                read_only=r.read_only,
                name=name,
                mount_root=os.path.abspath(root),
                confined_to_root=from_session,
                stores_mounted=len(resources),
                **settings.settings(),
            )
        )
    return specs
