"""`memfs serve`: run the Memory Store API locally on SQLite.

The first line on stdout is the URL the server listens on; everything else
(log lines, a generated token, the demo store's id) goes to stderr.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys

from .._exceptions import ConfigError
from ..api import MAX_MEMORIES


def setup(p: argparse.ArgumentParser) -> None:
    from ..api import SERVE_DEFAULT_HOST as DEFAULT_HOST
    from ..api import SERVE_DEFAULT_PORT as DEFAULT_PORT
    from ..api import SERVE_TOKEN_ENV as TOKEN_ENV

    p.add_argument(
        "--db",
        metavar="PATH",
        help="SQLite file holding every store (default $XDG_DATA_HOME/memfs/memfs.sqlite3)",
    )
    p.add_argument(
        "--host", default=DEFAULT_HOST, help=f"address to listen on (default {DEFAULT_HOST})"
    )
    p.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"port to listen on; 0 picks a free one (default {DEFAULT_PORT})",
    )
    p.add_argument(
        "--max-memories",
        type=int,
        default=MAX_MEMORIES,
        metavar="N",
        help=f"memories a store may hold (default {MAX_MEMORIES})",
    )
    p.add_argument(
        "--token",
        action="append",
        default=[],
        metavar="TOKEN",
        help=(
            "accept this token as x-api-key or Bearer; repeatable; TOKEN@STORE_ID[,STORE_ID...] "
            f"limits it to those stores. Also read from {TOKEN_ENV} (comma-separated). "
            "With neither, a random token is generated and printed on stderr"
        ),
    )
    p.add_argument(
        "--demo-store",
        metavar="NAME",
        help="make sure a store called NAME exists (seeded with a few memories) and print its id on stderr",
    )
    p.add_argument("--access-log", action="store_true", help="log every request on stderr")


def run(args: argparse.Namespace) -> int:
    from ..server import TOKEN_ENV, Grant, default_db_path, parse_tokens, serve

    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port must be from 0 to 65535, not {args.port}")
    if args.max_memories < 1:
        raise ConfigError(f"--max-memories must be at least 1, not {args.max_memories}")
    entries = list(args.token)
    env = os.environ.get(TOKEN_ENV)
    if env:
        entries.append(env)
    tokens = parse_tokens(entries)
    if not tokens:
        generated = secrets.token_urlsafe(24)
        tokens = {generated: Grant()}
        sys.stderr.write(
            f"memfs serve: no --token or {TOKEN_ENV} given; generated token: {generated}\n"
        )
        sys.stderr.flush()
    if args.access_log:
        import logging

        logging.getLogger("memfs.serve.access").setLevel(logging.INFO)
    serve(
        db_path=args.db or default_db_path(),
        host=args.host,
        port=args.port,
        tokens=tokens,
        max_memories=args.max_memories,
        demo_store=args.demo_store,
        access_log=args.access_log,
    )
    return 0
