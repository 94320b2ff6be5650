"""`memfs serve`: the Memory Store API of `store-api.md`, over HTTP, on SQLite.

A Starlette app served by Hypercorn's trio worker. Each endpoint checks the
credentials and the beta headers, parses the request, calls one method of
`Database` (one SQLite transaction) and answers JSON. Every answer, success
or error, carries a `request-id` header; errors use the contract's envelope
and never show a traceback.

Tokens: each accepted token may be restricted to some stores, written
`TOKEN@STORE_ID[,STORE_ID...]`; a restricted token gets 403 on any other store
and cannot create stores. A token written `user:NAME:TOKEN` (restricted or
not) acts as a person: its changes are recorded as `user_actor` `user_NAME`
whichever header carries it. No id recorded anywhere holds a token.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import signal
import socket
import sqlite3
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import trio
from hypercorn.config import Config
from hypercorn.trio import serve as hypercorn_serve
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .._exceptions import (
    AuthenticationFailed,
    ConfigError,
    InvalidPath,
    InvalidRequest,
    PermissionDenied,
    RequestTooLarge,
    StatusError,
)
from ..api import (
    ANTHROPIC_VERSION,
    BETA,
    MAX_CONTENT_BYTES,
    MAX_MEMORIES,
    OLD_BETA,
    SERVE_DEFAULT_HOST,
    SERVE_DEFAULT_PORT,
    SERVE_TOKEN_ENV,
    normalize_prefix,
)
from ._db import LONE_SURROGATE, Database, actor_for, check_store_access

log = logging.getLogger("memfs.serve")

DEFAULT_HOST = SERVE_DEFAULT_HOST
DEFAULT_PORT = SERVE_DEFAULT_PORT
TOKEN_ENV = SERVE_TOKEN_ENV
# A JSON body holding the largest content, escaped at worst (\uXXXX per byte), with room to spare.
MAX_BODY_BYTES = 6 * MAX_CONTENT_BYTES + 64 * 1024


def default_db_path() -> str:
    """`$XDG_DATA_HOME/memfs/memfs.sqlite3`, XDG_DATA_HOME defaulting to ~/.local/share."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "share"
    )
    return os.path.join(base, "memfs", "memfs.sqlite3")


USER_PREFIX = "user:"
_USER_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")


@dataclass(frozen=True)
class Grant:
    """What one accepted token may do: `stores` it is limited to (None: every
    store) and the `user` it acts as (None: a session or an API key, by the
    header it comes in)."""

    stores: frozenset[str] | None = None
    user: str | None = None


def _split_user(token: str) -> tuple[str, str | None]:
    """`user:NAME:TOKEN` → (TOKEN, NAME); any other token → (token, None)."""
    if not token.startswith(USER_PREFIX):
        return token, None
    name, colon, secret = token[len(USER_PREFIX) :].partition(":")
    if not colon or not secret or not _USER_NAME.fullmatch(name):
        raise ConfigError(
            "a user token is written user:NAME:TOKEN, NAME being 1 to 64 of A-Z a-z 0-9 . _ -"
        )
    return secret, name


def parse_tokens(entries: Iterable[str]) -> dict[str, Grant]:
    """Token table from `--token` values and `MEMFS_SERVE_TOKEN` pieces.

    Each entry is `TOKEN` (every store) or `TOKEN@STORE_ID[,STORE_ID...]`,
    where TOKEN may be `user:NAME:TOKEN` to act as that user. Entries may be
    comma-separated; a piece starting with `memstore_` that follows a
    restricted token adds to that token's stores."""
    table: dict[str, Grant] = {}
    last_restricted: str | None = None
    for entry in entries:
        for piece in entry.split(","):
            piece = piece.strip()
            if not piece:
                continue
            if piece.startswith("memstore_") and last_restricted is not None:
                grant = table[last_restricted]
                stores = (grant.stores or frozenset()) | {piece}
                table[last_restricted] = Grant(stores, grant.user)
                continue
            token, at, stores = piece.partition("@")
            if not token:
                raise ConfigError("a token may not be empty")
            token, user = _split_user(token)
            if at:
                allowed = frozenset(s for s in (x.strip() for x in stores.split(",")) if s)
                table[token] = Grant(allowed, user)
                last_restricted = token
            else:
                table[token] = Grant(None, user)
                last_restricted = None
    return table


@dataclass(frozen=True)
class Caller:
    """Who is asking: the actor recorded on versions and the stores they may touch."""

    actor: dict[str, str]
    allowed: frozenset[str] | None

    def check_store(self, store_id: str) -> None:
        check_store_access(store_id, self.allowed)


