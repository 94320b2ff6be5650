"""Running `memfs serve`: the database opened, the socket bound, the app
served over HTTP/1.1 (`_connections`, on Hypercorn) until SIGTERM or SIGINT.

The first line on stdout is the URL the server listens on, printed once it
accepts connections, so a caller that reads one line knows it may connect.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sqlite3
import sys
from collections.abc import Mapping
from functools import partial

import trio

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
from ._connections import HTTPServer
from ._db import Database

DEFAULT_HOST = SERVE_DEFAULT_HOST
DEFAULT_PORT = SERVE_DEFAULT_PORT
TOKEN_ENV = SERVE_TOKEN_ENV


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
    (`_connections.HTTPServer`)."""
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
        server = HTTPServer(
            MemoryStoreApp(db, tokens),
            access_log=logging.getLogger("memfs.serve.access") if access_log else None,
            keep_alive_timeout=5.0,
            graceful_timeout=2.0,
            max_connections=max_connections,
            client_timeout=client_timeout,
        )
        trio.run(partial(_run, server, sock, url, db_path))
    finally:
        db.close()


async def _run(server: HTTPServer, sock: socket.socket, url: str, db_path: str) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:

        async def until_signal() -> None:
            async for signum in signals:
                sys.stderr.write(f"memfs serve: {signal.Signals(signum).name}, shutting down\n")
                sys.stderr.flush()
                return

        async with trio.open_nursery() as nursery:
            await nursery.start(server.serve, sock, until_signal)
            sys.stdout.write(url + "\n")
            sys.stdout.flush()
            sys.stderr.write(f"memfs serve: listening on {url} (database {db_path})\n")
            sys.stderr.flush()
