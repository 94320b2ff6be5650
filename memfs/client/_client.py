"""`StoreClient`: the only way memfs talks to a store, under trio. Its promises (headers, one
bounded pool, retries, `stats`, a `StoreError` for every failure, a token never logged nor shown)
are docs/client.md's."""

from __future__ import annotations

import logging
import ssl
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from contextlib import aclosing, suppress
from typing import Any, TypedDict, TypeVar, Unpack
from urllib.parse import quote

import httpx

from .._exceptions import ConfigError, NotFound, PathConflict, PreconditionFailed, StoreError
from .._version import __version__
from ..api import (
    ACCESS_READ_WRITE,
    ANTHROPIC_VERSION,
    BETA,
    SESSIONS_BETA,
    AuthHeader,
    CreatedSession,
    Memory,
    MemoryPrefix,
    MemoryStore,
    MemoryVersion,
    Page,
    Resource,
    Session,
    SessionResource,
    content_sha256,
    normalize_path,
    parent_path,
)
from ._sending import ClientStats, Request, RetryPolicy, Sender, StartWait, status_error

log = logging.getLogger("memfs.client")

T = TypeVar("T")

_PARAMETER_NAMES = {"created_at_gte": "created_at[gte]", "created_at_lte": "created_at[lte]"}


def _url(*parts: str) -> str:
    """`/v1/` and the parts, each quoted whole (an id cannot add a segment)."""
    return "/v1/" + "/".join(quote(part, safe="") for part in parts)


def _params(**values: Any) -> dict[str, str]:
    """The query parameters of the values given (None: left out), in the API's words."""
    return {
        _PARAMETER_NAMES.get(key, key): str(value).lower()
        if isinstance(value, bool)
        else str(value)
        for key, value in values.items()
        if value is not None
    }


def _given(**values: Any) -> dict[str, Any]:
    """The body fields of the values given (None: left out, the store keeps its own)."""
    return {key: value for key, value in values.items() if value is not None}


class StoreFilters(TypedDict, total=False):
    include_archived: bool
    created_at_gte: str | None
    created_at_lte: str | None


class MemoryFilters(TypedDict, total=False):
    path_prefix: str | None
    depth: int | None
    view: str | None


class VersionFilters(TypedDict, total=False):
    """Every filter given must hold: `memory_id` the memory's versions, the other ids
    those whose `created_by` carries them; the dates bound `created_at`, ends included."""

    memory_id: str | None
    operation: str | None
    created_at_gte: str | None
    created_at_lte: str | None
    session_id: str | None
    api_key_id: str | None
    service_account_id: str | None
    view: str | None


def _memory_item(d: dict[str, Any]) -> Memory | MemoryPrefix:
    if d.get("type") == "memory_prefix":
        return MemoryPrefix(path=d["path"])
    return Memory.from_json(d)


def _page(data: Any, item: Callable[[dict[str, Any]], T]) -> Page[T]:
    return Page([item(d) for d in data.get("data", [])], data.get("next_page"))


async def _every_item(
    fetch_page: Callable[[str | None], Awaitable[Page[T]]],
) -> AsyncGenerator[T, None]:
    """Every item of a paginated listing, following `next_page` to the end."""
    page: str | None = None
    while True:
        result = await fetch_page(page)
        for item in result.data:
            yield item
        if not (page := result.next_page):
            return


def _holds(memory: Memory, path: str | None, content: str | None) -> bool:
    """Whether the store's memory is what a call whose answer was lost sent."""
    return (path is None or memory.path == normalize_path(path)) and (
        content is None or memory.content_sha256 == content_sha256(content.encode("utf-8"))
    )