def _request_id() -> str:
    return "req_" + secrets.token_hex(12)


def _json_response(status: int, body: dict[str, Any], request_id: str, **headers: str) -> Response:
    payload = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return Response(
        payload,
        status_code=status,
        media_type="application/json",
        headers={"request-id": request_id, **headers},
    )


def _error_response(
    status: int,
    error_type: str,
    message: str,
    request_id: str,
    extra: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    error = {"type": error_type, "message": message, **(extra or {})}
    body = {"type": "error", "error": error, "request_id": request_id}
    return _json_response(status, body, request_id, **(headers or {}))


def _query_choice(request: Request, name: str, choices: tuple[str, ...], default: str) -> str:
    value = request.query_params.get(name)
    if value is None or value == "":
        return default
    if value not in choices:
        raise InvalidRequest(f"{name} must be one of {', '.join(choices)}, not {value!r}")
    return value


def _query_bool(request: Request, name: str) -> bool:
    value = request.query_params.get(name)
    if value is None or value == "":
        return False
    if value.lower() in ("true", "1"):
        return True
    if value.lower() in ("false", "0"):
        return False
    raise InvalidRequest(f"{name} must be true or false, not {value!r}")


def _full(request: Request, default: str) -> bool:
    return _query_choice(request, "view", ("basic", "full"), default) == "full"


class MemoryStoreApp:
    """The HTTP side: routes, headers, credentials and the error envelope."""

    def __init__(self, db: Database, tokens: Mapping[str, Grant | frozenset[str] | None]) -> None:
        """`tokens` maps each accepted token to its `Grant`; a bare store set
        or None stands for `Grant(stores)`, as before grants had users."""
        self.db = db
        self.tokens = {
            token: grant if isinstance(grant, Grant) else Grant(grant)
            for token, grant in tokens.items()
        }
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

    async def __call__(self, scope, receive, send) -> None:
        await self.app(scope, receive, send)

    # -- the envelope ----------------------------------------------------

    async def _http_exception(self, request: Request, exc: HTTPException) -> Response:
        rid = _request_id()
        if exc.status_code == 404:
            return _error_response(
                404, "not_found_error", f"no route for {request.method} {request.url.path}", rid
            )
        if exc.status_code == 405:
            headers = dict(exc.headers or {})
            return _error_response(
                405,
                "invalid_request_error",
                f"{request.method} is not allowed on {request.url.path}",
                rid,
                headers=headers,
            )
        return _error_response(exc.status_code, "invalid_request_error", str(exc.detail), rid)

    async def _crash(self, request: Request, exc: Exception) -> Response:
        log.error("internal error on %s %s", request.method, request.url.path, exc_info=exc)
        return _error_response(500, "api_error", "internal server error", _request_id())

    def _endpoint(self, handler: Callable[[Request, Caller], Awaitable[dict[str, Any]]]):
        async def endpoint(request: Request) -> Response:
            rid = _request_id()
            try:
                caller = self._authenticate(request)
                _check_headers(request)
                body = await handler(request, caller)
            except StatusError as e:
                return _error_response(e.status, e.error_type, e.message, rid, e.extra)
            except Exception:
                log.exception("internal error on %s %s", request.method, request.url.path)
                return _error_response(500, "api_error", "internal server error", rid)
            return _json_response(200, body, rid)

        return endpoint

    def _authenticate(self, request: Request) -> Caller:
        headers = request.headers
        token, scheme = None, "api_key"
        authorization = headers.get("authorization")
        if authorization:
            kind, _, value = authorization.partition(" ")
            if kind.lower() == "bearer" and value.strip():
                token, scheme = value.strip(), "bearer"
        if token is None:
            token = headers.get("x-api-key")
        if not token:
            raise AuthenticationFailed(
                "no credentials: send Authorization: Bearer <token> or x-api-key: <token>"
            )
        grant = self.tokens.get(token)
        if grant is None:
            raise AuthenticationFailed("invalid credentials: this token is not accepted")
        return Caller(actor_for(token, scheme, grant.user), grant.stores)

    # -- stores --------------------------------------------------------------

    async def create_store(self, request: Request, caller: Caller) -> dict[str, Any]:
        if caller.allowed is not None:
            raise PermissionDenied(
                "these credentials are limited to some stores and cannot create one"
            )
        return self.db.create_store(await _json_body(request))

    async def list_stores(self, request: Request, caller: Caller) -> dict[str, Any]:
        q = request.query_params
        return self.db.list_stores(
            limit=q.get("limit"),
            page=q.get("page") or None,
            include_archived=_query_bool(request, "include_archived"),
            created_gte=q.get("created_at[gte]") or None,
            created_lte=q.get("created_at[lte]") or None,
            only=caller.allowed,
        )

    async def get_store(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid = request.path_params["sid"]
        caller.check_store(sid)
        return self.db.get_store(sid)

    async def update_store(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid = request.path_params["sid"]
        caller.check_store(sid)
        return self.db.update_store(sid, await _json_body(request))

    async def archive_store(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid = request.path_params["sid"]
        caller.check_store(sid)
        await _json_body(request)
        return self.db.archive_store(sid)

    async def delete_store(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid = request.path_params["sid"]
        caller.check_store(sid)
        return self.db.delete_store(sid)

    # -- memories -----------------------------------------------------------

    async def create_memory(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid = request.path_params["sid"]
        caller.check_store(sid)
        full = _full(request, "basic")
        return self.db.create_memory(sid, await _json_body(request), caller.actor, full)

    async def list_memories(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid = request.path_params["sid"]
        caller.check_store(sid)
        q = request.query_params
        prefix = q.get("path_prefix") or "/"
        try:
            prefix = normalize_prefix(prefix)
        except InvalidPath as e:
            raise InvalidRequest(str(e))
        depth = int(_query_choice(request, "depth", ("0", "1"), "0"))
        return self.db.list_memories(
            sid,
            prefix=prefix,
            depth=depth,
            full=_full(request, "basic"),
            limit=q.get("limit"),
            page=q.get("page") or None,
        )

    async def get_memory(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid = request.path_params["sid"]
        caller.check_store(sid)
        return self.db.get_memory(sid, request.path_params["mid"], _full(request, "full"))

    async def update_memory(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid = request.path_params["sid"]
        caller.check_store(sid)
        full = _full(request, "basic")
        body = await _json_body(request)
        return self.db.update_memory(sid, request.path_params["mid"], body, caller.actor, full)

    async def delete_memory(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid = request.path_params["sid"]
        caller.check_store(sid)
        expected = request.query_params.get("expected_content_sha256") or None
        return self.db.delete_memory(sid, request.path_params["mid"], expected, caller.actor)

    # -- versions -----------------------------------------------------------

    async def list_versions(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid = request.path_params["sid"]
        caller.check_store(sid)
        q = request.query_params
        return self.db.list_versions(
            sid,
            memory_id=q.get("memory_id") or None,
            operation=q.get("operation") or None,
            created_gte=q.get("created_at[gte]") or None,
            created_lte=q.get("created_at[lte]") or None,
            session_id=q.get("session_id") or None,
            api_key_id=q.get("api_key_id") or None,
            full=_full(request, "basic"),
            limit=q.get("limit"),
            page=q.get("page") or None,
        )

    async def get_version(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid = request.path_params["sid"]
        caller.check_store(sid)
        return self.db.get_version(sid, request.path_params["vid"], _full(request, "full"))

    async def redact_version(self, request: Request, caller: Caller) -> dict[str, Any]:
        sid = request.path_params["sid"]
        caller.check_store(sid)
        await _json_body(request)
        return self.db.redact_version(sid, request.path_params["vid"], caller.actor)


def _check_headers(request: Request) -> None:
    """`anthropic-version` must be 2023-06-01 when sent (a missing one is
    tolerated); `anthropic-beta` must name exactly one of the two betas."""
    headers = request.headers
    version = headers.get("anthropic-version")
    if version is not None and version.strip() != ANTHROPIC_VERSION:
        raise InvalidRequest(f"anthropic-version must be {ANTHROPIC_VERSION}, not {version!r}")
    betas = {
        item.strip()
        for value in headers.getlist("anthropic-beta")
        for item in value.split(",")
        if item.strip()
    }
    if BETA in betas and OLD_BETA in betas:
        raise InvalidRequest(f"send one anthropic-beta of {BETA} or {OLD_BETA}, not both")
    if BETA not in betas and OLD_BETA not in betas:
        raise InvalidRequest(f"the Memory Store API needs the header anthropic-beta: {BETA}")


async def _json_body(request: Request) -> dict[str, Any]:
    """The request's JSON object; `{}` for an empty body; 400 or 413 otherwise."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise RequestTooLarge(f"the request body is larger than {MAX_BODY_BYTES} bytes")
    raw = await request.body()
    if len(raw) > MAX_BODY_BYTES:
        raise RequestTooLarge(f"the request body is larger than {MAX_BODY_BYTES} bytes")
    if not raw.strip():
        return {}
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidRequest("the request body is not valid UTF-8")
    try:
        body = json.loads(text)
    except RecursionError:
        raise InvalidRequest("the request body is nested too deeply to be a request")
    except ValueError as e:
        raise InvalidRequest(f"the request body is not valid JSON: {e}")
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object")
    # The text is strict UTF-8, so only a \uD800-\uDFFF escape can make a lone surrogate.
    if _SURROGATE_ESCAPE.search(text):
        field = _field_with_lone_surrogate(body)
        if field is not None:
            raise InvalidRequest(f"{field} must be valid UTF-8 (it holds a lone surrogate)")
    return body


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _field_with_lone_surrogate(body: dict[str, Any]) -> str | None:
    """The top-level field whose value (or a key or string within it) holds a
    lone surrogate, which UTF-8 cannot encode; None when there is none. Walks
    without recursion: the body may be nested as deep as the parser allows."""
    for field, value in body.items():
        if LONE_SURROGATE.search(field):
            return "a field name"
        stack = [value]
        while stack:
            item = stack.pop()
            if isinstance(item, str):
                if LONE_SURROGATE.search(item):
                    return field
            elif isinstance(item, dict):
                stack.extend(item.keys())
                stack.extend(item.values())
            elif isinstance(item, list):
                stack.extend(item)
    return None


DEMO_MEMORIES = {
    "/README.md": (
        "# memfs demo store\n\n"
        "This store lives in a local `memfs serve`. Mount it with `memfs mount` and\n"
        "every memory shows up as an ordinary file; edit it with any tool and the\n"
        "change syncs back to the store within one sync interval (or at once with\n"
        "`memfs sync`).\n"
    ),
    "/notes/welcome.md": "Welcome! Folders are just path prefixes: this file is /notes/welcome.md.\n",
}


def ensure_demo_store(db: Database, name: str) -> str:
    """The id of the first live store called `name`, created and seeded when missing."""
    page: str | None = None
    while True:
        listing = db.list_stores(limit=100, page=page)
        for store in listing["data"]:
            if store["name"] == name:
                return store["id"]
        page = listing["next_page"]
        if not page:
            break
    store = db.create_store({"name": name, "description": "memfs demo store"})
    actor = {"type": "api_actor", "api_key_id": "apikey_memfs_demo"}
    for path, content in DEMO_MEMORIES.items():
        db.create_memory(store["id"], {"path": path, "content": content}, actor, False)
    return store["id"]


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {e.strerror or e}")
    return sock


def _url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def serve(
    *,
    db_path: str,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    tokens: Mapping[str, Grant | frozenset[str] | None],
    max_memories: int = MAX_MEMORIES,
    demo_store: str | None = None,
    access_log: bool = False,
) -> None:
    """Run the server until SIGTERM or SIGINT; the first stdout line is its URL."""
    if not tokens:
        raise ConfigError("no token to accept")
    try:
        db = Database(db_path, max_memories=max_memories)
    except (OSError, sqlite3.Error) as e:
        raise ConfigError(f"cannot open the database {db_path}: {e}")
    try:
        if demo_store:
            sid = ensure_demo_store(db, demo_store)
            sys.stderr.write(f"memfs serve: demo store {demo_store}: {sid}\n")
            sys.stderr.flush()
        sock = _bind(host, port)
        url = _url(sock)
        config = Config()
        config.bind = [f"fd://{sock.detach()}"]
        config.loglevel = "WARNING"
        config.accesslog = logging.getLogger("memfs.serve.access") if access_log else None
        config.keep_alive_max_requests = 1_000_000
        config.graceful_timeout = 2.0
        app = MemoryStoreApp(db, tokens)
        trio.run(partial(_run, app, config, url, db_path))
    finally:
        db.close()


async def _run(app: MemoryStoreApp, config: Config, url: str, db_path: str) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:

        async def until_signal() -> None:
            async for signum in signals:
                sys.stderr.write(f"memfs serve: {signal.Signals(signum).name}, shutting down\n")
                sys.stderr.flush()
                return

        async with trio.open_nursery() as nursery:
            await nursery.start(
                partial(hypercorn_serve, app, config, shutdown_trigger=until_signal)
            )
            sys.stdout.write(url + "\n")
            sys.stdout.flush()
            sys.stderr.write(f"memfs serve: listening on {url} (database {db_path})\n")
            sys.stderr.flush()
