"""The Memory Store API over httpx: auth, retries, pages, one exception tree.

`StoreClient` is the only way memfs talks to a store, whether the real
service or `memfs serve`. It runs under trio (httpx reaches trio through
anyio). What it promises:

- Every request carries `anthropic-version`, `anthropic-beta`, the auth header
  and `user-agent: memfs/<version>`, and `?beta=true` on its URL, as the SDKs
  send it. The token is never logged and never shown by `repr()`.
- One bounded connection pool per client.
- 408, 429, 500, 502, 503, 504, 529 and transport errors are retried with
  exponential backoff and full jitter, honouring `retry-after-ms` (preferred)
  or `retry-after`; 400, 401, 403, 404, 409 and 413 never are. An answer's
  `x-should-retry: true|false` overrides that rule, as the SDKs let it.
- Every failure is a `memfs._exceptions.StoreError`: a `StatusError` subclass
  for an error answer, `TransportError` when no answer came after every retry.
  No httpx exception escapes.
- Retrying a request that is not idempotent can meet the effect of its own
  earlier attempt; `create_memory`, `update_memory` and `delete_memory`
  recognise that case and report success (see each).
"""

from __future__ import annotations

import errno
import logging
import random
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar
from urllib.parse import quote

import httpx
import trio

from .. import __version__
from .._exceptions import (
    STATUS_ERRORS_BY_TYPE,
    AuthenticationFailed,
    BillingError,
    ConfigError,
    GatewayTimeout,
    InvalidRequest,
    NotFound,
    Overloaded,
    PathConflict,
    PermissionDenied,
    PreconditionFailed,
    RateLimited,
    RequestTooLarge,
    ServerError,
    StatusError,
    StoreError,
    TransportError,
)
from ..api import (
    ANTHROPIC_VERSION,
    BETA,
    Memory,
    MemoryPrefix,
    MemoryStore,
    MemoryVersion,
    Page,
    content_sha256,
    normalize_path,
    parent_path,
)

log = logging.getLogger("memfs.client")

RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 529})

_STATUS_ERRORS_BY_STATUS: dict[int, type[StatusError]] = {
    400: InvalidRequest,
    401: AuthenticationFailed,
    402: BillingError,
    403: PermissionDenied,
    404: NotFound,
    413: RequestTooLarge,
    429: RateLimited,
    500: ServerError,
    504: GatewayTimeout,
    529: Overloaded,
}


@dataclass
class ClientStats:
    """What the client sent: `requests` counts HTTP attempts (retries
    included), `retries` the attempts after the first, `by_method` attempts per
    HTTP method, `by_operation` calls per client method, `by_status` answers
    per status code (0 for no answer)."""

    requests: int = 0
    retries: int = 0
    by_method: Counter[str] = field(default_factory=Counter)
    by_operation: Counter[str] = field(default_factory=Counter)
    by_status: Counter[int] = field(default_factory=Counter)

    def reset(self) -> None:
        self.requests = 0
        self.retries = 0
        self.by_method.clear()
        self.by_operation.clear()
        self.by_status.clear()


def _causes(exc: BaseException) -> list[BaseException]:
    """The exception, its causes and contexts, and the members of any group
    among them (trio reports failed connection attempts as a group)."""
    seen: list[BaseException] = []
    stack = [exc]
    while stack:
        current = stack.pop()
        if current is None or any(current is s for s in seen):
            continue
        seen.append(current)
        if isinstance(current, BaseExceptionGroup):
            stack.extend(current.exceptions)
        stack.extend([current.__cause__, current.__context__])
    return seen


