"""`memfs serve`'s routes on a Starlette app: each checks the credentials and
the beta headers, calls one method of the `Database`'s tables and answers
JSON. Every answer carries a `request-id` header; errors use the contract's
envelope and never show a traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from .._exceptions import (
    InvalidPath,
    InvalidRequest,
    NotFound,
    PermissionDenied,
    RequestTooLarge,
    ServerError,
    StatusError,
)
from ..api import View, normalize_prefix
from ._auth import Caller, Grant, authenticate
from ._db import Database
from ._http import (
    check_headers,
    error_response,
    full_view,
    json_body,
    json_response,
    new_request_id,
    query_bool,
    query_choice,
)

log = logging.getLogger("memfs.serve")

Handler = Callable[[Request, Caller], Awaitable[dict[str, Any]]]


class MemoryStoreApp:
    """The HTTP side: routes, headers, credentials and the error envelope."""

    def __init__(self, db: Database, tokens: Mapping[str, Grant | frozenset[str] | None]) -> None:
        """`tokens`: each accepted token's `Grant` (or the stores it is limited to)."""
        self.db = db
        self.tokens = {t: g if isinstance(g, Grant) else Grant(g) for t, g in tokens.items()}
        s = "/v1/memory_stores"
        m = s + "/{sid}/memories"
        v = s + "/{sid}/memory_versions"
        n = "/v1/sessions"
        r = n + "/{session_id}/resources"
        table: list[tuple[str, str, Handler, str | None]] = [
            ("POST", s, self.create_store, "create memory stores"),
            ("GET", s, self.list_stores, "list memory stores"),
            ("GET", s + "/{sid}", self.get_store, None),
            ("POST", s + "/{sid}", self.update_store, "change memory stores"),
            ("DELETE", s + "/{sid}", self.delete_store, "delete memory stores"),
            ("POST", s + "/{sid}/archive", self.archive_store, "archive memory stores"),
            ("POST", m, self.create_memory, None),
            ("GET", m, self.list_memories, None),
            ("GET", m + "/{mid}", self.get_memory, None),
            ("POST", m + "/{mid}", self.update_memory, None),
            ("DELETE", m + "/{mid}", self.delete_memory, None),
            ("GET", v, self.list_versions, None),
            ("GET", v + "/{vid}", self.get_version, None),
            ("POST", v + "/{vid}/redact", self.redact_version, None),
            ("POST", n, self.create_session, "create sessions"),
            ("GET", n + "/{session_id}", self.get_session, None),
            ("DELETE", n + "/{session_id}", self.delete_session, "delete sessions"),
            ("POST", n + "/{session_id}/status", self.set_session_status, "set a session's status"),
            ("GET", r, self.list_resources, None),
            ("POST", r, self.add_resource, "attach memory stores to sessions"),
            ("GET", r + "/{resource_id}", self.get_resource, None),
            (
                "DELETE",
                r + "/{resource_id}",
                self.delete_resource,
                "detach memory stores from sessions",
            ),
        ]
        routes = [
            Route(path, self._endpoint(handler, not_for_sessions), methods=[method])
            for method, path, handler, not_for_sessions in table
        ]
        self.app = Starlette(
            routes=routes,
            exception_handlers={
                StatusError: self._refused,
                InvalidPath: self._refused,
                ClientDisconnect: self._refused,
                HTTPException: self._refused,
                Exception: self._crash,
            },
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # ASGI hands routing a decoded path, where `memstore_x%2Fmemories` would be
        # `memstore_x/memories`: an id holding an encoded separator names nothing.
        if b"%2f" in scope.get("raw_path", b"").lower():
            refusal = NotFound("no such store, memory or version: the URL holds an encoded '/'")
            await error_response(refusal, new_request_id())(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _endpoint(
        self, handler: Handler, not_for_sessions: str | None
    ) -> Callable[[Request], Awaitable[Response]]:
        """The endpoint running `handler`, which a sessions token may not call
        when `not_for_sessions` says what it cannot do."""

        async def endpoint(request: Request) -> Response:
            caller = authenticate(request.headers, self.tokens, self.db.sessions.caller_for)
            check_headers(request, sessions=request.scope["path"].startswith("/v1/sessions"))
            if not_for_sessions:
                caller.check_not_session(not_for_sessions)
            return json_response(200, await handler(request, caller), new_request_id())

        return endpoint

    async def _refused(self, request: Request, exc: Exception) -> Response:
        """A refusal in the envelope: the contract's, a path's, Starlette's own
        (no such route, method not allowed), or a body that did not come whole."""
        error: Exception = exc
        headers: dict[str, str] | None = None
        where = request.url.path
        if isinstance(exc, RequestTooLarge):
            # The rest of the body is never read: the connection ends with this answer.
            headers = {"connection": "close"}
        elif isinstance(exc, InvalidPath):
            error = InvalidRequest(str(exc))
        elif isinstance(exc, ClientDisconnect):
            # The client left, or was dropped, mid-body: this answer goes nowhere.
            error = InvalidRequest("the request body did not come whole")
        elif isinstance(exc, HTTPException) and exc.status_code == 404:
            error = NotFound(f"no route for {request.method} {where}")
        elif isinstance(exc, HTTPException) and exc.status_code == 405:
            error = InvalidRequest(f"{request.method} is not allowed on {where}", status=405)
            headers = dict(exc.headers or {})
        elif isinstance(exc, HTTPException):
            error = InvalidRequest(str(exc.detail), status=exc.status_code)
        assert isinstance(error, StatusError)
        return error_response(error, new_request_id(), headers)

    async def _crash(self, request: Request, exc: Exception) -> Response:
        log.error(
            "internal error on %s %s",
            request.method,
            request.url.path,
            exc_info=exc,
            extra={"event": "server_error"},
        )
        return error_response(ServerError("internal server error"), new_request_id())

    async def create_store(self, request: Request, caller: Caller) -> dict[str, Any]:
        if caller.allowed is not None:
            raise PermissionDenied(
                "these credentials are limited to some stores and cannot create one"
            )
        return self.db.stores.create(await json_body(request))

    async def list_stores(self, request: Request, caller: Caller) -> dict[str, Any]:
        archived = query_bool(request, "include_archived")
        return self.db.stores.list(request.query_params, archived, caller.allowed)

    async def get_store(self, request: Request, caller: Caller) -> dict[str, Any]:
        return self.db.stores.get(_store_of(request, caller))

    async def update_store(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid = _store_of(request, caller)
        return self.db.stores.update(sid, await json_body(request))

    async def archive_store(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid = _store_of(request, caller)
        await json_body(request)
        return self.db.stores.archive(sid)

    async def delete_store(self, request: Request, caller: Caller) -> dict[str, Any]:
        return self.db.stores.delete(_store_of(request, caller))

    async def create_memory(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid = _store_of(request, caller, write=True)
        full = full_view(request, View.BASIC)
        return self.db.memories.create(sid, await json_body(request), caller.actor, full)

    async def list_memories(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid = _store_of(request, caller)
        prefix = normalize_prefix(request.query_params.get("path_prefix") or "/")
        depth = int(query_choice(request, "depth", ("0", "1"), "0"))
        full = full_view(request, View.BASIC)
        return self.db.memories.list(sid, prefix, depth, full, request.query_params)

    async def get_memory(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid, mid = _store_of(request, caller), request.path_params["mid"]
        return self.db.memories.get(sid, mid, full_view(request, View.FULL))

    async def update_memory(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid, mid = _store_of(request, caller, write=True), request.path_params["mid"]
        full = full_view(request, View.BASIC)
        return self.db.memories.update(sid, mid, await json_body(request), caller.actor, full)

    async def delete_memory(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid, mid = _store_of(request, caller, write=True), request.path_params["mid"]
        expected = request.query_params.get("expected_content_sha256") or None
        return self.db.memories.delete(sid, mid, expected, caller.actor)

    async def list_versions(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid = _store_of(request, caller)
        return self.db.memories.list_versions(
            sid, full_view(request, View.BASIC), request.query_params
        )

    async def get_version(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid, vid = _store_of(request, caller), request.path_params["vid"]
        return self.db.memories.get_version(sid, vid, full_view(request, View.FULL))

    async def redact_version(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid = _store_of(request, caller, write=True)
        await json_body(request)
        return self.db.memories.redact_version(sid, request.path_params["vid"], caller.actor)

    def _session_of(self, request: Request, caller: Caller) -> str:
        """The session a request names, once the caller may see it (else 403)."""
        session_id: str = request.path_params["session_id"]
        caller.check_session(session_id, lambda: self.db.sessions.creator_and_stores(session_id))
        return session_id

    async def create_session(self, request: Request, caller: Caller) -> dict[str, Any]:
        """The new session, and (in this answer only) its `sessions_token`."""
        body = await json_body(request)
        session, token = self.db.sessions.create(body, caller.check_store, caller.token_id)
        return {**session, "sessions_token": token}

    async def get_session(self, request: Request, caller: Caller) -> dict[str, Any]:
        return self.db.sessions.get(self._session_of(request, caller))

    async def delete_session(self, request: Request, caller: Caller) -> dict[str, Any]:
        return self.db.sessions.delete(self._session_of(request, caller))

    async def set_session_status(self, request: Request, caller: Caller) -> dict[str, Any]:
        session_id = self._session_of(request, caller)
        return self.db.sessions.set_status(session_id, await json_body(request))

    async def list_resources(self, request: Request, caller: Caller) -> dict[str, Any]:
        session_id = self._session_of(request, caller)
        return self.db.sessions.list_resources(session_id, request.query_params)

    async def get_resource(self, request: Request, caller: Caller) -> dict[str, Any]:
        session_id = self._session_of(request, caller)
        return self.db.sessions.get_resource(session_id, request.path_params["resource_id"])

    async def add_resource(self, request: Request, caller: Caller) -> dict[str, Any]:
        session_id = self._session_of(request, caller)
        body = await json_body(request)
        return self.db.sessions.add_resource(session_id, body, caller.check_store)

    async def delete_resource(self, request: Request, caller: Caller) -> dict[str, Any]:
        session_id = self._session_of(request, caller)
        return self.db.sessions.delete_resource(session_id, request.path_params["resource_id"])


def _store_of(request: Request, caller: Caller, *, write: bool = False) -> str:
    """The store a request names, once the caller may touch it (else 403);
    `write`: change its memories, which a read-only session may not."""
    sid: str = request.path_params["sid"]
    if write:
        caller.check_write(sid)
    else:
        caller.check_store(sid)
    return sid
