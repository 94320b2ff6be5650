"""Running `memfs serve` on uvicorn's public API (`uvicorn.Config`, `uvicorn.Server`) until SIGTERM
or SIGINT. The first line on stdout is the URL, printed once the server accepts connections."""

from __future__ import annotations

import asyncio
import contextlib
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
from ..api import MAX_MEMORIES, SERVE_DEFAULT_HOST, SERVE_DEFAULT_PORT, ActorType
from ._app import MemoryStoreApp
from ._auth import Grant
from ._connections import ClientLimits
from ._db import Database

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


def default_db_path() -> str:
    """`$XDG_DATA_HOME/memfs/memfs.sqlite3`, XDG_DATA_HOME defaulting to ~/.local/share."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")
    return os.path.join(base, "memfs", "memfs.sqlite3")


def _say(line: str) -> None:
    with contextlib.suppress(OSError):  # a closed pipe stops the saying, not the serving
        print(f"memfs serve: {line}", file=sys.stderr, flush=True)


def ensure_demo_store(db: Database, name: str) -> str:
    """The id of the first live store called `name`, created and seeded when missing."""
    row = db.file.one(
        "SELECT id FROM stores WHERE name = ? AND archived_at IS NULL"
        " ORDER BY created_at, seq LIMIT 1",
        (name,),
    )
    if row is not None:
        return str(row["id"])
    store_id = str(db.stores.create({"name": name, "description": "memfs demo store"})["id"])
    actor = {"type": ActorType.API.value, "api_key_id": "apikey_memfs_demo"}
    for path, content in DEMO_MEMORIES.items():
        db.memories.create(store_id, {"path": path, "content": content}, actor, False)
    return store_id


def _bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {e.strerror or e}")
    return sock


def serve(
    *,
    db_path: str,
    host: str = SERVE_DEFAULT_HOST,
    port: int = SERVE_DEFAULT_PORT,
    tokens: Mapping[str, Grant | frozenset[str] | None],
    max_memories: int = MAX_MEMORIES,
    demo_store: str | None = None,
    access_log: bool = False,
    max_connections: int = 512,
    client_timeout: float = 10.0,
) -> None:
    """Run the server until SIGTERM or SIGINT; the first stdout line is its URL."""
    if not tokens:
        raise ConfigError("no token to accept")
    try:
        db = Database(db_path, max_memories=max_memories)
    except (OSError, sqlite3.Error) as e:
        raise ConfigError(f"cannot open the database {db_path}: {getattr(e, 'strerror', 0) or e}")
    try:
        if demo_store:
            _say(f"demo store {demo_store}: {ensure_demo_store(db, demo_store)}")
        sock = _bind(host, port)
        app = ClientLimits(
            MemoryStoreApp(db, tokens),
            sock,
            client_timeout=client_timeout,
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
            backlog=100,
            timeout_keep_alive=5,
            timeout_graceful_shutdown=2,
        )
        # uvicorn's own log lines (start, stop, refusals) are not memfs's:
        # what a user needs of them is in its answers.
        logging.getLogger("uvicorn.error").setLevel(logging.CRITICAL)
        _run(_Server(config), sock, app, db_path)
    finally:
        db.close()


class _Server(uvicorn.Server):
    """uvicorn's server, saying which signal stops it."""

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if not self.should_exit:
            _say(f"{signal.Signals(sig).name}, shutting down")
        super().handle_exit(sig, frame)


def _run(server: _Server, sock: socket.socket, limits: ClientLimits, db_path: str) -> None:
    """Serve on `sock` until a signal; the URL is printed once uvicorn accepts."""
    host, port = sock.getsockname()[:2]
    url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    async def main() -> None:
        serving = asyncio.create_task(server.serve(sockets=[sock]))
        sweeping = asyncio.create_task(limits.run())
        while not server.started and not serving.done():
            await asyncio.sleep(0.01)
        if server.started:
            print(url, flush=True)
            _say(f"listening on {url} (database {db_path})")
        try:
            await serving
        finally:
            sweeping.cancel()

    # uvicorn re-sends the signal that stopped it once it is done, to the
    # handler found before it started: this one, which lets serve return.
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        with asyncio.Runner(loop_factory=server.config.get_loop_factory()) as runner:
            runner.run(main())
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
