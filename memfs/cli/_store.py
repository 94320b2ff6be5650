"""`memfs store`: a small client of any Memory Store API, for people and demos. URL and token
come from flags, `MEMFS_TOKEN_FILE` and the credential variables (not the config file), default
the local `memfs serve`; a token is never a flag's value. `session create` prints a work item as
a worker's poll hands it: the only place its sessions token appears."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import secrets
import sys
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, cast

from .._exceptions import (
    AuthenticationFailed,
    ConfigError,
    NotFound,
    PathConflict,
    PermissionDenied,
    StoreError,
)
from ..api import (
    MAX_CONTENT_BYTES,
    SERVE_DEFAULT_HOST,
    SERVE_DEFAULT_PORT,
    AuthHeader,
    Memory,
    MemoryVersion,
    SessionResource,
    encode_work_item_secret,
    normalize_path,
    normalize_prefix,
)
from ..supervisor import api_client, parse_store_arg, resolve_credentials
from ._options import SecretOnCommandLine

if TYPE_CHECKING:
    from ..client import StoreClient
    from ._config import Settings

DEFAULT_LOCAL_API_URL = f"http://{SERVE_DEFAULT_HOST}:{SERVE_DEFAULT_PORT}"
SHA_PREFIX = 12


def _add_connection_options(p: argparse.ArgumentParser, *, top: bool) -> None:
    """On `memfs store` and each action, so they may stand before or after its name."""
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
        help="file holding the token (else env MEMFS_TOKEN, a work item secret in MEMFS_WORK_ITEM_SECRET or ANTHROPIC_WORK_SECRET, ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN)",
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


Run = Callable[["StoreClient", argparse.Namespace], Awaitable[None]]


def _an_id(text: str) -> str:
    if not text or "/" in text or "?" in text:
        raise argparse.ArgumentTypeError(f"{text!r} is not an id of the API")
    return text


def _actions(p: argparse.ArgumentParser, dest: str) -> Callable[..., argparse.ArgumentParser]:
    """What adds an action to `p` (its name, help, run, positional arguments)
    and returns its parser; one action is required, named in `args.<dest>`."""
    sub = p.add_subparsers(dest=dest, metavar="ACTION", parser_class=type(p))
    sub.required = True

    def action(
        name: str, help_text: str, run: Run | None, *positionals: str
    ) -> argparse.ArgumentParser:
        a = sub.add_parser(name, help=help_text, description=help_text)
        _add_connection_options(a, top=False)
        for positional in positionals:
            kind = _an_id if positional.endswith("_id") else str
            a.add_argument(positional, metavar=positional.upper(), type=kind)
        a.set_defaults(store_action=run)
        return a

    return action


def setup(p: argparse.ArgumentParser) -> None:
    _add_connection_options(p, top=True)
    action = _actions(p, "store_command")

    a = action("create", "create a store and print its id", _create)
    a.add_argument("name")
    a.add_argument("--description", default=None)

    action("list", "list stores: id, name, created", _list)

    a = action("ls", "list a store's memories: path, size", _ls, "store_id")
    a.add_argument("prefix", nargs="?", default=None, metavar="PREFIX")

    put = "create or update a memory from FILE, or stdin with '-' or no FILE"
    a = action("put", put, _put, "store_id", "path")
    a.add_argument("file", nargs="?", default="-", metavar="FILE")

    action("cat", "print a memory's content", _cat, "store_id", "path")
    action("rm", "delete a memory", _rm, "store_id", "path")

    a = action("log", "list versions, newest first: time, operation, path, sha", _log, "store_id")
    a.add_argument("path", nargs="?", default=None, metavar="PATH")

    _setup_session(
        action("session", "sessions and their stores: create, show, attach, detach", None)
    )


def _setup_session(p: argparse.ArgumentParser) -> None:
    action = _actions(p, "session_command")

    a = action(
        "create",
        "create a session holding these stores and print its work item JSON",
        _session_create,
    )
    a.add_argument(
        "--store",
        action="append",
        default=[],
        metavar="ID[:read_only][=PATH]",
        help="a store of the session, read-write unless :read_only, mounted at PATH"
        " (default /mnt/memory/<slug of its name>); repeatable, at most 8",
    )
    a.add_argument(
        "--environment-id", default=None, metavar="ENV", help="the session's environment_id"
    )
    a.add_argument("--title", default=None, help="the session's title")

    show = "list a session's stores: resource id, store id, access, mount path"
    action("show", show, _session_show, "session_id")

    a = action("attach", "attach a store to a running session", _session_attach, "session_id")
    a.add_argument(
        "--store", required=True, metavar="ID[:read_only][=PATH]", help="the store to attach"
    )

    a = action("detach", "detach a store from a running session", _session_detach, "session_id")
    a.add_argument("resource_id", metavar="RESOURCE_ID|STORE_ID")

    delete = "delete a session; its sessions token stops working"
    action("delete", delete, _session_delete, "session_id")


def _client(args: argparse.Namespace) -> StoreClient:
    creds = resolve_credentials(
        api_url=args.api_url,
        token_file=args.token_file or os.environ.get("MEMFS_TOKEN_FILE"),
        default_url=DEFAULT_LOCAL_API_URL,
    )
    if creds is None:
        raise ConfigError("no token: pass --token-file FILE or set MEMFS_TOKEN")
    auth = args.auth or os.environ.get("MEMFS_AUTH") or creds.auth
    if auth not in ("bearer", "x-api-key"):
        raise ConfigError(f"MEMFS_AUTH is {auth!r}: use bearer or x-api-key")
    return api_client(dataclasses.replace(creds, auth=cast(AuthHeader, auth)), retries=3)


def _read_content(file: str) -> str:
    try:
        if file == "-":
            with open(0, "rb", closefd=False) as stdin:  # sys.stdin is None when fd 0 is closed
                data = stdin.read()
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


def _answer(args: argparse.Namespace, obj: Any, lines: Iterable[str]) -> None:
    if args.json:
        text = json.dumps(obj, default=dataclasses.asdict, ensure_ascii=False, indent=2)
        sys.stdout.write(text + "\n")
    else:
        sys.stdout.writelines(line + "\n" for line in lines)


async def _find(client: StoreClient, store_id: str, path: str) -> Memory:
    found = await client.find_memory_by_path(store_id, path)
    if found is None:
        raise StoreError(f"no memory at {path} in store {store_id}")
    return found


async def _create(client: StoreClient, args: argparse.Namespace) -> None:
    store = await client.create_store(args.name, description=args.description)
    _answer(args, store, [store.id])


async def _list(client: StoreClient, args: argparse.Namespace) -> None:
    stores = [s async for s in client.iter_stores()]
    _answer(args, stores, [f"{s.id}\t{s.name}\t{s.created_at}" for s in stores])


async def _ls(client: StoreClient, args: argparse.Namespace) -> None:
    prefix = None
    if args.prefix:
        raw = args.prefix if args.prefix.startswith("/") else "/" + args.prefix
        prefix = normalize_prefix(raw if raw.endswith("/") else raw + "/")
    memories = [m async for m in client.iter_memories(args.store_id, path_prefix=prefix)]
    lines = [f"{m.path}\t{m.content_size_bytes}" for m in memories if isinstance(m, Memory)]
    _answer(args, memories, lines)


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
    answer = {"action": action, "memory": dataclasses.asdict(memory)}
    _answer(args, answer, [f"{action}\t{memory.path}\t{memory.id}"])


async def _cat(client: StoreClient, args: argparse.Namespace) -> None:
    found = await _find(client, args.store_id, args.path)
    memory = await client.get_memory(args.store_id, found.id, view="full")
    if args.json:
        return _answer(args, memory, ())
    print(memory.content or "", end="", flush=True)


async def _rm(client: StoreClient, args: argparse.Namespace) -> None:
    found = await _find(client, args.store_id, args.path)
    await client.delete_memory(
        args.store_id, found.id, expected_content_sha256=found.content_sha256
    )
    answer = {"deleted": found.id, "path": found.path}
    _answer(args, answer, [f"deleted\t{found.path}\t{found.id}"])


async def _log(client: StoreClient, args: argparse.Namespace) -> None:
    memory_id = path = None
    if args.path:
        path = normalize_path(args.path)
        found = await client.find_memory_by_path(args.store_id, path)
        memory_id = found.id if found else None
    versions = [
        v
        async for v in client.iter_versions(args.store_id, memory_id=memory_id)
        if path is None or memory_id is not None or v.path == path
    ]
    _answer(args, versions, map(_version_line, versions))


def _version_line(v: MemoryVersion) -> str:
    shown_path = v.path if v.path is not None else "(redacted)"
    return f"{v.created_at}\t{v.operation}\t{shown_path}\t{(v.content_sha256 or '-')[:SHA_PREFIX]}"


def _resource_line(r: SessionResource) -> str:
    store = r.memory_store_id or r.type
    return f"{r.id or '-'}\t{store}\t{r.access or 'read_write'}\t{r.mount_path or '-'}"


async def _session_create(client: StoreClient, args: argparse.Namespace) -> None:
    created = await client.create_session(
        [parse_store_arg(spec) for spec in args.store],
        environment_id=args.environment_id,
        title=args.title,
    )
    work_item = {
        "id": "work_" + secrets.token_hex(12),
        "environment_id": created.session.environment_id,
        "data": {"type": "session", "id": created.session.id},
        "secret": encode_work_item_secret(created.sessions_token, client.base_url),
    }
    sys.stdout.write(json.dumps(work_item) + "\n")


async def _session_show(client: StoreClient, args: argparse.Namespace) -> None:
    session = await client.get_session(args.session_id)
    resources = await client.list_session_resources(args.session_id)
    _answer(args, dataclasses.replace(session, resources=resources), map(_resource_line, resources))


async def _session_attach(client: StoreClient, args: argparse.Namespace) -> None:
    attached = await client.add_session_resource(args.session_id, parse_store_arg(args.store))
    _answer(args, attached, ["attached\t" + _resource_line(attached)])


async def _session_detach(client: StoreClient, args: argparse.Namespace) -> None:
    await client.delete_session_resource(args.session_id, args.resource_id)
    answer = {"detached": args.resource_id, "session_id": args.session_id}
    _answer(args, answer, [f"detached\t{args.resource_id}"])


async def _session_delete(client: StoreClient, args: argparse.Namespace) -> None:
    await client.delete_session(args.session_id)
    _answer(args, {"deleted": args.session_id}, [f"deleted\t{args.session_id}"])


async def _main(args: argparse.Namespace) -> None:
    client = _client(args)
    async with client:
        try:
            await args.store_action(client, args)
        except AuthenticationFailed:
            raise StoreError(f"the store at {client.base_url} refused the token (401)")
        except PermissionDenied as e:
            if args.store_command == "session":
                raise StoreError(f"the token may not do this (403): {e.message}")
            raise StoreError("the token may not touch this store (403)")
        except NotFound as e:
            raise StoreError(f"not found: {e.message}")


def run(args: argparse.Namespace, settings: Settings) -> int:
    import trio

    trio.run(_main, args)
    return 0
