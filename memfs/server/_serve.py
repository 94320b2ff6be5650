"""Running `memfs serve`: the database opened, the socket bound, the app
served over HTTP/1.1 (uvicorn, with `_connections`' limits) until SIGTERM or
SIGINT.

The first line on stdout is the URL the server listens on, printed once it
accepts connections, so a caller that reads one line knows it may connect.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sqlite3
import sys
from collections.abc import Mapping
from types import FrameType

import uvicorn

from .._exceptions import ConfigError
from ..api import (
    MAX_MEMORIES,
    SERVE_DEFAULT_HOST,
    SERVE_DEFAULT_PORT,
    SERVE_TOKEN_ENV,
    ActorType,
)
from ._app import MemoryStoreApp
from ._auth import Grant
from ._connections import ClientLimits, ConnectionWatch
from ._db import Database

DEFAULT_HOST = SERVE_DEFAULT_HOST
DEFAULT_PORT = SERVE_DEFAULT_PORT
TOKEN_ENV = SERVE_TOKEN_ENV
BACKLOG = 100
KEEP_ALIVE_TIMEOUT = 5
HEAD_TIMEOUT = 5.0
GRACEFUL_TIMEOUT = 2


def default_db_path() -> str:
    """`$XDG_DATA_HOME/memfs/memfs.sqlite3`, XDG_DATA_HOME defaulting to ~/.local/share."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "share"
    )
    return os.path.join(base, "memfs", "memfs.sqlite3")


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
        listing = db.stores.list(limit=100, page=page)
        for store in listing["data"]:
            if store["name"] == name:
                return str(store["id"])
        page = listing["next_page"]
        if not page:
            break
    store = db.stores.create({"name": name, "description": "memfs demo store"})
    actor = {"type": ActorType.API.value, "api_key_id": "apikey_memfs_demo"}
    for path, content in DEMO_MEMORIES.items():
        db.memories.create(store["id"], {"path": path, "content": content}, actor, False)
    return str(store["id"])


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
    max_connections: int = 512,
    client_timeout: float = 10.0,
) -> None:
    """Run the server until SIGTERM or SIGINT; the first stdout line is its URL.
    `max_connections` and `client_timeout` bound what clients may hold
    (`_connections`)."""
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
        watch = ConnectionWatch(sock, head_timeout=HEAD_TIMEOUT, client_timeout=client_timeout)
        app = ClientLimits(
            MemoryStoreApp(db, tokens),
            watch,
            access_log=logging.getLogger("memfs.serve.access") if access_log else None,
        )
        config = uvicorn.Config(
            app,
            loop="uvloop",
            http="httptools",
            lifespan="off",
            access_log=False,
            log_config=None,
            server_header=False,
            proxy_headers=False,
            # uvicorn counts the connection asking too: N open are served, one more is not.
            limit_concurrency=max_connections + 1,
            backlog=BACKLOG,
            timeout_keep_alive=KEEP_ALIVE_TIMEOUT,
            timeout_graceful_shutdown=GRACEFUL_TIMEOUT,
        )
        # uvicorn's own log lines (start, stop, refusals) are not memfs's:
        # what a user needs of them is in its answers.
        logging.getLogger("uvicorn.error").setLevel(logging.CRITICAL)
        _run(_Server(config), sock, watch, db_path)
    finally:
        db.close()


class _Server(uvicorn.Server):
    """uvicorn's server, saying which signal stops it."""

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if not self.should_exit:
            sys.stderr.write(f"memfs serve: {signal.Signals(sig).name}, shutting down\n")
            sys.stderr.flush()
        super().handle_exit(sig, frame)


def _run(server: _Server, sock: socket.socket, watch: ConnectionWatch, db_path: str) -> None:
    """Serve on `sock` until a signal; the URL is printed once uvicorn accepts."""
    url = _url(sock)

    async def main() -> None:
        serving = asyncio.create_task(server.serve(sockets=[sock]))
        sweeping = asyncio.create_task(watch.run())
        while not server.started and not serving.done():
            await asyncio.sleep(0.01)
        if server.started:
            sys.stdout.write(url + "\n")
            sys.stdout.flush()
            sys.stderr.write(f"memfs serve: listening on {url} (database {db_path})\n")
            sys.stderr.flush()
        try:
            await serving
        finally:
            sweeping.cancel()

    # uvicorn re-sends the signal that stopped it once it is done, to the
    # handler found before it started: this one, which lets serve return.
    previous = {sig: signal.signal(sig, _ignore) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        with asyncio.Runner(loop_factory=server.config.get_loop_factory()) as runner:
            runner.run(main())
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _ignore(sig: int, frame: FrameType | None) -> None:
    pass
