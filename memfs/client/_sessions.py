"""The session endpoints (`/v1/sessions...`): a session and the resources
attached to it, which is where a worker finds the memory stores of the work
item it claimed. Every call carries `anthropic-beta: managed-agents-2026-04-01`
in place of the client's Memory Store beta, as the session endpoints ask.

A worker holding a sessions token reads its session (`get_session`,
`iter_session_resources`, `list_session_resources`); creating, attaching,
detaching and deleting take an API key (on `memfs serve`: one of its tokens).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterable
from typing import Any

from .._exceptions import StoreError
from ..api import (
    ACCESS_READ_WRITE,
    SESSIONS_BETA,
    CreatedSession,
    Page,
    Resource,
    Session,
    SessionResource,
)
from ._endpoints import _Endpoints, _every_item, _given, _params, _q

_SESSION_HEADERS = {"anthropic-beta": SESSIONS_BETA}


def _resource_body(resource: Resource) -> dict[str, Any]:
    """What attaching `resource` sends: the store, its access and, when the
    resource names one, its mount path (the server snapshots the name and
    the description itself)."""
    body: dict[str, Any] = {
        "type": "memory_store",
        "memory_store_id": resource.memory_store_id,
        "access": resource.access or ACCESS_READ_WRITE,
    }
    if resource.mount_path:
        body["mount_path"] = resource.mount_path
    return body


class SessionEndpoints(_Endpoints):
    """`/v1/sessions`: sessions and their resources."""

    def _session_url(self, session_id: str, *rest: str) -> str:
        return "/".join(["/v1/sessions", _q(session_id), *(_q(part) for part in rest)])

    async def create_session(
        self,
        resources: Iterable[Resource],
        *,
        environment_id: str | None = None,
        title: str | None = None,
        metadata: dict[str, str] | None = None,
    ) -> CreatedSession:
        """A new session holding these memory stores, with the sessions token
        `memfs serve` minted for it. Not retried into a duplicate silently:
        an attempt whose answer was lost may leave a session nobody holds."""
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
        """The session, its resources included."""
        data = await self._send.call(
            "get_session", "GET", self._session_url(session_id), headers=_SESSION_HEADERS
        )
        return Session.from_json(data)

    async def delete_session(self, session_id: str) -> None:
        """Delete the session; its sessions token stops working. A 404 after a
        retried attempt means an earlier attempt did it, and counts as done."""
        await self._delete(
            "delete_session", self._session_url(session_id), headers=_SESSION_HEADERS
        )

    async def list_session_resources_page(
        self, session_id: str, *, limit: int | None = None, page: str | None = None
    ) -> Page[SessionResource]:
        """One page of the session's resources, in the order they were attached."""
        data = await self._send.call(
            "list_session_resources_page",
            "GET",
            self._session_url(session_id, "resources"),
            params=_params(limit=limit, page=page),
            headers=_SESSION_HEADERS,
        )
        items = [SessionResource.from_json(d) for d in data.get("data", []) if isinstance(d, dict)]
        return Page(items, data.get("next_page"))

    async def iter_session_resources(
        self, session_id: str, *, limit: int | None = None
    ) -> AsyncGenerator[SessionResource, None]:
        """Every resource of the session, page after page (files and
        repositories included: `SessionResource.is_memory_store` tells)."""
        async for resource in _every_item(
            lambda page: self.list_session_resources_page(session_id, limit=limit, page=page)
        ):
            yield resource

    async def list_session_resources(
        self, session_id: str, *, limit: int | None = None
    ) -> list[SessionResource]:
        """`iter_session_resources`, gathered: every page."""
        return [r async for r in self.iter_session_resources(session_id, limit=limit)]

    async def get_session_resource(self, session_id: str, resource_id: str) -> SessionResource:
        """One resource by its id (`memfs serve` also takes its store's id)."""
        data = await self._send.call(
            "get_session_resource",
            "GET",
            self._session_url(session_id, "resources", resource_id),
            headers=_SESSION_HEADERS,
        )
        return SessionResource.from_json(data)

    async def add_session_resource(self, session_id: str, resource: Resource) -> SessionResource:
        """Attach a memory store to a live session. When a retried attempt
        finds the store attached already, by an earlier attempt whose answer
        was lost, with the access asked for, that resource is the answer."""
        answer = await self._send.exchange(
            "add_session_resource",
            "POST",
            self._session_url(session_id, "resources"),
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
        """Detach a resource (by its id; `memfs serve` also takes its store's
        id). A 404 after a retried attempt counts as done."""
        await self._delete(
            "delete_session_resource",
            self._session_url(session_id, "resources", resource_id),
            headers=_SESSION_HEADERS,
        )
