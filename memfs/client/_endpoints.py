"""The Memory Store API's endpoints, one class per resource: stores,
memories, versions. Each method builds one call (its URL, parameters and
body), sends it through the client's `Sender` and reads the answer into the
wire types of `memfs.api`. `StoreClient` is the three over one `Sender`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from typing import Any, TypedDict, TypeVar, Unpack
from urllib.parse import quote

from .._exceptions import NotFound, PathConflict, PreconditionFailed
from ..api import (
    Memory,
    MemoryPrefix,
    MemoryStore,
    MemoryVersion,
    Page,
    content_sha256,
    normalize_path,
    parent_path,
)
from ._errors import error_from
from ._sending import Request, Sender

log = logging.getLogger("memfs.client")


def _q(segment: str) -> str:
    return quote(segment, safe="")


def _in_store(store_id: str, collection: str, item_id: str | None = None) -> str:
    """The URL of a store's `collection` (its memories, its versions), or of
    the item `item_id` in it."""
    url = f"/v1/memory_stores/{_q(store_id)}/{collection}"
    return url if item_id is None else f"{url}/{_q(item_id)}"


_PARAMETER_NAMES = {"created_at_gte": "created_at[gte]", "created_at_lte": "created_at[lte]"}
"""The query parameters whose names are no Python names, by the keyword that gives them."""


def _params(**values: Any) -> dict[str, str]:
    """The query parameters of the values given (None: left out), in the API's words."""
    out: dict[str, str] = {}
    for key, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        out[_PARAMETER_NAMES.get(key, key)] = str(value)
    return out


def _given(**values: Any) -> dict[str, Any]:
    """The body fields of the values given (None: left out, the store keeps its own)."""
    return {key: value for key, value in values.items() if value is not None}


class StoreFilters(TypedDict, total=False):
    """Which stores a listing holds: archived ones too, and `created_at`
    bounds (RFC 3339, ends included)."""

    include_archived: bool
    created_at_gte: str | None
    created_at_lte: str | None


class MemoryFilters(TypedDict, total=False):
    """Which memories a listing holds (`path_prefix`, `depth`) and how much of
    each (`view`)."""

    path_prefix: str | None
    depth: int | None
    view: str | None


class VersionFilters(TypedDict, total=False):
    """Which versions a listing holds: every filter given must hold;
    `session_id`, `api_key_id` and `service_account_id` keep the versions
    whose `created_by` carries that id, `created_at_gte` / `created_at_lte`
    (RFC 3339) bound their `created_at`, ends included."""

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


T = TypeVar("T")


def _page(data: Any, item: Callable[[dict[str, Any]], T]) -> Page[T]:
    """A listing's answer as a `Page` of its items."""
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
        if not result.next_page:
            return
        page = result.next_page


class _Endpoints:
    _send: Sender
    """Where every call goes: the client's one pipeline and connection pool."""

    async def _delete(self, operation: str, url: str, **request: Unpack[Request]) -> bool:
        """Send a delete; True when an earlier attempt did it: a 404 after a
        retried attempt means the one whose answer was lost deleted it, and
        counts as done."""
        answer = await self._send.exchange(operation, "DELETE", url, **request)
        if answer.response.status_code == 404 and answer.attempts > 1:
            return True
        self._send.decode(answer)
        return False

    async def _get_in_store(
        self, operation: str, store_id: str, collection: str, item_id: str, view: str | None
    ) -> Any:
        """The body of one item of a store's `collection`, in `view`."""
        url = _in_store(store_id, collection, item_id)
        return await self._send.call(operation, "GET", url, params=_params(view=view))


class StoreEndpoints(_Endpoints):
    """`/v1/memory_stores`: create, read, patch, archive, delete and list stores."""

    async def create_store(
        self, name: str, *, description: str | None = None, metadata: dict[str, str] | None = None
    ) -> MemoryStore:
        body = {"name": name, **_given(description=description, metadata=metadata)}
        data = await self._send.call("create_store", "POST", "/v1/memory_stores", json=body)
        return MemoryStore.from_json(data)

    async def get_store(self, store_id: str) -> MemoryStore:
        data = await self._send.call("get_store", "GET", f"/v1/memory_stores/{_q(store_id)}")
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
            "update_store", "POST", f"/v1/memory_stores/{_q(store_id)}", json=body
        )
        return MemoryStore.from_json(data)

    async def archive_store(self, store_id: str) -> MemoryStore:
        data = await self._send.call(
            "archive_store", "POST", f"/v1/memory_stores/{_q(store_id)}/archive", json={}
        )
        return MemoryStore.from_json(data)

    async def delete_store(self, store_id: str) -> None:
        """Delete a store with its memories and versions. A 404 after a retried
        attempt means an earlier attempt did it, and counts as done."""
        await self._delete("delete_store", f"/v1/memory_stores/{_q(store_id)}")

    async def list_stores_page(
        self, *, limit: int | None = None, page: str | None = None, **filters: Unpack[StoreFilters]
    ) -> Page[MemoryStore]:
        """One page of stores in creation order (`StoreFilters`: which)."""
        filters.setdefault("include_archived", False)
        params = _params(**filters, limit=limit, page=page)
        data = await self._send.call("list_stores_page", "GET", "/v1/memory_stores", params=params)
        return _page(data, MemoryStore.from_json)

    async def iter_stores(
        self, *, limit: int = 100, **filters: Unpack[StoreFilters]
    ) -> AsyncGenerator[MemoryStore, None]:
        async for store in _every_item(
            lambda page: self.list_stores_page(limit=limit, page=page, **filters)
        ):
            yield store