def _transport_reason(exc: BaseException, timeout: float) -> str:
    """A few words saying why no answer came, for a person to read."""
    if isinstance(exc, httpx.ConnectTimeout):
        return "the connection timed out"
    if isinstance(exc, httpx.TimeoutException):
        return f"no answer within {timeout:g} s"
    if isinstance(exc, httpx.RemoteProtocolError):
        return "the connection closed before a whole answer came"
    if isinstance(exc, httpx.UnsupportedProtocol):
        return "the URL's scheme is not http or https"
    for cause in _causes(exc):
        if isinstance(cause, OSError) and cause.errno is not None:
            if cause.errno == errno.ECONNREFUSED:
                return "connection refused"
            if cause.errno == errno.ECONNRESET:
                return "connection reset"
            return (cause.strerror or str(cause)).lower()
    text = str(exc).lower()
    if "refused" in text or "all connection attempts failed" in text:
        return "connection refused"
    if "name or service not known" in text or "nodename nor servname" in text:
        return "the host name does not resolve"
    if isinstance(exc, httpx.ConnectError):
        return "cannot connect"
    if isinstance(exc, (httpx.ReadError, httpx.WriteError)):
        return "the connection was reset"
    return str(exc) or type(exc).__name__


def _header_number(response: httpx.Response, name: str) -> float | None:
    value = response.headers.get(name)
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return None if number != number else max(0.0, number)  # NaN is no number


def _retry_after_seconds(response: httpx.Response) -> float | None:
    """The wait the answer asks for: `retry-after-ms` (milliseconds) when it
    is a number, else `retry-after` (seconds); None when neither is."""
    ms = _header_number(response, "retry-after-ms")
    if ms is not None:
        return ms / 1000
    return _header_number(response, "retry-after")


def _should_retry(response: httpx.Response) -> bool:
    """Whether an answer is worth another attempt: an error answer's
    `x-should-retry: true|false` decides, else its status is in RETRY_STATUSES."""
    if response.status_code < 400:
        return False
    header = response.headers.get("x-should-retry", "").strip().lower()
    if header in ("true", "false"):
        return header == "true"
    return response.status_code in RETRY_STATUSES


def _error_from(
    *,
    response: httpx.Response | None = None,
    exc: BaseException | None = None,
    base_url: str = "",
    timeout: float = 0.0,
    attempts: int = 1,
) -> StoreError:
    """The one place an httpx answer or exception becomes a memfs exception.

    An error answer becomes the StatusError subclass named by its
    `error.type`, or else by its status (any other 5xx: ServerError), carrying
    the message, the request id (body, else `request-id` header), the extra
    envelope fields and `retry-after`. An httpx exception becomes a
    TransportError whose sentence names the URL and the reason.
    """
    if response is None:
        reason = _transport_reason(exc, timeout) if exc is not None else "no answer"
        tries = f" (after {attempts} attempts)" if attempts > 1 else ""
        return TransportError(f"cannot reach {base_url}: {reason}{tries}")

    status = response.status_code
    body: Any = None
    try:
        body = response.json()
    except (ValueError, UnicodeDecodeError):
        body = None
    error: dict[str, Any] = {}
    request_id = response.headers.get("request-id")
    if isinstance(body, dict):
        if isinstance(body.get("error"), dict):
            error = body["error"]
        if isinstance(body.get("request_id"), str):
            request_id = body["request_id"]
    error_type = error.get("type") if isinstance(error.get("type"), str) else None
    cls = STATUS_ERRORS_BY_TYPE.get(error_type or "")
    if cls is None:
        cls = _STATUS_ERRORS_BY_STATUS.get(status)
    if cls is None:
        cls = ServerError if status >= 500 else StatusError
    server_message = error.get("message") if isinstance(error.get("message"), str) else None
    if not server_message:
        server_message = f"the store answered HTTP {status} {response.reason_phrase}".rstrip()
    message = server_message if not request_id else f"{server_message} [request {request_id}]"
    extra = {k: v for k, v in error.items() if k not in ("type", "message")}
    return cls(
        message,
        status=status,
        error_type=error_type or cls.error_type or "unknown_error",
        request_id=request_id,
        extra=extra,
        retry_after=_retry_after_seconds(response),
    )


def _q(segment: str) -> str:
    return quote(segment, safe="")