class _Endpoints:
    """Stores, memories and versions."""

    _send: Sender

    async def _delete(self, operation: str, url: str, **request: Unpack[Request]) -> bool:
        """Send a delete; True when a 404 after a retried attempt says the
        attempt whose answer was lost did it (which counts as done)."""
        answer = await self._send.exchange(operation, "DELETE", url, **request)
        if answer.response.status_code == 404 and answer.attempts > 1:
            return True
        self._send.decode(answer)
        return False

    async def create_store(
        self, name: str, *, description: str | None = None, metadata: dict[str, str] | None = None
    ) -> MemoryStore:
        body = {"name": name, **_given(description=description, metadata=metadata)}
        data = await self._send.call("create_store", "POST", "/v1/memory_stores", json=body)
        return MemoryStore.from_json(data)

    async def get_store(self, store_id: str) -> MemoryStore:
        data = await self._send.call("get_store", "GET", _url("memory_stores", store_id))
        return MemoryStore.from_json(data)

    async def update_store(
        self,
        store_id: str,
        *,
        name: str | None = None,
        description: str | None = None,
        metadata: dict[str, str | None] | None = None,
    ) -> MemoryStore:
        """Patch a store; in `metadata`, a None value deletes that key."""
        body = _given(name=name, description=description, metadata=metadata)
        data = await self._send.call(
            "update_store", "POST", _url("memory_stores", store_id), json=body
        )
        return MemoryStore.from_json(data)

    async def archive_store(self, store_id: str) -> MemoryStore:
        data = await self._send.call(
            "archive_store", "POST", _url("memory_stores", store_id, "archive"), json={}
        )
        return MemoryStore.from_json(data)

    async def delete_store(self, store_id: str) -> None:
        """Delete a store with its memories and versions (a 404 after a retry is done)."""
        await self._delete("delete_store", _url("memory_stores", store_id))

    async def list_stores_page(
        self, *, limit: int | None = None, page: str | None = None, **filters: Unpack[StoreFilters]
    ) -> Page[MemoryStore]:
        """One page of stores in creation order."""
        filters.setdefault("include_archived", False)
        params = _params(**filters, limit=limit, page=page)
        data = await self._send.call("list_stores_page", "GET", "/v1/memory_stores", params=params)
        return _page(data, MemoryStore.from_json)

    def iter_stores(
        self, *, limit: int = 100, **filters: Unpack[StoreFilters]
    ) -> AsyncGenerator[MemoryStore, None]:
        return _every_item(lambda page: self.list_stores_page(limit=limit, page=page, **filters))

    async def create_memory(
        self, store_id: str, path: str, content: str, *, view: str | None = None
    ) -> Memory:
        """Create a memory; the store never overwrites (PathConflict). A
        retried create whose path conflict is with exactly what it sent (an
        attempt whose answer was lost) answers that memory."""
        answer = await self._send.exchange(
            "create_memory",
            "POST",
            _url("memory_stores", store_id, "memories"),
            params=_params(view=view),
            json={"path": path, "content": content},
        )
        if answer.response.status_code == 409 and answer.attempts > 1:
            error = status_error(answer.response)
            if isinstance(error, PathConflict) and error.conflicting_memory_id:
                try:
                    existing = await self.get_memory(
                        store_id, error.conflicting_memory_id, view=view or "basic"
                    )
                except NotFound:
                    raise error
                if _holds(existing, path, content):
                    log.info("create of %s was applied by an earlier attempt", existing.path)
                    return existing
            raise error
        return Memory.from_json(self._send.decode(answer))

    async def get_memory(self, store_id: str, memory_id: str, *, view: str = "full") -> Memory:
        url = _url("memory_stores", store_id, "memories", memory_id)
        data = await self._send.call("get_memory", "GET", url, params=_params(view=view))
        return Memory.from_json(data)

    async def update_memory(
        self,
        store_id: str,
        memory_id: str,
        *,
        content: str | None = None,
        path: str | None = None,
        precondition_sha256: str | None = None,
        view: str | None = None,
    ) -> Memory:
        """Change a memory's content and/or path (a move keeps the id); with
        `precondition_sha256`, PreconditionFailed unless the stored sha is
        that, but for a retried update the store already holds."""
        body = _given(content=content, path=path)
        if precondition_sha256 is not None:
            body["precondition"] = {"type": "content_sha256", "content_sha256": precondition_sha256}
        answer = await self._send.exchange(
            "update_memory",
            "POST",
            _url("memory_stores", store_id, "memories", memory_id),
            params=_params(view=view),
            json=body,
        )
        if answer.response.status_code == 409 and answer.attempts > 1:
            error = status_error(answer.response)
            if isinstance(error, PreconditionFailed):
                current = await self.get_memory(store_id, memory_id, view=view or "basic")
                if _holds(current, path, content):
                    log.info("update of %s was applied by an earlier attempt", current.path)
                    return current
            raise error
        return Memory.from_json(self._send.decode(answer))

    async def delete_memory(
        self, store_id: str, memory_id: str, *, expected_content_sha256: str | None = None
    ) -> None:
        """Delete a memory (a 404 after a retry is done)."""
        if await self._delete(
            "delete_memory",
            _url("memory_stores", store_id, "memories", memory_id),
            params=_params(expected_content_sha256=expected_content_sha256),
        ):
            log.info("delete of %s was applied by an earlier attempt", memory_id)

    async def list_memories_page(
        self,
        store_id: str,
        *,
        limit: int | None = None,
        page: str | None = None,
        **filters: Unpack[MemoryFilters],
    ) -> Page[Memory | MemoryPrefix]:
        data = await self._send.call(
            "list_memories_page",
            "GET",
            _url("memory_stores", store_id, "memories"),
            params=_params(**filters, limit=limit, page=page),
        )
        return _page(data, _memory_item)

    def iter_memories(
        self, store_id: str, *, limit: int = 100, **filters: Unpack[MemoryFilters]
    ) -> AsyncGenerator[Memory | MemoryPrefix, None]:
        """Every item of a listing, in the basic view unless `view` says
        otherwise (the full view caps pages at 20)."""
        if filters.setdefault("view", "basic") == "full":
            limit = min(limit, 20)
        return _every_item(
            lambda page: self.list_memories_page(store_id, limit=limit, page=page, **filters)
        )

    async def find_memory_by_path(self, store_id: str, path: str) -> Memory | None:
        """The memory at `path` (basic view), or None: one depth-1 listing of its folder."""
        path = normalize_path(path)
        parent = parent_path(path)
        prefix = "/" if parent == "/" else parent + "/"
        async with aclosing(self.iter_memories(store_id, path_prefix=prefix, depth=1)) as items:
            async for item in items:
                if isinstance(item, Memory) and item.path == path:
                    return item
        return None

    async def list_versions_page(
        self,
        store_id: str,
        *,
        limit: int | None = None,
        page: str | None = None,
        **filters: Unpack[VersionFilters],
    ) -> Page[MemoryVersion]:
        """One page of versions, newest first."""
        data = await self._send.call(
            "list_versions_page",
            "GET",
            _url("memory_stores", store_id, "memory_versions"),
            params=_params(**filters, limit=limit, page=page),
        )
        return _page(data, MemoryVersion.from_json)

    def iter_versions(
        self, store_id: str, *, limit: int = 100, **filters: Unpack[VersionFilters]
    ) -> AsyncGenerator[MemoryVersion, None]:
        return _every_item(
            lambda page: self.list_versions_page(store_id, limit=limit, page=page, **filters)
        )

    async def get_version(
        self, store_id: str, version_id: str, *, view: str | None = None
    ) -> MemoryVersion:
        url = _url("memory_stores", store_id, "memory_versions", version_id)
        data = await self._send.call("get_version", "GET", url, params=_params(view=view))
        return MemoryVersion.from_json(data)

    async def redact_version(self, store_id: str, version_id: str) -> MemoryVersion:
        url = _url("memory_stores", store_id, "memory_versions", version_id, "redact")
        data = await self._send.call("redact_version", "POST", url, json={})
        return MemoryVersion.from_json(data)


