"""The session endpoints of `memfs serve` (`/v1/sessions...`, beta
`managed-agents-2026-04-01`): create a session with its memory stores, read
it and its resources, attach and detach stores while it lives, set its
status (`POST /v1/sessions/{id}/status`, memfs serve's own), delete it.

Who may do what: an API key (a token of the server's table) manages
sessions; one limited to some stores only with those stores, and only the
sessions it created or that hold only its stores (`Caller.check_session_stores`).
A sessions token reads its own session and its resources, and nothing else here.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from ._auth import Caller
from ._db import Database
from ._http import json_body


class SessionRoutes:
    """The handlers of the session endpoints, over the database's `sessions`."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def routes(self) -> list[tuple[str, str, Any]]:
        """(method, path template, handler) of every session endpoint."""
        s = "/v1/sessions"
        r = s + "/{session_id}/resources"
        return [
            ("POST", s, self.create_session),
            ("GET", s + "/{session_id}", self.get_session),
            ("DELETE", s + "/{session_id}", self.delete_session),
            ("POST", s + "/{session_id}/status", self.set_status),
            ("GET", r, self.list_resources),
            ("POST", r, self.add_resource),
            ("GET", r + "/{resource_id}", self.get_resource),
            ("DELETE", r + "/{resource_id}", self.delete_resource),
        ]

    def _session_of(self, request: Request, caller: Caller) -> str:
        """The session a request names, once the caller may see it (else 403):
        a sessions token its own only; a token limited to some stores one it
        created, or one holding only those stores."""
        session_id: str = request.path_params["session_id"]
        caller.check_session(session_id)
        if caller.allowed is not None and caller.session_id is None:
            created_by, store_ids = self.db.sessions.creator_and_stores(session_id)
            caller.check_session_stores(session_id, created_by, store_ids)
        return session_id

    async def create_session(self, request: Request, caller: Caller) -> dict[str, Any]:
        """The new session, and (in this answer only) its `sessions_token`."""
        caller.check_not_session("create sessions")
        body = await json_body(request)
        session, token = self.db.sessions.create(body, caller.check_store, caller.token_id)
        return {**session, "sessions_token": token}

    async def get_session(self, request: Request, caller: Caller) -> dict[str, Any]:
        return self.db.sessions.get(self._session_of(request, caller))

    async def delete_session(self, request: Request, caller: Caller) -> dict[str, Any]:
        caller.check_not_session("delete sessions")
        return self.db.sessions.delete(self._session_of(request, caller))

    async def set_status(self, request: Request, caller: Caller) -> dict[str, Any]:
        """memfs serve's own: the session with the `status` the body gives."""
        caller.check_not_session("set a session's status")
        session_id = self._session_of(request, caller)
        body = await json_body(request)
        return self.db.sessions.set_status(session_id, body)

    async def list_resources(self, request: Request, caller: Caller) -> dict[str, Any]:
        session_id = self._session_of(request, caller)
        q = request.query_params
        return self.db.sessions.list_resources(session_id, q.get("limit"), q.get("page") or None)

    async def get_resource(self, request: Request, caller: Caller) -> dict[str, Any]:
        session_id = self._session_of(request, caller)
        return self.db.sessions.get_resource(session_id, request.path_params["resource_id"])

    async def add_resource(self, request: Request, caller: Caller) -> dict[str, Any]:
        caller.check_not_session("attach memory stores to sessions")
        session_id = self._session_of(request, caller)
        body = await json_body(request)
        return self.db.sessions.add_resource(session_id, body, caller.check_store)

    async def delete_resource(self, request: Request, caller: Caller) -> dict[str, Any]:
        caller.check_not_session("detach memory stores from sessions")
        session_id = self._session_of(request, caller)
        return self.db.sessions.delete_resource(session_id, request.path_params["resource_id"])