def _params(**values: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        out[key] = str(value)
    return out


def _memory_item(d: dict[str, Any]) -> Memory | MemoryPrefix:
    if d.get("type") == "memory_prefix":
        return MemoryPrefix(path=d["path"])
    return Memory.from_json(d)


T = TypeVar("T")


async def _every_item(fetch_page: Callable[[str | None], Awaitable[Page[T]]]) -> AsyncIterator[T]:
    """Every item of a paginated listing, following `next_page` to the end."""
    page: str | None = None
    while True:
        result = await fetch_page(page)
        for item in result.data:
            yield item
        if not result.next_page:
            return
        page = result.next_page


@dataclass
class _Answer:
    """The last HTTP answer of one call, and how many attempts it took."""

    response: httpx.Response
    attempts: int


class StoreClient:
    """Async client of the Memory Store API; use under trio.

    `async with StoreClient(url, token) as c:` or call `aclose()` when done.
    `auth` picks the header the token travels in: `Authorization: Bearer`
    (a session's token) or `x-api-key`.
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        auth: Literal["bearer", "x-api-key"] = "bearer",
        timeout: float = 30.0,
        max_retries: int = 6,
        backoff_base: float = 0.2,
        backoff_max: float = 10.0,
        max_connections: int = 8,
        beta: str = BETA,
    ) -> None:
        base_url = base_url.rstrip("/")
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"the API URL {base_url!r} must start with http:// or https://")
        if auth not in ("bearer", "x-api-key"):
            raise ConfigError(f"unknown auth {auth!r}: use bearer or x-api-key")
        if not token:
            raise ConfigError("the token is empty")
        self.base_url = base_url
        self.auth = auth
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
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
            # Merged into every request's own parameters.
            params={"beta": "true"},
        )

    def __repr__(self) -> str:
        return f"StoreClient(base_url={self.base_url!r}, auth={self.auth!r})"

    async def __aenter__(self) -> StoreClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool. Safe to call twice."""
        try:
            await self._http.aclose()
        except httpx.HTTPError:
            pass

    # --- transport -------------------------------------------------------

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.backoff_max * 3)
        return random.uniform(0, min(self.backoff_max, self.backoff_base * 2**attempt))

    async def _exchange(
        self,
        operation: str,
        method: str,
        url: str,
        *,
        params: dict[str, str] | None = None,
        json: Any = None,
    ) -> _Answer:
        """Send one call, retrying what may be retried.

        Returns the final answer (a success, an answer that is not retried, or
        the last retryable one once retries ran out); raises TransportError
        when the last attempt got no answer at all.
        """
        self.stats.by_operation[operation] += 1
        attempt = 0
        while True:
            if attempt:
                self.stats.retries += 1
            self.stats.requests += 1
            self.stats.by_method[method] += 1
            started = time.monotonic()
            try:
                response = await self._http.request(method, url, params=params, json=json)
            except httpx.UnsupportedProtocol as e:
                self.stats.by_status[0] += 1
                raise _error_from(exc=e, base_url=self.base_url, timeout=self.timeout)
            except (httpx.HTTPError, httpx.InvalidURL) as e:
                self.stats.by_status[0] += 1
                if attempt >= self.max_retries or isinstance(e, httpx.InvalidURL):
                    raise _error_from(
                        exc=e, base_url=self.base_url, timeout=self.timeout, attempts=attempt + 1
                    )
                delay = self._backoff(attempt, None)
                log.info(
                    "%s %s: %s; retrying in %.2f s",
                    method,
                    url,
                    _transport_reason(e, self.timeout),
                    delay,
                )
                await trio.sleep(delay)
                attempt += 1
                continue
            self.stats.by_status[response.status_code] += 1
            log.debug(
                "%s %s -> %d in %.1f ms",
                method,
                url,
                response.status_code,
                (time.monotonic() - started) * 1000,
            )
            if attempt < self.max_retries and _should_retry(response):
                delay = self._backoff(attempt, _retry_after_seconds(response))
                log.info(
                    "%s %s answered %d; retrying in %.2f s",
                    method,
                    url,
                    response.status_code,
                    delay,
                )
                await trio.sleep(delay)
                attempt += 1
                continue
            return _Answer(response, attempt + 1)

    def _decode(self, answer: _Answer) -> Any:
        response = answer.response
        if response.status_code >= 400 or response.status_code < 200:
            raise _error_from(response=response, attempts=answer.attempts)
        try:
            return response.json()
        except (ValueError, UnicodeDecodeError):
            raise StoreError(
                f"the store at {self.base_url} answered {response.status_code} with a body that is not JSON"
            )

    async def _call(
        self,
        operation: str,
        method: str,
        url: str,
        *,
        params: dict[str, str] | None = None,
        json: Any = None,
    ) -> Any:
        answer = await self._exchange(operation, method, url, params=params, json=json)
        return self._decode(answer)

    # --- stores ----------------------------------------------------------

    async def create_store(
        self, name: str, *, description: str | None = None, metadata: dict[str, str] | None = None
    ) -> MemoryStore:
        body: dict[str, Any] = {"name": name}
        if description is not None:
            body["description"] = description
        if metadata is not None:
            body["metadata"] = metadata
        data = await self._call("create_store", "POST", "/v1/memory_stores", json=body)
        return MemoryStore.from_json(data)

    async def get_store(self, store_id: str) -> MemoryStore:
        data = await self._call("get_store", "GET", f"/v1/memory_stores/{_q(store_id)}")
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
        body: dict[str, Any] = {}
        if name is not None:
            body["name"] = name
        if description is not None:
            body["description"] = description
        if metadata is not None:
            body["metadata"] = metadata
        data = await self._call(
            "update_store", "POST", f"/v1/memory_stores/{_q(store_id)}", json=body
        )
        return MemoryStore.from_json(data)

    async def archive_store(self, store_id: str) -> MemoryStore:
        data = await self._call(
            "archive_store", "POST", f"/v1/memory_stores/{_q(store_id)}/archive", json={}
        )
        return MemoryStore.from_json(data)

    async def delete_store(self, store_id: str) -> None:
        """Delete a store with its memories and versions. A 404 after a retried
        attempt means an earlier attempt did it, and counts as done."""
        answer = await self._exchange("delete_store", "DELETE", f"/v1/memory_stores/{_q(store_id)}")
        if answer.response.status_code == 404 and answer.attempts > 1:
            return
        self._decode(answer)

    async def list_stores_page(
        self,
        *,
        include_archived: bool = False,
        created_at_gte: str | None = None,
        created_at_lte: str | None = None,
        limit: int | None = None,
        page: str | None = None,
    ) -> Page[MemoryStore]:
        """One page of stores in creation order; `created_at_gte` /
        `created_at_lte` (RFC 3339) bound their `created_at`, ends included."""
        params = _params(include_archived=include_archived, limit=limit, page=page)
        if created_at_gte is not None:
            params["created_at[gte]"] = created_at_gte
        if created_at_lte is not None:
            params["created_at[lte]"] = created_at_lte
        data = await self._call("list_stores_page", "GET", "/v1/memory_stores", params=params)
        return Page([MemoryStore.from_json(d) for d in data.get("data", [])], data.get("next_page"))

    async def iter_stores(
        self,
        *,
        include_archived: bool = False,
        created_at_gte: str | None = None,
        created_at_lte: str | None = None,
        limit: int = 100,
    ) -> AsyncIterator[MemoryStore]:
        async for store in _every_item(
            lambda page: self.list_stores_page(
                include_archived=include_archived,
                created_at_gte=created_at_gte,
                created_at_lte=created_at_lte,
                limit=limit,
                page=page,
            )
        ):
            yield store

    # --- memories --------------------------------------------------------

    def _memories_url(self, store_id: str, memory_id: str | None = None) -> str:
        url = f"/v1/memory_stores/{_q(store_id)}/memories"
        return url if memory_id is None else f"{url}/{_q(memory_id)}"

    async def create_memory(
        self, store_id: str, path: str, content: str, *, view: str | None = None
    ) -> Memory:
        """Create a memory; the store never overwrites (PathConflict).

        The answer is the basic view (`content` None) unless `view="full"`.
        A create is not idempotent: when an attempt was retried, the earlier
        attempt may have been applied before its answer was lost, and the retry
        then meets a 409 path conflict with our own memory. If the conflicting
        memory has exactly the path and content sent, it is ours and is
        returned; any other conflict is raised.
        """
        answer = await self._exchange(
            "create_memory",
            "POST",
            self._memories_url(store_id),
            params=_params(view=view),
            json={"path": path, "content": content},
        )
        if answer.response.status_code == 409 and answer.attempts > 1:
            error = _error_from(response=answer.response)
            if isinstance(error, PathConflict) and error.conflicting_memory_id:
                try:
                    existing = await self.get_memory(
                        store_id, error.conflicting_memory_id, view=view or "basic"
                    )
                except NotFound:
                    raise error
                if existing.path == normalize_path(
                    path
                ) and existing.content_sha256 == content_sha256(content.encode("utf-8")):
                    log.info("create of %s was applied by an earlier attempt", existing.path)
                    return existing
            raise error
        return Memory.from_json(self._decode(answer))

    async def get_memory(self, store_id: str, memory_id: str, *, view: str = "full") -> Memory:
        data = await self._call(
            "get_memory",
            "GET",
            self._memories_url(store_id, memory_id),
            params=_params(view=view),
        )
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
        """Change a memory's content and/or path (a move keeps the id).

        The answer is the basic view (`content` None) unless `view="full"`.
        With `precondition_sha256`, the store refuses (PreconditionFailed)
        unless the stored sha is that one. When an attempt was retried, the
        earlier attempt may have been applied already; if the store then
        answers 409 precondition failed but already holds exactly what was
        sent, the current memory is returned.
        """
        body: dict[str, Any] = {}
        if content is not None:
            body["content"] = content
        if path is not None:
            body["path"] = path
        if precondition_sha256 is not None:
            body["precondition"] = {"type": "content_sha256", "content_sha256": precondition_sha256}
        answer = await self._exchange(
            "update_memory",
            "POST",
            self._memories_url(store_id, memory_id),
            params=_params(view=view),
            json=body,
        )
        if answer.response.status_code == 409 and answer.attempts > 1:
            error = _error_from(response=answer.response)
            if isinstance(error, PreconditionFailed):
                current = await self.get_memory(store_id, memory_id, view=view or "basic")
                same_content = content is None or current.content_sha256 == content_sha256(
                    content.encode("utf-8")
                )
                same_path = path is None or current.path == normalize_path(path)
                if same_content and same_path:
                    log.info("update of %s was applied by an earlier attempt", current.path)
                    return current
            raise error
        return Memory.from_json(self._decode(answer))

    async def delete_memory(
        self, store_id: str, memory_id: str, *, expected_content_sha256: str | None = None
    ) -> None:
        """Delete a memory. A 404 after a retried attempt means an earlier
        attempt deleted it, and counts as done."""
        answer = await self._exchange(
            "delete_memory",
            "DELETE",
            self._memories_url(store_id, memory_id),
            params=_params(expected_content_sha256=expected_content_sha256),
        )
        if answer.response.status_code == 404 and answer.attempts > 1:
            log.info("delete of %s was applied by an earlier attempt", memory_id)
            return
        self._decode(answer)

    async def list_memories_page(
        self,
        store_id: str,
        *,
        path_prefix: str | None = None,
        depth: int | None = None,
        view: str | None = None,
        limit: int | None = None,
        page: str | None = None,
    ) -> Page[Memory | MemoryPrefix]:
        data = await self._call(
            "list_memories_page",
            "GET",
            self._memories_url(store_id),
            params=_params(path_prefix=path_prefix, depth=depth, view=view, limit=limit, page=page),
        )
        return Page([_memory_item(d) for d in data.get("data", [])], data.get("next_page"))

    async def iter_memories(
        self,
        store_id: str,
        *,
        path_prefix: str | None = None,
        depth: int | None = None,
        view: str = "basic",
        limit: int = 100,
    ) -> AsyncIterator[Memory | MemoryPrefix]:
        """Every item of a listing, page after page (`full` view caps pages at 20)."""
        if view == "full":
            limit = min(limit, 20)
        async for item in _every_item(
            lambda page: self.list_memories_page(
                store_id, path_prefix=path_prefix, depth=depth, view=view, limit=limit, page=page
            )
        ):
            yield item

    async def find_memory_by_path(self, store_id: str, path: str) -> Memory | None:
        """The memory at `path` (basic view: no content), or None.

        Lists the parent folder at depth 1, so it costs one request per 100
        entries of that folder.
        """
        path = normalize_path(path)
        parent = parent_path(path)
        prefix = "/" if parent == "/" else parent + "/"
        async with aclosing(self.iter_memories(store_id, path_prefix=prefix, depth=1)) as items:
            async for item in items:
                if isinstance(item, Memory) and item.path == path:
                    return item
        return None

    # --- versions --------------------------------------------------------

    def _versions_url(self, store_id: str, version_id: str | None = None) -> str:
        url = f"/v1/memory_stores/{_q(store_id)}/memory_versions"
        return url if version_id is None else f"{url}/{_q(version_id)}"

    async def list_versions_page(
        self,
        store_id: str,
        *,
        memory_id: str | None = None,
        operation: str | None = None,
        created_at_gte: str | None = None,
        created_at_lte: str | None = None,
        session_id: str | None = None,
        api_key_id: str | None = None,
        view: str | None = None,
        limit: int | None = None,
        page: str | None = None,
    ) -> Page[MemoryVersion]:
        """One page of versions, newest first. `session_id` / `api_key_id` keep
        the versions whose `created_by` carries that id."""
        params = _params(
            memory_id=memory_id,
            operation=operation,
            session_id=session_id,
            api_key_id=api_key_id,
            view=view,
            limit=limit,
            page=page,
        )
        if created_at_gte is not None:
            params["created_at[gte]"] = created_at_gte
        if created_at_lte is not None:
            params["created_at[lte]"] = created_at_lte
        data = await self._call(
            "list_versions_page", "GET", self._versions_url(store_id), params=params
        )
        return Page(
            [MemoryVersion.from_json(d) for d in data.get("data", [])], data.get("next_page")
        )

    async def iter_versions(
        self,
        store_id: str,
        *,
        memory_id: str | None = None,
        operation: str | None = None,
        created_at_gte: str | None = None,
        created_at_lte: str | None = None,
        session_id: str | None = None,
        api_key_id: str | None = None,
        view: str | None = None,
        limit: int = 100,
    ) -> AsyncIterator[MemoryVersion]:
        """Every version matching the filters, newest first, page after page."""
        async for version in _every_item(
            lambda page: self.list_versions_page(
                store_id,
                memory_id=memory_id,
                operation=operation,
                created_at_gte=created_at_gte,
                created_at_lte=created_at_lte,
                session_id=session_id,
                api_key_id=api_key_id,
                view=view,
                limit=limit,
                page=page,
            )
        ):
            yield version

    async def get_version(
        self, store_id: str, version_id: str, *, view: str | None = None
    ) -> MemoryVersion:
        data = await self._call(
            "get_version",
            "GET",
            self._versions_url(store_id, version_id),
            params=_params(view=view),
        )
        return MemoryVersion.from_json(data)

    async def redact_version(self, store_id: str, version_id: str) -> MemoryVersion:
        data = await self._call(
            "redact_version", "POST", self._versions_url(store_id, version_id) + "/redact", json={}
        )
        return MemoryVersion.from_json(data)
