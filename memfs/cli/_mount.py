"""`memfs mount`, `memfs unmount`, `memfs sync` and `memfs status`.

Which stores to mount: `--store` and `--resources` name them; `--work-item`
(a claimed work item's JSON, `-` for standard input) and `--session` take
them from a session, read with the work item secret's sessions token, and
then follow the session (stores attached later are mounted, stores detached
unmounted: `memfs.supervisor._follow`). `ANTHROPIC_SESSION_ID`, which `ant
beta:worker poll --on-work` sets, names the session when nothing else names
the stores.

From standard input memfs reads one JSON object and no further (it waits for
no end of input: the writer may keep its end open); `memfs run` then gives
its command /dev/null as standard input, since the secret came that way.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from dataclasses import dataclass
from typing import Any

from .. import supervisor as sup
from .._exceptions import ConfigError, MountError, UsageError
from ..api import (
    WorkItem,
    parse_work_item,
    parse_work_item_secret,
    session_id_problem,
)
from ..control import ErrorReply, StoreSpec
from ._config import Settings, choose, mount_credentials
from ._confirm import confirm_files, names_a_file
from ._options import CONFIRM_TIMEOUT, SecretOnCommandLine, add_option, add_options
from ._status import print_sessions, print_table

log = logging.getLogger("memfs")


def setup_mount(p: argparse.ArgumentParser) -> None:
    """The flags of every command that mounts (`memfs mount`, `memfs run`):
    the settings of `MOUNT_OPTIONS`, each also a `MEMFS_<FLAG>` variable and a
    config file key (`memfs.cli._config` settles which one wins, before the
    command runs), and the refused `--token`."""
    p.add_argument(
        "--token",
        "--secret",
        action=SecretOnCommandLine,
        const="give --token-file FILE or set MEMFS_TOKEN (or the work item secret in "
        "--secret-file FILE or MEMFS_WORK_ITEM_SECRET)",
    )
    add_options(p)
    p.epilog = (
        "Every flag may also be set as MEMFS_<FLAG> (MEMFS_SYNC_INTERVAL=30) or in the "
        "config file (sync-interval = 30); a flag wins over its variable, a variable over "
        "the file. See docs/configuration.md."
    )


SESSION_ENV = "ANTHROPIC_SESSION_ID"
"""The session `ant beta:worker poll --on-work` hands its script: counts only
when nothing else names the stores."""
STDIN = "-"
MAX_WORK_ITEM_BYTES = 1 << 20


@dataclass
class MountPlan:
    """What a command that mounts will mount, and the session it follows."""

    specs: list[StoreSpec]
    session: sup.SessionToFollow | None = None
    """The session whose stores these are (`--work-item`, `--session`): followed."""
    nothing: str | None = None
    """The sentence saying that the session has no memory store, when it has none."""
    read_stdin: bool = False
    """The work item came on standard input."""


def _read_stdin_json(where: str) -> str:
    """One JSON value from standard input, read up to its end and no
    further in time: the writer may keep its end open after it."""
    decoder = json.JSONDecoder()
    data = b""
    while len(data) <= MAX_WORK_ITEM_BYTES:
        try:
            chunk = os.read(0, 65536)
        except OSError as e:
            raise ConfigError(f"cannot read {where}: {e.strerror or e}")
        if not chunk:
            break
        data += chunk
        try:
            text = data.decode("utf-8").lstrip()
        except UnicodeDecodeError:
            continue  # a character cut in two: its end comes with the next read
        if text and text[0] != "{":
            break
        try:
            decoder.raw_decode(text)
        except ValueError:
            continue
        return text
    if not data.strip():
        raise ConfigError(f"{where} is empty: give the work item's JSON there")
    return data.decode("utf-8", "replace")


def read_work_item(path: str) -> WorkItem:
    """The work item in `path` (`-`: standard input), its secret checked;
    one sentence, quoting nothing of it, when it is not a session's work item."""
    if path == STDIN:
        where = "the work item on standard input"
        text = _read_stdin_json(where)
    else:
        where = f"the work item {path}"
        try:
            with open(path, "rb") as f:
                raw = f.read(MAX_WORK_ITEM_BYTES + 1)
        except OSError as e:
            raise ConfigError(f"cannot read the work item file {path}: {e.strerror or e}")
        if len(raw) > MAX_WORK_ITEM_BYTES:
            raise ConfigError(f"{where} is over {MAX_WORK_ITEM_BYTES} bytes: not a work item")
        text = raw.decode("utf-8", "replace")
    try:
        obj, end = json.JSONDecoder().raw_decode(text.strip())
    except ValueError as e:
        raise ConfigError(f"{where} is not JSON ({getattr(e, 'msg', 'unreadable')})")
    if text.strip()[end:].strip() and path != STDIN:
        raise ConfigError(f"{where} holds more than one JSON value")
    item = parse_work_item(obj, where)
    if item.secret is not None:
        parse_work_item_secret(item.secret)  # refused now, even where another token ranks first
    return item


