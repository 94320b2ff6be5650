"""`memfs serve`'s HTTP app: the routes of `store-api.md` on a Starlette app.

Each endpoint checks the credentials and the beta headers, parses the
request, calls one method of the `Database`'s tables (one SQLite transaction)
and answers JSON. The store, memory and version endpoints are here; the
session endpoints are `_session_routes`. Every answer, success or error, carries a `request-id`
header; errors use the contract's envelope and never show a traceback.
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
from ._auth import Caller, Grant, authenticate, grants
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
from ._session_routes import SessionRoutes

log = logging.getLogger("memfs.serve")

Handler = Callable[[Request, Caller], Awaitable[dict[str, Any]]]


class MemoryStoreApp:
    """The HTTP side: routes, headers, credentials and the error envelope."""

    def __init__(self, db: Database, tokens: Mapping[str, Grant | frozenset[str] | None]) -> None:
        """`tokens` maps each accepted token to its `Grant`; a bare store set
        or None stands for `Grant(stores)`, as before grants had users."""
        self.db = db
        self.tokens = grants(tokens)
        s = "/v1/memory_stores"
        m = s + "/{sid}/memories"
        v = s + "/{sid}/memory_versions"
        table = [
            ("POST", s, self.create_store),
            ("GET", s, self.list_stores),
            ("GET", s + "/{sid}", self.get_store),
            ("POST", s + "/{sid}", self.update_store),
            ("DELETE", s + "/{sid}", self.delete_store),
            ("POST", s + "/{sid}/archive", self.archive_store),
            ("POST", m, self.create_memory),
            ("GET", m, self.list_memories),
            ("GET", m + "/{mid}", self.get_memory),
            ("POST", m + "/{mid}", self.update_memory),
            ("DELETE", m + "/{mid}", self.delete_memory),
            ("GET", v, self.list_versions),
            ("GET", v + "/{vid}", self.get_version),
            ("POST", v + "/{vid}/redact", self.redact_version),
        ]
        routes = []
        sessions = SessionRoutes(db)
        for method, template, handler, of_sessions in [
            *((*route, False) for route in table),
            *((*route, True) for route in sessions.routes()),
        ]:
            endpoint = self._endpoint(handler, sessions=of_sessions)
            routes.append(Route(template, endpoint, methods=[method]))
        self.app = Starlette(
            routes=routes,
            exception_handlers={HTTPException: self._http_exception, Exception: self._crash},
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Every request goes through Starlette's router; its refusals (no
        such route, a method the route does not take) are answered in the
        envelope by `_http_exception`."""
        # ASGI hands routing a decoded path, where `memstore_x%2Fmemories` would be
        # `memstore_x/memories`: an id holding an encoded separator names nothing.
        if b"%2f" in scope.get("raw_path", b"").lower():
            refusal = NotFound("no such store, memory or version: the URL holds an encoded '/'")
            await error_response(refusal, new_request_id())(scope, receive, send)
            return
        await self.app(scope, receive, send)

    # -- the envelope ----------------------------------------------------

    async def _http_exception(self, request: Request, exc: Exception) -> Response:
        """Starlette's own refusals (no such route, method not allowed) in the envelope."""
        if not isinstance(exc, HTTPException):
            return await self._crash(request, exc)
        rid = new_request_id()
        if exc.status_code == 404:
            return error_response(
                NotFound(f"no route for {request.method} {request.url.path}"), rid
            )
        if exc.status_code == 405:
            refusal = InvalidRequest(
                f"{request.method} is not allowed on {request.url.path}", status=405
            )
            return error_response(refusal, rid, dict(exc.headers or {}))
        return error_response(InvalidRequest(str(exc.detail), status=exc.status_code), rid)

    async def _crash(self, request: Request, exc: Exception) -> Response:
        log.error(
            "internal error on %s %s",
            request.method,
            request.url.path,
            exc_info=exc,
            extra={"event": "server_error"},
        )
        return error_response(ServerError("internal server error"), new_request_id())

    def _endpoint(
        self, handler: Handler, *, sessions: bool = False
    ) -> Callable[[Request], Awaitable[Response]]:
        """The endpoint running `handler`; `sessions`: a session endpoint,
        which carries the Managed Agents beta."""
        lookup = self.db.sessions.grant_for

        async def endpoint(request: Request) -> Response:
            rid = new_request_id()
            try:
                caller = authenticate(request.headers, self.tokens, lookup)
                check_headers(request, sessions=sessions)
                body = await handler(request, caller)
            except RequestTooLarge as e:
                # The rest of the body is never read: the connection ends with this answer.
                return error_response(e, rid, {"connection": "close"})
            except StatusError as e:
                return error_response(e, rid)
            except ClientDisconnect:
                # The client left, or was dropped, mid-body: this answer goes nowhere.
                return error_response(InvalidRequest("the request body did not come whole"), rid)
            except Exception:
                log.exception(
                    "internal error on %s %s",
                    request.method,
                    request.url.path,
                    extra={"event": "server_error"},
                )
                return error_response(ServerError("internal server error"), rid)
            return json_response(200, body, rid)

        return endpoint

    # -- stores --------------------------------------------------------------

    async def create_store(self, request: Request, caller: Caller) -> dict[str, Any]:
        caller.check_not_session("create memory stores")
        if caller.allowed is not None:
            raise PermissionDenied(
                "these credentials are limited to some stores and cannot create one"
            )
        return self.db.stores.create(await json_body(request))

    async def list_stores(self, request: Request, caller: Caller) -> dict[str, Any]:
        caller.check_not_session("list memory stores")
        q = request.query_params
        return self.db.stores.list(
            limit=q.get("limit"),
            page=q.get("page") or None,
            include_archived=query_bool(request, "include_archived"),
            created_gte=q.get("created_at[gte]") or None,
            created_lte=q.get("created_at[lte]") or None,
            only=caller.allowed,
        )

    async def get_store(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid = _store_of(request, caller)
        return self.db.stores.get(sid)

    async def update_store(self, request: Request, caller: Caller) -> dict[str, Any]:
        caller.check_not_session("change memory stores")
        sid = _store_of(request, caller)
        return self.db.stores.update(sid, await json_body(request))

    async def archive_store(self, request: Request, caller: Caller) -> dict[str, Any]:
        caller.check_not_session("archive memory stores")
        sid = _store_of(request, caller)
        await json_body(request)
        return self.db.stores.archive(sid)

    async def delete_store(self, request: Request, caller: Caller) -> dict[str, Any]:
        caller.check_not_session("delete memory stores")
        sid = _store_of(request, caller)
        return self.db.stores.delete(sid)

    # -- memories -----------------------------------------------------------

    async def create_memory(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid = _store_of(request, caller, write=True)
        full = full_view(request, View.BASIC)
        return self.db.memories.create(sid, await json_body(request), caller.actor, full)

    async def list_memories(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid = _store_of(request, caller)
        q = request.query_params
        prefix = q.get("path_prefix") or "/"
        try:
            prefix = normalize_prefix(prefix)
        except InvalidPath as e:
            raise InvalidRequest(str(e))
        depth = int(query_choice(request, "depth", ("0", "1"), "0"))
        return self.db.memories.list(sid, prefix=prefix, depth=depth, **_paging(request))

    async def get_memory(self, request: Request, caller: Caller) -> dict[str, Any]:
        return self.db.memories.get(
            _store_of(request, caller), request.path_params["mid"], full_view(request, View.FULL)
        )

    async def update_memory(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid = _store_of(request, caller, write=True)
        full = full_view(request, View.BASIC)
        body = await json_body(request)
        return self.db.memories.update(sid, request.path_params["mid"], body, caller.actor, full)

    async def delete_memory(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid = _store_of(request, caller, write=True)
        expected = request.query_params.get("expected_content_sha256") or None
        return self.db.memories.delete(sid, request.path_params["mid"], expected, caller.actor)

    # -- versions -----------------------------------------------------------

    async def list_versions(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid = _store_of(request, caller)
        q = request.query_params
        return self.db.versions.list(
            sid,
            memory_id=q.get("memory_id") or None,
            operation=q.get("operation") or None,
            created_gte=q.get("created_at[gte]") or None,
            created_lte=q.get("created_at[lte]") or None,
            session_id=q.get("session_id") or None,
            api_key_id=q.get("api_key_id") or None,
            service_account_id=q.get("service_account_id") or None,
            **_paging(request),
        )

    async def get_version(self, request: Request, caller: Caller) -> dict[str, Any]:
        return self.db.versions.get(
            _store_of(request, caller), request.path_params["vid"], full_view(request, View.FULL)
        )

    async def redact_version(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid = _store_of(request, caller, write=True)
        await json_body(request)
        return self.db.versions.redact(sid, request.path_params["vid"], caller.actor)


def _paging(request: Request) -> dict[str, Any]:
    """A list's view and page, as the query asks for them."""
    q = request.query_params
    return {
        "full": full_view(request, View.BASIC),
        "limit": q.get("limit"),
        "page": q.get("page") or None,
    }


def _store_of(request: Request, caller: Caller, *, write: bool = False) -> str:
    """The store a request names, once the caller may touch it (else 403);
    `write`: change its memories, which a session that attached it
    read-only may not."""
    sid: str = request.path_params["sid"]
    if write:
        caller.check_write(sid)
    else:
        caller.check_store(sid)
    return sid
