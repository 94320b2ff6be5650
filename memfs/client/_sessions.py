"""The session endpoints (`/v1/sessions...`), where a worker finds the memory
stores of the work item it claimed. Every call carries the Managed Agents
beta in place of the client's Memory Store one.
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


def _session_url(session_id: str, *rest: str) -> str:
    return "/".join(["/v1/sessions", _q(session_id), *(_q(part) for part in rest)])


def _resource_body(resource: Resource) -> dict[str, Any]:
    """What attaching `resource` sends (the server snapshots its name and
    description itself)."""
    body: dict[str, Any] = {
        "type": "memory_store",
        "memory_store_id": resource.memory_store_id,
        "access": resource.access or ACCESS_READ_WRITE,
    }
    if resource.mount_path:
        body["mount_path"] = resource.mount_path
    return body


class SessionEndpoints(_Endpoints):
    """A worker holding a sessions token reads its session and resources;
    creating, attaching, detaching and deleting take an API key."""

    async def create_session(
        self,
        resources: Iterable[Resource],
        *,
        environment_id: str | None = None,
        title: str | None = None,
        metadata: dict[str, str] | None = None,
    ) -> CreatedSession:
        """A new session holding these stores, with the sessions token `memfs
        serve` minted for it. An attempt whose answer was lost may leave a
        session nobody holds."""
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
        data = await self._send.call(
            "get_session", "GET", _session_url(session_id), headers=_SESSION_HEADERS
        )
        return Session.from_json(data)

    async def delete_session(self, session_id: str) -> None:
        """Its sessions token stops working (a 404 after a retry is done)."""
        await self._delete("delete_session", _session_url(session_id), headers=_SESSION_HEADERS)

    async def list_session_resources_page(
        self, session_id: str, *, limit: int | None = None, page: str | None = None
    ) -> Page[SessionResource]:
        """One page of the session's resources, in the order they were attached."""
        data = await self._send.call(
            "list_session_resources_page",
            "GET",
            _session_url(session_id, "resources"),
            params=_params(limit=limit, page=page),
            headers=_SESSION_HEADERS,
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

    async def get_session_resource(self, session_id: str, resource_id: str) -> SessionResource:
        """One resource by its id (`memfs serve` also takes its store's id)."""
        data = await self._send.call(
            "get_session_resource",
            "GET",
            _session_url(session_id, "resources", resource_id),
            headers=_SESSION_HEADERS,
        )
        return SessionResource.from_json(data)

    async def add_session_resource(self, session_id: str, resource: Resource) -> SessionResource:
        """Attach a store to a live session. A retried attempt that finds the
        store attached already, with the access asked for, answers that."""
        answer = await self._send.exchange(
            "add_session_resource",
            "POST",
            _session_url(session_id, "resources"),
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
            _session_url(session_id, "resources", resource_id),
            headers=_SESSION_HEADERS,
        )