_SESSION_HEADERS = {"anthropic-beta": SESSIONS_BETA}


def _resource_body(resource: Resource) -> dict[str, Any]:
    """What attaching `resource` sends (the server snapshots its name and description itself)."""
    return {
        "type": "memory_store",
        "memory_store_id": resource.memory_store_id,
        "access": resource.access or ACCESS_READ_WRITE,
        **_given(mount_path=resource.mount_path or None),
    }


class SessionEndpoints(_Endpoints):
    """A worker holding a sessions token reads its session and resources;
    creating, attaching, detaching and deleting take an API key."""

    async def _session_get(
        self, operation: str, *parts: str, params: dict[str, str] | None = None
    ) -> Any:
        url = _url("sessions", *parts)
        return await self._send.call(operation, "GET", url, params=params, headers=_SESSION_HEADERS)

    async def create_session(
        self,
        resources: Iterable[Resource],
        *,
        environment_id: str | None = None,
        title: str | None = None,
        metadata: dict[str, str] | None = None,
    ) -> CreatedSession:
        """A new session holding these stores, with the sessions token `memfs serve` minted for it.
        An attempt whose answer was lost may leave a session nobody holds."""
        body = {
            "resources": [_resource_body(r) for r in resources],
            **_given(environment_id=environment_id, title=title, metadata=metadata),
        }
        data = await self._send.call(
            "create_session", "POST", "/v1/sessions", json=body, headers=_SESSION_HEADERS
        )
        token = data.get("sessions_token") if isinstance(data, dict) else None
        if not isinstance(token, str) or not token:
            raise StoreError(
                f"the API at {self._send.base_url} answered a new session without a"
                " sessions_token: only memfs serve mints sessions tokens this way"
            )
        return CreatedSession(Session.from_json(data), token)

    async def get_session(self, session_id: str) -> Session:
        return Session.from_json(await self._session_get("get_session", session_id))

    async def delete_session(self, session_id: str) -> None:
        """Its sessions token stops working (a 404 after a retry is done)."""
        await self._delete("delete_session", _url("sessions", session_id), headers=_SESSION_HEADERS)

    async def list_session_resources_page(
        self, session_id: str, *, limit: int | None = None, page: str | None = None
    ) -> Page[SessionResource]:
        """One page of the session's resources, in the order they were attached."""
        params = _params(limit=limit, page=page)
        data = await self._session_get(
            "list_session_resources_page", session_id, "resources", params=params
        )
        items = [SessionResource.from_json(d) for d in data.get("data", []) if isinstance(d, dict)]
        return Page(items, data.get("next_page"))

    def iter_session_resources(
        self, session_id: str, *, limit: int | None = None
    ) -> AsyncGenerator[SessionResource, None]:
        """Every resource of the session, files and repositories included."""
        return _every_item(
            lambda page: self.list_session_resources_page(session_id, limit=limit, page=page)
        )

    async def list_session_resources(
        self, session_id: str, *, limit: int | None = None
    ) -> list[SessionResource]:
        return [r async for r in self.iter_session_resources(session_id, limit=limit)]

    async def add_session_resource(self, session_id: str, resource: Resource) -> SessionResource:
        """Attach a store to a live session. A retried attempt that finds the
        store attached already, with the access asked for, answers that."""
        answer = await self._send.exchange(
            "add_session_resource",
            "POST",
            _url("sessions", session_id, "resources"),
            json=_resource_body(resource),
            headers=_SESSION_HEADERS,
        )
        if answer.response.status_code == 400 and answer.attempts > 1:
            async for attached in self.iter_session_resources(session_id):
                if (
                    attached.memory_store_id == resource.memory_store_id
                    and (attached.access or ACCESS_READ_WRITE) == resource.access
                ):
                    return attached
        return SessionResource.from_json(self._send.decode(answer))

    async def delete_session_resource(self, session_id: str, resource_id: str) -> None:
        """Detach a resource by its id (or its store's, on `memfs serve`)."""
        await self._delete(
            "delete_session_resource",
            _url("sessions", session_id, "resources", resource_id),
            headers=_SESSION_HEADERS,
        )


