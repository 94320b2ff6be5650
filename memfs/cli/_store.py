"""`memfs store`: a small client of any Memory Store API, for people and demos.

    memfs store create NAME [--description D]     prints the new store's id
    memfs store list                              id, name, created
    memfs store ls STORE_ID [PREFIX]              path, size
    memfs store put STORE_ID PATH [FILE|-]        create or update (stdin by default)
    memfs store cat STORE_ID PATH                 the content, byte for byte
    memfs store rm STORE_ID PATH
    memfs store log STORE_ID [PATH]               time, operation, path, sha prefix

The API URL and the token come from the same places as `memfs mount`'s
(`memfs.supervisor.resolve_credentials`): `--api-url`, `MEMFS_API_URL` or
`ANTHROPIC_BASE_URL` (default the local `memfs serve`); `--token-file FILE`,
`MEMFS_TOKEN`, `ANTHROPIC_API_KEY` (sent as x-api-key) or
`ANTHROPIC_AUTH_TOKEN`, never a flag, so `ps` cannot show it. A token that
starts with `sk-ant-api` travels as x-api-key unless `--auth` says otherwise.
Output is tab-separated lines, or JSON with `--json`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from ..api import MAX_CONTENT_BYTES, Memory, normalize_path, normalize_prefix
from ._main import SecretOnCommandLine

if TYPE_CHECKING:
    from ..client import StoreClient
from .._exceptions import (
    AuthenticationFailed,
    ConfigError,
    NotFound,
    PathConflict,
    PermissionDenied,
    StoreError,
)

DEFAULT_LOCAL_API_URL = "http://127.0.0.1:8377"
SHA_PREFIX = 12


def _add_connection_options(p: argparse.ArgumentParser, *, top: bool) -> None:
    """The same options on `memfs store` and on each of its subcommands, so
    they may stand before or after the subcommand's name."""
    default = None if top else argparse.SUPPRESS
    p.add_argument(
        "--token",
        action=SecretOnCommandLine,
        default=argparse.SUPPRESS,
        const="give --token-file FILE or set MEMFS_TOKEN",
    )
    p.add_argument(
        "--api-url",
        default=default,
        metavar="URL",
        help=f"the API's base URL (env MEMFS_API_URL or ANTHROPIC_BASE_URL, default {DEFAULT_LOCAL_API_URL})",
    )
    p.add_argument(
        "--token-file",
        default=default,
        metavar="FILE",
        help="file holding the token (else env MEMFS_TOKEN, ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN)",
    )
    p.add_argument(
        "--auth",
        default=default,
        choices=("bearer", "x-api-key"),
        help="header the token travels in (env MEMFS_AUTH; default x-api-key for sk-ant-api... keys, else bearer)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="print JSON instead of tab-separated lines",
    )


def setup(p: argparse.ArgumentParser) -> None:
    _add_connection_options(p, top=True)
    sub = p.add_subparsers(dest="store_command", metavar="ACTION", parser_class=type(p))
    sub.required = True

    def action(name: str, help_text: str) -> argparse.ArgumentParser:
        a = sub.add_parser(name, help=help_text, description=help_text)
        _add_connection_options(a, top=False)
        return a

    a = action("create", "create a store and print its id")
    a.add_argument("name")
    a.add_argument("--description", default=None)

    action("list", "list stores: id, name, created")

    a = action("ls", "list a store's memories: path, size")
    a.add_argument("store_id", metavar="STORE_ID")
    a.add_argument("prefix", nargs="?", default=None, metavar="PREFIX")

    a = action("put", "create or update a memory from FILE, or stdin with '-' or no FILE")
    a.add_argument("store_id", metavar="STORE_ID")
    a.add_argument("path", metavar="PATH")
    a.add_argument("file", nargs="?", default="-", metavar="FILE")

    a = action("cat", "print a memory's content")
    a.add_argument("store_id", metavar="STORE_ID")
    a.add_argument("path", metavar="PATH")

    a = action("rm", "delete a memory")
    a.add_argument("store_id", metavar="STORE_ID")
    a.add_argument("path", metavar="PATH")

    a = action("log", "list versions, newest first: time, operation, path, sha")
    a.add_argument("store_id", metavar="STORE_ID")
    a.add_argument("path", nargs="?", default=None, metavar="PATH")


def _client(args: argparse.Namespace) -> StoreClient:
    from ..client import StoreClient
    from ..supervisor import resolve_credentials

    creds = resolve_credentials(
        api_url=args.api_url,
        token_file=args.token_file or os.environ.get("MEMFS_TOKEN_FILE"),
        default_url=DEFAULT_LOCAL_API_URL,
    )
    if creds is None:
        raise ConfigError("no token: pass --token-file FILE or set MEMFS_TOKEN")
    auth: str = args.auth or os.environ.get("MEMFS_AUTH") or creds.auth
    if auth == "bearer":
        return StoreClient(creds.api_url, creds.token, auth="bearer", timeout=30.0, max_retries=3)
    if auth == "x-api-key":
        return StoreClient(
            creds.api_url, creds.token, auth="x-api-key", timeout=30.0, max_retries=3
        )
    raise ConfigError(f"MEMFS_AUTH is {auth!r}: use bearer or x-api-key")


