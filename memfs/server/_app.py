"""`memfs serve`'s routes, on Starlette's router: each checks the credentials and the beta headers,
calls one method of the `Database`'s tables and answers JSON. Every answer carries a `request-id`
header; errors use the contract's envelope and never show a traceback."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route as PathRoute
from starlette.routing import Router
from starlette.types import Message, Receive, Scope, Send
from starlette.websockets import WebSocketClose

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
from ._auth import Caller, Grant, authenticate, caller_for_grant
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
Route = tuple[Handler, str | None]


class MemoryStoreApp:
    """The HTTP side: routes, headers, credentials and the error envelope."""

    def __init__(self, db: Database, tokens: Mapping[str, Grant | frozenset[str] | None]) -> None:
        """`tokens`: each accepted token's `Grant` (or the stores it is limited to)."""
        self.db = db
        self.callers = {
            token: caller_for_grant(token, grant if isinstance(grant, Grant) else Grant(grant))
            for token, grant in tokens.items()
        }
        s = "/v1/memory_stores"
        m = s + "/{sid}/memories"
        v = s + "/{sid}/memory_versions"
        n = "/v1/sessions"
        r = n + "/{session_id}/resources"
        rr = r + "/{resource_id}"
        # method, path, handler, and what a sessions token may not do there
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
            ("GET", rr, self.get_resource, None),
            ("DELETE", rr, self.delete_resource, "detach memory stores from sessions"),
        ]
        by_path: dict[str, dict[str, Route]] = {}
        for method, path, handler, not_for_sessions in table:
            by_path.setdefault(path, {})[method] = (handler, not_for_sessions)
        self.router = Router(
            [
                PathRoute(p, self._endpoint(routes), methods=list(routes))
                for p, routes in by_path.items()
            ]
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await WebSocketClose()(scope, receive, send)
            return
        scope["app"] = self  # Starlette's router then raises its 404 and 405
        request = Request(scope, receive)
        try:
            # ASGI hands routing a decoded path, where `memstore_x%2Fmemories` would be
            # `memstore_x/memories`: an id holding an encoded separator names nothing.
            if b"%2f" in scope.get("raw_path", b"").lower():
                raise NotFound("no such store, memory or version: the URL holds an encoded '/'")
            await self.router(scope, receive, _with_request_id(send))
            return
        except (StatusError, InvalidPath, ClientDisconnect, HTTPException) as e:
            response = _refused(request, e)
        except Exception as e:
            log.error(
                "internal error on %s %s",
                request.method,
                request.url.path,
                exc_info=e,
                extra={"event": "server_error"},
            )
            response = error_response(ServerError("internal server error"), new_request_id())
            await response(scope, receive, send)
            raise
        await response(scope, receive, send)

    def _endpoint(self, routes: dict[str, Route]) -> Callable[[Request], Awaitable[Response]]:
        """The endpoint of one path, running the handler of the request's method."""

        async def endpoint(request: Request) -> Response:
            handler, not_for_sessions = routes[
                "GET" if request.method == "HEAD" else request.method
            ]
            caller = authenticate(request.headers, self.callers, self.db.sessions.caller_for)
            check_headers(request, sessions=request.scope["path"].startswith("/v1/sessions"))
            if not_for_sessions:
                caller.check_not_session(not_for_sessions)
            return json_response(200, await handler(request, caller), new_request_id())

        return endpoint

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
        expected = request.query_params.get("expected_content_sha256")
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


def _refused(
    request: Request, exc: StatusError | InvalidPath | ClientDisconnect | HTTPException
) -> Response:
    """A refusal in the envelope: the contract's, a path's, Starlette's own (no
    such route, method not allowed), or a body that did not come whole."""
    error: StatusError
    headers: dict[str, str] | None = None
    where = request.url.path
    if isinstance(exc, InvalidPath):
        error = InvalidRequest(str(exc))
    elif isinstance(exc, ClientDisconnect):
        # The client left, or was dropped, mid-body: this answer goes nowhere.
        error = InvalidRequest("the request body did not come whole")
    elif isinstance(exc, HTTPException) and exc.status_code == 404:
        error = NotFound(f"no route for {request.method} {where}")
    elif isinstance(exc, HTTPException):
        message = str(exc.detail)
        if exc.status_code == 405:
            message = f"{request.method} is not allowed on {where}"
        error = InvalidRequest(message, status=exc.status_code)
        headers = dict(exc.headers or {})
        if "Allow" in headers:  # a set's order, which changes from run to run
            headers["Allow"] = ", ".join(sorted(headers["Allow"].split(", ")))
    else:
        error = exc
        if isinstance(exc, RequestTooLarge):
            # The rest of the body is never read: the connection ends with this answer.
            headers = {"connection": "close"}
    return error_response(error, new_request_id(), headers)


def _with_request_id(send: Send) -> Send:
    """`send`, giving an answer that has no `request-id` (Starlette's redirect
    of a path with trailing slashes) one."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = message.get("headers", [])
            if not any(name == b"request-id" for name, _ in headers):
                message["headers"] = [*headers, (b"request-id", new_request_id().encode())]
        await send(message)

    return sending