def _tls_for(base_url: str) -> ssl.SSLContext | bool:
    """An http:// API sets up no TLS (a mount's start does not load the CA
    bundle): its context trusts no CA at all; https:// gets httpx's default."""
    if base_url.lower().startswith("http://"):
        return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    return True


class StoreClient(SessionEndpoints):
    """`async with StoreClient(url, token) as c:`, or `aclose()` when done.
    `auth`: the token travels as `Authorization: Bearer` or `x-api-key`."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        auth: AuthHeader = "bearer",
        timeout: float = 30.0,
        max_retries: int = 6,
        backoff_base: float = 0.2,
        backoff_max: float = 10.0,
        max_connections: int = 8,
        beta: str = BETA,
        transport: httpx.AsyncBaseTransport | None = None,
        start_timeout: float | None = None,
        on_wait: Callable[[str], None] | None = None,
    ) -> None:
        if not base_url.startswith(("http:", "https:")):  # a host is checked below
            raise ConfigError(f"the API URL {base_url!r} must start with http:// or https://")
        base_url = base_url.rstrip("/")
        try:
            url = httpx.URL(base_url)
            url.host.encode("idna")  # a label over 63 characters fails here, not at a request
        except (httpx.InvalidURL, UnicodeError) as e:
            raise ConfigError(f"the API URL {base_url!r} is not a URL: {e}") from None
        if url.userinfo:  # it would be shown wherever the URL is
            raise ConfigError("the API URL holds a user or password: give the token in a file")
        if not url.host:
            raise ConfigError(f"the API URL {base_url!r} names no host")
        if auth not in ("bearer", "x-api-key"):
            raise ConfigError(f"unknown auth {auth!r}: use bearer or x-api-key")
        if not token:
            raise ConfigError("the token is empty")
        if not (token.isascii() and token.isprintable()) or " " in token:
            raise ConfigError("the token is not one line of letters, digits and signs")
        self.base_url = base_url
        self.auth = auth
        self.stats = ClientStats()
        headers = {
            "anthropic-version": ANTHROPIC_VERSION,
            "anthropic-beta": beta,
            "user-agent": f"memfs/{__version__}",
            "accept": "application/json",
        }
        if auth == "bearer":
            headers["authorization"] = f"Bearer {token}"
        else:
            headers["x-api-key"] = token
        self._http = httpx.AsyncClient(
            base_url=base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
            limits=httpx.Limits(
                max_connections=max_connections,
                max_keepalive_connections=max_connections,
            ),
            follow_redirects=False,
            params={"beta": "true"},
            transport=transport,
            verify=_tls_for(base_url),
        )
        self._send = Sender(
            self._http,
            base_url=base_url,
            timeout=timeout,
            policy=RetryPolicy(max_retries, backoff_base, backoff_max),
            stats=self.stats,
            start=None
            if start_timeout is None
            else StartWait(start_timeout, on_wait or (lambda sentence: None)),
        )

    def __repr__(self) -> str:
        return f"StoreClient(base_url={self.base_url!r}, auth={self.auth!r})"

    async def __aenter__(self) -> StoreClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Safe to call twice."""
        with suppress(httpx.HTTPError):
            await self._http.aclose()
