"""The API's endpoints, one class per resource (stores, memories, versions;
sessions in `_sessions`): each method builds one call, sends it through the
client's `Sender` and reads the answer into the wire types of `memfs.api`.
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
from ._sending import Request, Sender, error_from

log = logging.getLogger("memfs.client")

T = TypeVar("T")

_PARAMETER_NAMES = {"created_at_gte": "created_at[gte]", "created_at_lte": "created_at[lte]"}


def _q(segment: str) -> str:
    return quote(segment, safe="")


def _in_store(store_id: str, collection: str, item_id: str | None = None) -> str:
    url = f"/v1/memory_stores/{_q(store_id)}/{collection}"
    return url if item_id is None else f"{url}/{_q(item_id)}"


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
    include_archived: bool
    created_at_gte: str | None
    created_at_lte: str | None


class MemoryFilters(TypedDict, total=False):
    path_prefix: str | None
    depth: int | None
    view: str | None


class VersionFilters(TypedDict, total=False):
    """Every filter given must hold; the ids keep the versions whose
    `created_by` carries them, the dates bound `created_at`, ends included."""

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
        if not result.next_page:
            return
        page = result.next_page


class _Endpoints:
    _send: Sender

    async def _delete(self, operation: str, url: str, **request: Unpack[Request]) -> bool:
        """Send a delete; True when a 404 after a retried attempt says the
        attempt whose answer was lost did it (which counts as done)."""
        answer = await self._send.exchange(operation, "DELETE", url, **request)
        if answer.response.status_code == 404 and answer.attempts > 1:
            return True
        self._send.decode(answer)
        return False


class StoreEndpoints(_Endpoints):
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
        """Delete a store with its memories and versions (a 404 after a retry is done)."""
        await self._delete("delete_store", f"/v1/memory_stores/{_q(store_id)}")

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


class MemoryEndpoints(_Endpoints):
    async def create_memory(
        self, store_id: str, path: str, content: str, *, view: str | None = None
    ) -> Memory:
        """Create a memory; the store never overwrites (PathConflict). The
        answer is the basic view unless `view="full"`.

        A retried create may meet a 409 path conflict with the memory its own
        earlier attempt made before its answer was lost: when the conflicting
        memory has exactly the path and content sent, it is returned.
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
        url = _in_store(store_id, "memories", memory_id)
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
        """Change a memory's content and/or path (a move keeps the id); the
        answer is the basic view unless `view="full"`. With
        `precondition_sha256`, PreconditionFailed unless the stored sha is that.

        A retried update answered 409 precondition failed returns the current
        memory when the store already holds exactly what was sent.
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
        """Delete a memory (a 404 after a retry is done)."""
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


class VersionEndpoints(_Endpoints):
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
            _in_store(store_id, "memory_versions"),
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
        url = _in_store(store_id, "memory_versions", version_id)
        data = await self._send.call("get_version", "GET", url, params=_params(view=view))
        return MemoryVersion.from_json(data)

    async def redact_version(self, store_id: str, version_id: str) -> MemoryVersion:
        url = _in_store(store_id, "memory_versions", version_id) + "/redact"
        data = await self._send.call("redact_version", "POST", url, json={})
        return MemoryVersion.from_json(data)
