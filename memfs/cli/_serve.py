"""`memfs serve`: the Memory Store API locally on SQLite (docs/serve.md). `--token` shows in `ps`,
so it is taken only with a loopback `--host`, with a warning, and serve executes itself again with
those tokens moved into its environment."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import resource
import secrets
import sys
from typing import TYPE_CHECKING

from .._exceptions import ConfigError
from ..api import MAX_MEMORIES, SERVE_DEFAULT_HOST, SERVE_DEFAULT_PORT, SERVE_TOKEN_ENV
from ..supervisor import read_secret_file

if TYPE_CHECKING:
    from ._config import Settings

DEFAULT_MAX_CONNECTIONS = 512
DEFAULT_CLIENT_TIMEOUT = 10.0
FD_RESERVE = 64
"""Descriptors kept for the database, the listener and the log."""


def setup(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--db",
        metavar="PATH",
        help="SQLite file holding every store (default $XDG_DATA_HOME/memfs/memfs.sqlite3)",
    )
    p.add_argument(
        "--host",
        default=SERVE_DEFAULT_HOST,
        help=f"address to listen on (default {SERVE_DEFAULT_HOST})",
    )
    p.add_argument(
        "--port",
        type=int,
        default=SERVE_DEFAULT_PORT,
        help=f"port to listen on; 0 picks a free one (default {SERVE_DEFAULT_PORT})",
    )
    p.add_argument(
        "--max-memories",
        type=int,
        default=MAX_MEMORIES,
        metavar="N",
        help=f"memories a store may hold (default {MAX_MEMORIES})",
    )
    p.add_argument(
        "--token-file",
        action="append",
        default=[],
        metavar="FILE",
        help="accept the tokens this file holds, one per line (or comma-separated), as x-api-key "
        "or Bearer; repeatable; TOKEN@STORE_ID[,STORE_ID...] limits one to those stores; "
        f"blank lines and lines starting with # are skipped. Also read from {SERVE_TOKEN_ENV} "
        "(comma-separated). With neither, a random token is generated and printed on stderr",
    )
    p.add_argument(
        "--token",
        action="append",
        default=[],
        metavar="TOKEN",
        help="accept this token (as --token-file's lines); every local user can read it in ps "
        "until serve moves it into its environment, so it is taken only with a loopback "
        "--host, with a warning",
    )
    p.add_argument(
        "--max-connections",
        type=int,
        default=DEFAULT_MAX_CONNECTIONS,
        metavar="N",
        help="connections open at once; one more is answered 503 and closed "
        f"(default {DEFAULT_MAX_CONNECTIONS}, lowered to fit the descriptor limit)",
    )
    p.add_argument(
        "--client-timeout",
        type=float,
        default=DEFAULT_CLIENT_TIMEOUT,
        metavar="SECONDS",
        help="drop a client that stops reading its answer, or sending its request body, this long "
        f"(default {DEFAULT_CLIENT_TIMEOUT:g})",
    )
    p.add_argument(
        "--demo-store",
        metavar="NAME",
        help="make sure a store called NAME exists (seeded with a few memories) and print its id on stderr",
    )
    p.add_argument("--access-log", action="store_true", help="log every request on stderr")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _without_token_flags(argv: list[str]) -> list[str]:
    """`argv` less its `--token VALUE` and `--token=VALUE`."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--token":
            skip = True
        elif not arg.startswith("--token="):
            kept.append(arg)
    return kept


def _reexec_with_tokens_in_environment(tokens: list[str]) -> None:
    """Replace this process (same PID) by the same command without its
    `--token` flags, their values put before `MEMFS_SERVE_TOKEN`'s, so that no
    token stays in /proc/PID/cmdline; unless they are not on the command line."""
    argv = sys.argv[1:]
    kept = _without_token_flags(argv)
    if kept == argv or sys.orig_argv[len(sys.orig_argv) - len(argv) :] != argv:
        return
    interpreter_args = sys.orig_argv[1 : len(sys.orig_argv) - len(argv)]
    env = dict(os.environ)
    given = env.get(SERVE_TOKEN_ENV)
    env[SERVE_TOKEN_ENV] = ",".join([*tokens, given] if given else tokens)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *interpreter_args, *kept], env)


def _connection_cap(asked: int) -> int:
    """`--max-connections`, lowered so that they cannot use up the descriptors."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return asked
    return max(1, min(asked, soft - FD_RESERVE))


def run(args: argparse.Namespace, settings: Settings) -> int:
    from ..server import Grant, default_db_path, parse_tokens, serve

    for flag, given in (("--host", args.host), ("--db", args.db)):
        if given is not None and not given.strip():
            raise ConfigError(f"{flag} is empty: give it a value, or leave it out for its default")
    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port must be from 0 to 65535, not {args.port}")
    if args.max_memories < 1:
        raise ConfigError(f"--max-memories must be at least 1, not {args.max_memories}")
    if args.max_connections < 1:
        raise ConfigError(f"--max-connections must be at least 1, not {args.max_connections}")
    if not 0 < args.client_timeout <= 3600:
        raise ConfigError(
            f"--client-timeout must be more than 0 and at most 3600 seconds, not {args.client_timeout:g}"
        )
    entries: list[str] = []
    for path in args.token_file:
        lines = [line.strip() for line in read_secret_file(path, "token").splitlines()]
        found = [line for line in lines if line and not line.startswith("#")]
        if not found:
            raise ConfigError(f"the token file {path} holds no token")
        entries += found
    if args.token and not parse_tokens(args.token):
        raise ConfigError("--token gives no token, only blanks or commas")
    if args.token:
        if not _is_loopback(args.host):
            raise ConfigError(
                f"--token is refused with --host {args.host}: every local user can read it in ps;"
                f" give --token-file FILE or set {SERVE_TOKEN_ENV}"
            )
        sys.stderr.write(
            "memfs serve: warning: --token shows the token to every local user (ps,"
            f" /proc/PID/cmdline); give --token-file FILE or set {SERVE_TOKEN_ENV} instead\n"
        )
        sys.stderr.flush()
        _reexec_with_tokens_in_environment(args.token)
        entries += args.token
    env = os.environ.get(SERVE_TOKEN_ENV)
    if env:
        entries.append(env)
    tokens = parse_tokens(entries)
    if entries and not tokens:
        raise ConfigError(f"{SERVE_TOKEN_ENV} gives no token, only blanks or commas")
    if not tokens:
        generated = secrets.token_urlsafe(24)
        tokens = {generated: Grant()}
        sys.stderr.write(
            f"memfs serve: no --token-file or {SERVE_TOKEN_ENV} given; generated token: {generated}\n"
        )
        sys.stderr.flush()
    if args.access_log:
        logging.getLogger("memfs.serve.access").setLevel(logging.INFO)
    serve(
        db_path=args.db or default_db_path(),
        host=args.host,
        port=args.port,
        tokens=tokens,
        max_memories=args.max_memories,
        demo_store=args.demo_store,
        access_log=args.access_log,
        max_connections=_connection_cap(args.max_connections),
        client_timeout=args.client_timeout,
    )
    return 0