class MemoryEndpoints(_Endpoints):
    """`/v1/memory_stores/{id}/memories`: the memories of a store, by id or by path."""

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
        answer = await self._send.exchange(
            "create_memory",
            "POST",
            _in_store(store_id, "memories"),
            params=_params(view=view),
            json={"path": path, "content": content},
        )
        if answer.response.status_code == 409 and answer.attempts > 1:
            error = error_from(response=answer.response)
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
        return Memory.from_json(self._send.decode(answer))

    async def get_memory(self, store_id: str, memory_id: str, *, view: str = "full") -> Memory:
        data = await self._get_in_store("get_memory", store_id, "memories", memory_id, view)
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
        body = _given(content=content, path=path)
        if precondition_sha256 is not None:
            body["precondition"] = {"type": "content_sha256", "content_sha256": precondition_sha256}
        answer = await self._send.exchange(
            "update_memory",
            "POST",
            _in_store(store_id, "memories", memory_id),
            params=_params(view=view),
            json=body,
        )
        if answer.response.status_code == 409 and answer.attempts > 1:
            error = error_from(response=answer.response)
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
        return Memory.from_json(self._send.decode(answer))

    async def delete_memory(
        self, store_id: str, memory_id: str, *, expected_content_sha256: str | None = None
    ) -> None:
        """Delete a memory. A 404 after a retried attempt means an earlier
        attempt deleted it, and counts as done."""
        if await self._delete(
            "delete_memory",
            _in_store(store_id, "memories", memory_id),
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
            _in_store(store_id, "memories"),
            params=_params(**filters, limit=limit, page=page),
        )
        return _page(data, _memory_item)

    async def iter_memories(
        self, store_id: str, *, limit: int = 100, **filters: Unpack[MemoryFilters]
    ) -> AsyncGenerator[Memory | MemoryPrefix, None]:
        """Every item of a listing, page after page, in the basic view unless
        `view` says otherwise (`full` view caps pages at 20)."""
        if filters.setdefault("view", "basic") == "full":
            limit = min(limit, 20)
        async for item in _every_item(
            lambda page: self.list_memories_page(store_id, limit=limit, page=page, **filters)
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


class VersionEndpoints(_Endpoints):
    """`/v1/memory_stores/{id}/memory_versions`: the version feed of a store."""

    async def list_versions_page(
        self,
        store_id: str,
        *,
        limit: int | None = None,
        page: str | None = None,
        **filters: Unpack[VersionFilters],
    ) -> Page[MemoryVersion]:
        """One page of versions, newest first (`VersionFilters`: which)."""
        data = await self._send.call(
            "list_versions_page",
            "GET",
            _in_store(store_id, "memory_versions"),
            params=_params(**filters, limit=limit, page=page),
        )
        return _page(data, MemoryVersion.from_json)

    async def iter_versions(
        self, store_id: str, *, limit: int = 100, **filters: Unpack[VersionFilters]
    ) -> AsyncGenerator[MemoryVersion, None]:
        """Every version matching the filters, newest first, page after page."""
        async for version in _every_item(
            lambda page: self.list_versions_page(store_id, limit=limit, page=page, **filters)
        ):
            yield version

    async def get_version(
        self, store_id: str, version_id: str, *, view: str | None = None
    ) -> MemoryVersion:
        data = await self._get_in_store(
            "get_version", store_id, "memory_versions", version_id, view
        )
        return MemoryVersion.from_json(data)

    async def redact_version(self, store_id: str, version_id: str) -> MemoryVersion:
        data = await self._send.call(
            "redact_version",
            "POST",
            _in_store(store_id, "memory_versions", version_id) + "/redact",
            json={},
        )
        return MemoryVersion.from_json(data)
