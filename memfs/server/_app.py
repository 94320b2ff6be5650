"""`memfs serve`'s routes, as one ASGI app: each checks the credentials and
the beta headers, calls one method of the `Database`'s tables and answers
JSON. Every answer carries a `request-id` header; errors use the contract's
envelope and never show a traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.datastructures import URL
from starlette.requests import ClientDisconnect, Request
from starlette.responses import RedirectResponse, Response
from starlette.types import Receive, Scope, Send
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
        # Each path's parameter names and routes by method, under its shape:
        # the path with its ids as {}, an id being every second segment
        # after /v1/{collection}.
        self.routes: dict[str, tuple[tuple[str, ...], dict[str, Route]]] = {}
        for method, path, handler, not_for_sessions in table:
            parts = path.split("/")
            assert [p for p in parts if p.startswith("{")] == parts[3::2], path
            names = tuple(name.strip("{}") for name in parts[3::2])
            parts[3::2] = ["{}"] * len(names)
            routes = self.routes.setdefault("/".join(parts), (names, {}))[1]
            routes[method] = (handler, not_for_sessions)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await WebSocketClose()(scope, receive, send)
            return
        request = Request(scope, receive)
        try:
            response = await self._answer(request)
        except (StatusError, InvalidPath, ClientDisconnect) as e:
            response = _refused(e)
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

    async def _answer(self, request: Request) -> Response:
        scope = request.scope
        # ASGI hands routing a decoded path, where `memstore_x%2Fmemories` would be
        # `memstore_x/memories`: an id holding an encoded separator names nothing.
        if b"%2f" in scope.get("raw_path", b"").lower():
            raise NotFound("no such store, memory or version: the URL holds an encoded '/'")
        found = self._routes_of(scope["path"])
        if found is None:
            return self._no_route(request)
        scope["path_params"], routes = found
        route = routes.get("GET" if scope["method"] == "HEAD" else scope["method"])
        if route is None:
            allowed = sorted({*routes, *(["HEAD"] if "GET" in routes else [])})
            where = request.url.path
            error = InvalidRequest(f"{request.method} is not allowed on {where}", status=405)
            return error_response(error, new_request_id(), {"allow": ", ".join(allowed)})
        handler, not_for_sessions = route
        caller = authenticate(request.headers, self.callers, self.db.sessions.caller_for)
        check_headers(request, sessions=scope["path"].startswith("/v1/sessions"))
        if not_for_sessions:
            caller.check_not_session(not_for_sessions)
        return json_response(200, await handler(request, caller), new_request_id())

    def _routes_of(self, path: str) -> tuple[dict[str, str], dict[str, Route]] | None:
        """The path's parameters and its routes by method; None when no
        route has its shape or an id is empty."""
        parts = path.split("/")
        ids = parts[3::2]
        parts[3::2] = ["{}"] * len(ids)
        found = self.routes.get("/".join(parts))
        if found is None or not all(ids):
            return None
        return dict(zip(found[0], ids, strict=True)), found[1]

    def _no_route(self, request: Request) -> Response:
        """404; a path that names a route but for trailing slashes is
        redirected (307) to the path without them."""
        path = request.scope["path"].rstrip("/")
        if path != request.scope["path"] and path and self._routes_of(path) is not None:
            target = URL(scope={**request.scope, "path": path})
            return RedirectResponse(str(target), headers={"request-id": new_request_id()})
        refusal = NotFound(f"no route for {request.method} {request.url.path}")
        return error_response(refusal, new_request_id())

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


def _refused(exc: StatusError | InvalidPath | ClientDisconnect) -> Response:
    """A refusal in the envelope: the contract's, a path's, or a body that
    did not come whole."""
    error: StatusError
    headers: dict[str, str] | None = None
    if isinstance(exc, InvalidPath):
        error = InvalidRequest(str(exc))
    elif isinstance(exc, ClientDisconnect):
        # The client left, or was dropped, mid-body: this answer goes nowhere.
        error = InvalidRequest("the request body did not come whole")
    else:
        error = exc
        if isinstance(exc, RequestTooLarge):
            # The rest of the body is never read: the connection ends with this answer.
            headers = {"connection": "close"}
    return error_response(error, new_request_id(), headers)