def mounting(settings: Settings) -> sup.MountSettings:
    """The settings of a command `setup_mount` set up: `settle` made them."""
    if settings.mount is None:
        raise AssertionError("a command that mounts without its mount settings")
    return settings.mount


def _the_session(settings: Settings) -> tuple[str | None, WorkItem | None, str]:
    """The session whose stores to mount, the work item that named it, and
    where it came from; (None, None, "") when the stores are named otherwise."""
    mount = mounting(settings)
    if mount.work_item and mount.session:
        raise ConfigError(
            "give --work-item or --session, not both: the work item names its session"
        )
    if mount.store or mount.resources:
        if mount.work_item or mount.session:
            raise ConfigError(
                "--store and --resources name the stores, --work-item and --session take "
                "them from a session: give one or the other"
            )
        return None, None, ""
    if mount.work_item:
        item = read_work_item(mount.work_item)
        return item.session_id, item, settings.sources["work_item"].source
    if mount.session:
        return mount.session, None, settings.sources["session"].source
    raw = os.environ.get(SESSION_ENV, "").strip()
    if raw:
        problem = session_id_problem(raw)
        if problem is not None:
            raise ConfigError(f"{SESSION_ENV} (environment) {problem}")
        return raw, None, SESSION_ENV
    return None, None, ""


def mount_plan(settings: Settings) -> MountPlan:
    """The specs of the stores to mount from the settings `setup_mount`
    defines, and the session to follow, every refusal (a store, the
    resources file, the work item, the credentials, a value, a session that
    cannot be read) raised before anything mounts: `memfs mount` and
    `memfs run` share it."""
    session_id, item, named_by = _the_session(settings)
    if session_id is None:
        return MountPlan(mount_specs(settings))
    creds = mount_credentials(
        settings,
        work_item_secret=item.secret if item else None,
        work_item_source=f"the secret of the work item ({named_by})",
        for_session=True,
    )
    if creds is None:
        given = "the work item has no secret" if item else f"{named_by} names only the session"
        raise ConfigError(
            f"session {session_id}'s stores cannot be read without its sessions token: "
            f"{given}; give the work item secret with --secret-file, MEMFS_WORK_ITEM_SECRET "
            "or ANTHROPIC_WORK_SECRET (the host's own ANTHROPIC_API_KEY and "
            "ANTHROPIC_AUTH_TOKEN are never used for a session)"
        )
    log.info("the token comes from %s and travels as %s", creds.source, creds.auth)
    mount = mounting(settings)
    resources = sup.fetch_session_resources(creds, session_id, mount.start_timeout)
    each = mount.store_settings()
    specs = sup.build_specs(resources, creds, each, root=mount.root, from_session=True)
    mounted = [
        sup.FollowedStore(r, s.store_id, s.mount_path, s.read_only)
        for r, s in zip(resources, specs, strict=True)
    ]
    nothing = None if specs else f"session {session_id} has no memory store: nothing mounted"
    return MountPlan(
        specs,
        sup.SessionToFollow(
            session_id, creds, each, mount.root, mounted, mount.session_check_interval
        ),
        nothing,
        read_stdin=bool(item) and mount.work_item == STDIN,
    )


def mount_specs(settings: Settings) -> list[StoreSpec]:
    """One spec per store named by `--store` and `--resources` (or their
    variables and keys), every refusal (a store, the resources file, the
    credentials, a value) raised before anything mounts."""
    mount = mounting(settings)
    resources = [sup.parse_store_arg(s) for s in mount.store]
    if mount.resources:
        resources += sup.load_resources(mount.resources)
    if not resources:
        raise ConfigError("no store to mount: give --store ID or --resources FILE")
    sup.check_store_count(resources)
    creds = mount_credentials(settings)
    if creds is not None:
        log.info("the token comes from %s and travels as %s", creds.source, creds.auth)
    return sup.build_specs(resources, creds, mount.store_settings(), root=mount.root)


def _to_stdout(line: str, problem: bool) -> None:
    if problem:
        sys.stderr.write(f"memfs: {line}\n")
    else:
        print(line, flush=True)


