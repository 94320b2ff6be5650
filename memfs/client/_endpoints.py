"""The Memory Store API's endpoints, one class per resource: stores,
memories, versions. Each method builds one call (its URL, parameters and
body), sends it through the client's `Sender` and reads the answer into the
wire types of `memfs.api`. `StoreClient` is the three over one `Sender`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from typing import Any, TypeVar
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
from ._sending import Sender

log = logging.getLogger("memfs.client")


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


class StoreEndpoints(_Endpoints):
    """`/v1/memory_stores`: create, read, patch, archive, delete and list stores."""

    async def create_store(
        self, name: str, *, description: str | None = None, metadata: dict[str, str] | None = None
    ) -> MemoryStore:
        body: dict[str, Any] = {"name": name}
        if description is not None:
            body["description"] = description
        if metadata is not None:
            body["metadata"] = metadata
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
        body: dict[str, Any] = {}
        if name is not None:
            body["name"] = name
        if description is not None:
            body["description"] = description
        if metadata is not None:
            body["metadata"] = metadata
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
        answer = await self._send.exchange(
            "delete_store", "DELETE", f"/v1/memory_stores/{_q(store_id)}"
        )
        if answer.response.status_code == 404 and answer.attempts > 1:
            return
        self._send.decode(answer)

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
        data = await self._send.call("list_stores_page", "GET", "/v1/memory_stores", params=params)
        return Page([MemoryStore.from_json(d) for d in data.get("data", [])], data.get("next_page"))

    async def iter_stores(
        self,
        *,
        include_archived: bool = False,
        created_at_gte: str | None = None,
        created_at_lte: str | None = None,
        limit: int = 100,
    ) -> AsyncGenerator[MemoryStore, None]:
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


class MemoryEndpoints(_Endpoints):
    """`/v1/memory_stores/{id}/memories`: the memories of a store, by id or by path."""

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
        answer = await self._send.exchange(
            "create_memory",
            "POST",
            self._memories_url(store_id),
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
        data = await self._send.call(
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
        answer = await self._send.exchange(
            "update_memory",
            "POST",
            self._memories_url(store_id, memory_id),
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
        answer = await self._send.exchange(
            "delete_memory",
            "DELETE",
            self._memories_url(store_id, memory_id),
            params=_params(expected_content_sha256=expected_content_sha256),
        )
        if answer.response.status_code == 404 and answer.attempts > 1:
            log.info("delete of %s was applied by an earlier attempt", memory_id)
            return
        self._send.decode(answer)

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
        data = await self._send.call(
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
    ) -> AsyncGenerator[Memory | MemoryPrefix, None]:
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


class VersionEndpoints(_Endpoints):
    """`/v1/memory_stores/{id}/memory_versions`: the version feed of a store."""

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
        service_account_id: str | None = None,
        view: str | None = None,
        limit: int | None = None,
        page: str | None = None,
    ) -> Page[MemoryVersion]:
        """One page of versions, newest first. `session_id`, `api_key_id` and
        `service_account_id` keep the versions whose `created_by` carries that id."""
        params = _params(
            memory_id=memory_id,
            operation=operation,
            session_id=session_id,
            api_key_id=api_key_id,
            service_account_id=service_account_id,
            view=view,
            limit=limit,
            page=page,
        )
        if created_at_gte is not None:
            params["created_at[gte]"] = created_at_gte
        if created_at_lte is not None:
            params["created_at[lte]"] = created_at_lte
        data = await self._send.call(
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
        service_account_id: str | None = None,
        view: str | None = None,
        limit: int = 100,
    ) -> AsyncGenerator[MemoryVersion, None]:
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
                service_account_id=service_account_id,
                view=view,
                limit=limit,
                page=page,
            )
        ):
            yield version

    async def get_version(
        self, store_id: str, version_id: str, *, view: str | None = None
    ) -> MemoryVersion:
        data = await self._send.call(
            "get_version",
            "GET",
            self._versions_url(store_id, version_id),
            params=_params(view=view),
        )
        return MemoryVersion.from_json(data)

    async def redact_version(self, store_id: str, version_id: str) -> MemoryVersion:
        data = await self._send.call(
            "redact_version", "POST", self._versions_url(store_id, version_id) + "/redact", json={}
        )
        return MemoryVersion.from_json(data)