def _read_content(file: str) -> str:
    try:
        if file == "-":
            data = sys.stdin.buffer.read()
            name = "standard input"
        else:
            with open(file, "rb") as f:
                data = f.read()
            name = file
    except OSError as e:
        raise ConfigError(f"cannot read {file}: {e.strerror or e}")
    if len(data) > MAX_CONTENT_BYTES:
        raise ConfigError(
            f"{name} is {len(data):,} bytes; a memory holds at most {MAX_CONTENT_BYTES:,}"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{name} is not UTF-8 text; a memory holds only UTF-8 text")


def _out(line: str) -> None:
    sys.stdout.write(line + "\n")


def _out_json(obj: Any) -> None:
    def plain(x: Any) -> Any:
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            return dataclasses.asdict(x)
        return x

    if isinstance(obj, list):
        obj = [plain(x) for x in obj]
    else:
        obj = plain(obj)
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, indent=2) + "\n")


async def _find(client: StoreClient, store_id: str, path: str) -> Memory:
    found = await client.find_memory_by_path(store_id, path)
    if found is None:
        raise StoreError(f"no memory at {path} in store {store_id}")
    return found


async def _create(client: StoreClient, args: argparse.Namespace) -> None:
    store = await client.create_store(args.name, description=args.description)
    _out_json(store) if args.json else _out(store.id)


async def _list(client: StoreClient, args: argparse.Namespace) -> None:
    stores = [s async for s in client.iter_stores()]
    if args.json:
        _out_json(stores)
        return
    for s in stores:
        _out(f"{s.id}\t{s.name}\t{s.created_at}")


async def _ls(client: StoreClient, args: argparse.Namespace) -> None:
    prefix = None
    if args.prefix:
        raw = args.prefix if args.prefix.startswith("/") else "/" + args.prefix
        prefix = normalize_prefix(raw if raw.endswith("/") else raw + "/")
    memories = [m async for m in client.iter_memories(args.store_id, path_prefix=prefix)]
    if args.json:
        _out_json(memories)
        return
    for m in memories:
        if isinstance(m, Memory):
            _out(f"{m.path}\t{m.content_size_bytes}")


async def _put(client: StoreClient, args: argparse.Namespace) -> None:
    path = normalize_path(args.path)
    content = _read_content(args.file)
    existing = await client.find_memory_by_path(args.store_id, path)
    action = "updated"
    if existing is None:
        try:
            memory = await client.create_memory(args.store_id, path, content, view="basic")
            action = "created"
        except PathConflict as e:
            if e.conflicting_path != path or not e.conflicting_memory_id:
                raise StoreError(
                    f"cannot create {path}: {e.conflicting_path} already exists"
                    " and one memory's path may not be a folder of another's"
                )
            memory = await client.update_memory(
                args.store_id, e.conflicting_memory_id, content=content, view="basic"
            )
    else:
        memory = await client.update_memory(
            args.store_id,
            existing.id,
            content=content,
            precondition_sha256=existing.content_sha256,
            view="basic",
        )
        if memory.memory_version_id == existing.memory_version_id:
            action = "unchanged"
    if args.json:
        _out_json({"action": action, "memory": dataclasses.asdict(memory)})
    else:
        _out(f"{action}\t{memory.path}\t{memory.id}")


async def _cat(client: StoreClient, args: argparse.Namespace) -> None:
    found = await _find(client, args.store_id, args.path)
    memory = await client.get_memory(args.store_id, found.id, view="full")
    if args.json:
        _out_json(memory)
        return
    sys.stdout.write(memory.content or "")
    sys.stdout.flush()


async def _rm(client: StoreClient, args: argparse.Namespace) -> None:
    found = await _find(client, args.store_id, args.path)
    await client.delete_memory(
        args.store_id, found.id, expected_content_sha256=found.content_sha256
    )
    if args.json:
        _out_json({"deleted": found.id, "path": found.path})
    else:
        _out(f"deleted\t{found.path}\t{found.id}")


async def _log(client: StoreClient, args: argparse.Namespace) -> None:
    memory_id = None
    path = None
    if args.path:
        path = normalize_path(args.path)
        found = await client.find_memory_by_path(args.store_id, path)
        memory_id = found.id if found else None
    versions = []
    async for v in client.iter_versions(args.store_id, memory_id=memory_id):
        if path is not None and memory_id is None and v.path != path:
            continue
        versions.append(v)
    if args.json:
        _out_json(versions)
        return
    for v in versions:
        shown_path = v.path if v.path is not None else "(redacted)"
        sha = (v.content_sha256 or "-")[:SHA_PREFIX]
        _out(f"{v.created_at}\t{v.operation}\t{shown_path}\t{sha}")


_ACTIONS = {
    "create": _create,
    "list": _list,
    "ls": _ls,
    "put": _put,
    "cat": _cat,
    "rm": _rm,
    "log": _log,
}


async def _main(args: argparse.Namespace) -> None:
    client = _client(args)
    async with client:
        try:
            await _ACTIONS[args.store_command](client, args)
        except AuthenticationFailed:
            raise StoreError(f"the store at {client.base_url} refused the token (401)")
        except PermissionDenied:
            raise StoreError("the token may not touch this store (403)")
        except NotFound as e:
            raise StoreError(f"not found: {e.message}")


def run(args: argparse.Namespace) -> int:
    import trio

    trio.run(_main, args)
    return 0