def run_mount(args: argparse.Namespace, settings: Settings) -> int:
    plan = mount_plan(settings)
    specs = plan.specs
    mount = mounting(settings)
    # Store processes log each pass at INFO unless --log-level, -v or MEMFS_LOG_LEVEL say otherwise.
    log_level = settings.log_level or "INFO"
    supervisor = sup.Supervisor(
        specs,
        daemon=mount.daemon,
        log_level=log_level,
        metrics_addr=mount.metrics_addr,
        log_format=settings.log_format,
    )
    if not mount.daemon:
        supervisor.catch_stop_signals()
    supervisor.start_all()
    for spec in specs:
        access = "read-only" if spec.read_only else "read-write"
        print(f"mounted {spec.store_id} at {spec.mount_path} ({access})", flush=True)
    if plan.nothing:
        print(plan.nothing, flush=True)
    session = plan.session
    if session is not None:
        if mount.daemon:
            try:
                sup.start_daemon_follower(
                    session, log_level=log_level, log_format=settings.log_format
                )
            except MountError:
                supervisor.stop_all()
                raise
        else:
            sup.SessionFollower(session, supervisor, announce=_to_stdout).start()
        print(
            f"following session {session.session_id}: stores attached to it are mounted, "
            "stores detached are unmounted",
            flush=True,
        )
    if mount.daemon:
        return 0
    return supervisor.wait()


def setup_unmount(p: argparse.ArgumentParser) -> None:
    p.add_argument("mount_paths", nargs="*", metavar="MOUNT_PATH")
    p.add_argument("--all", action="store_true", help="unmount every memfs mount of this machine")


def run_unmount(args: argparse.Namespace, settings: Settings) -> int:
    """With `--all`, or a path a session follower holds: stop the followers
    first (so that none mounts a store attached meanwhile), then unmount, a
    followed session's every mount with the path named."""
    if args.all:
        for record in sup.stop_followers():
            print(f"stopped following session {record.session_id}")
        return sup.unmount(args.mount_paths, all_=True)
    paths = [os.path.abspath(p) for p in args.mount_paths]
    running = {os.path.abspath(s.mount_path) for s in sup.running_stores()}
    for record in sup.stop_followers(holding=[p for p in paths if p in running]):
        print(f"stopped following session {record.session_id}")
        for held in record.mount_paths or []:
            real = os.path.abspath(held)
            if real not in paths and real in running:
                paths.append(real)
    return sup.unmount(paths, all_=False)


def setup_sync(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "mount_paths",
        nargs="*",
        metavar="MOUNT_PATH|FILE",
        help="mount paths: a pass in each (default: every mounted store); or files inside "
        "mounts: each pushed now and confirmed, one line each (not both kinds at once)",
    )
    p.add_argument("--json", action="store_true", help="print the reports as JSON")
    add_option(p, CONFIRM_TIMEOUT)


def run_sync(args: argparse.Namespace, settings: Settings) -> int:
    files = [p for p in args.mount_paths if names_a_file(p)]
    if files and len(files) < len(args.mount_paths):
        raise UsageError(
            "give mount paths (a pass in each) or files inside mounts (each pushed and "
            "confirmed), not both in one call"
        )
    if files:
        timeout = choose([CONFIRM_TIMEOUT], args, os.environ, None)[CONFIRM_TIMEOUT.dest].value
        return confirm_files(files, timeout, as_json=args.json)
    results = sup.sync(args.mount_paths)
    code = 0
    out = []
    for store, reply in results:
        if isinstance(reply, ErrorReply):
            code = 1
            sys.stderr.write(f"memfs: sync of {store.mount_path} failed: {reply.error}\n")
        elif not args.json:
            r = reply.report
            print(
                f"{store.mount_path}: pushed {r['pushed']}, pulled {r['pulled']}, "
                f"deleted {r['deleted_remote']}, removed {r['removed_local']}, "
                f"conflicts {r['conflicts']}, refused {r['refused']}"
            )
        out.append({"mount_path": store.mount_path, "store_id": store.store_id, **reply.to_json()})
    if args.json:
        print(json.dumps(out, indent=2))
    return code


def setup_status(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the status as JSON")


def run_status(args: argparse.Namespace, settings: Settings) -> int:
    results = sup.status()
    sessions = sup.session_records()
    if args.json:
        entries: list[dict[str, Any]] = [
            {"mount_path": s.mount_path, **r.to_json()}
            if isinstance(r, ErrorReply)
            else r.status.to_json()
            for s, r in results
        ]
        # A followed session is an entry of its own, after the stores: no mount_path.
        entries += [record.to_json() for record in sessions]
        print(json.dumps(entries, indent=2))
        return 0
    if not results and not sessions:
        print("no memfs mounts are running")
        return 0
    if results:
        print_table(results)
    print_sessions(sessions)
    return 0


COMMANDS = {
    "mount": ("mount Memory Stores as folders (one FUSE mount per store)", setup_mount, run_mount),
    "unmount": ("unmount memfs mounts, after a final sync", setup_unmount, run_unmount),
    "sync": (
        "run a sync pass now and wait for it, or push files now and confirm each",
        setup_sync,
        run_sync,
    ),
    "status": ("show the mounted stores and what is pending", setup_status, run_status),
}
