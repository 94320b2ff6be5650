"""`memfs serve`'s HTTP app: the routes of `store-api.md` on a Starlette app.

Each endpoint checks the credentials and the beta headers, parses the
request, calls one method of the `Database`'s tables (one SQLite transaction)
and answers JSON. Every answer, success or error, carries a `request-id`
header; errors use the contract's envelope and never show a traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from .._exceptions import (
    InvalidPath,
    InvalidRequest,
    NotFound,
    PermissionDenied,
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
        routes = [
            Route(s, self._endpoint(self.create_store), methods=["POST"]),
            Route(s, self._endpoint(self.list_stores), methods=["GET"]),
            Route(s + "/{sid}", self._endpoint(self.get_store), methods=["GET"]),
            Route(s + "/{sid}", self._endpoint(self.update_store), methods=["POST"]),
            Route(s + "/{sid}", self._endpoint(self.delete_store), methods=["DELETE"]),
            Route(s + "/{sid}/archive", self._endpoint(self.archive_store), methods=["POST"]),
            Route(m, self._endpoint(self.create_memory), methods=["POST"]),
            Route(m, self._endpoint(self.list_memories), methods=["GET"]),
            Route(m + "/{mid}", self._endpoint(self.get_memory), methods=["GET"]),
            Route(m + "/{mid}", self._endpoint(self.update_memory), methods=["POST"]),
            Route(m + "/{mid}", self._endpoint(self.delete_memory), methods=["DELETE"]),
            Route(v, self._endpoint(self.list_versions), methods=["GET"]),
            Route(v + "/{vid}", self._endpoint(self.get_version), methods=["GET"]),
            Route(v + "/{vid}/redact", self._endpoint(self.redact_version), methods=["POST"]),
        ]
        self.app = Starlette(
            routes=routes,
            exception_handlers={HTTPException: self._http_exception, Exception: self._crash},
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
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

    def _endpoint(self, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            rid = new_request_id()
            try:
                caller = authenticate(request.headers, self.tokens)
                check_headers(request)
                body = await handler(request, caller)
            except StatusError as e:
                return error_response(e, rid)
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
        if caller.allowed is not None:
            raise PermissionDenied(
                "these credentials are limited to some stores and cannot create one"
            )
        return self.db.stores.create(await json_body(request))

    async def list_stores(self, request: Request, caller: Caller) -> dict[str, Any]:
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
        sid = request.path_params["sid"]
        caller.check_store(sid)
        return self.db.stores.get(sid)

    async def update_store(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid = request.path_params["sid"]
        caller.check_store(sid)
        return self.db.stores.update(sid, await json_body(request))

    async def archive_store(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid = request.path_params["sid"]
        caller.check_store(sid)
        await json_body(request)
        return self.db.stores.archive(sid)

    async def delete_store(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid = request.path_params["sid"]
        caller.check_store(sid)
        return self.db.stores.delete(sid)

    # -- memories -----------------------------------------------------------

    async def create_memory(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid = request.path_params["sid"]
        caller.check_store(sid)
        full = full_view(request, View.BASIC)
        return self.db.memories.create(sid, await json_body(request), caller.actor, full)

    async def list_memories(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid = request.path_params["sid"]
        caller.check_store(sid)
        q = request.query_params
        prefix = q.get("path_prefix") or "/"
        try:
            prefix = normalize_prefix(prefix)
        except InvalidPath as e:
            raise InvalidRequest(str(e))
        depth = int(query_choice(request, "depth", ("0", "1"), "0"))
        return self.db.memories.list(
            sid,
            prefix=prefix,
            depth=depth,
            full=full_view(request, View.BASIC),
            limit=q.get("limit"),
            page=q.get("page") or None,
        )

    async def get_memory(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid = request.path_params["sid"]
        caller.check_store(sid)
        full = full_view(request, View.FULL)
        return self.db.memories.get(sid, request.path_params["mid"], full)

    async def update_memory(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid = request.path_params["sid"]
        caller.check_store(sid)
        full = full_view(request, View.BASIC)
        body = await json_body(request)
        return self.db.memories.update(sid, request.path_params["mid"], body, caller.actor, full)

    async def delete_memory(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid = request.path_params["sid"]
        caller.check_store(sid)
        expected = request.query_params.get("expected_content_sha256") or None
        return self.db.memories.delete(sid, request.path_params["mid"], expected, caller.actor)

    # -- versions -----------------------------------------------------------

    async def list_versions(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid = request.path_params["sid"]
        caller.check_store(sid)
        q = request.query_params
        return self.db.versions.list(
            sid,
            memory_id=q.get("memory_id") or None,
            operation=q.get("operation") or None,
            created_gte=q.get("created_at[gte]") or None,
            created_lte=q.get("created_at[lte]") or None,
            session_id=q.get("session_id") or None,
            api_key_id=q.get("api_key_id") or None,
            full=full_view(request, View.BASIC),
            limit=q.get("limit"),
            page=q.get("page") or None,
        )

    async def get_version(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid = request.path_params["sid"]
        caller.check_store(sid)
        full = full_view(request, View.FULL)
        return self.db.versions.get(sid, request.path_params["vid"], full)

    async def redact_version(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid = request.path_params["sid"]
        caller.check_store(sid)
        await json_body(request)
        return self.db.versions.redact(sid, request.path_params["vid"], caller.actor)
