"""`memfs mount`, `memfs unmount` and `memfs run`. The stores to mount are those `--store` and
`--resources` name, or a session's (`--work-item`, `--session`, else `ANTHROPIC_SESSION_ID`), read
with the work item secret's sessions token and then followed. `memfs run` exits with its command's
status (128+N for signal N), 75 when it succeeded but the final sync left files behind, 127 or 126
when it could not start, 1 when a store could not be mounted."""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass

from .. import supervisor as sup
from .._exceptions import ConfigError, MountError
from ..api import WorkItem, parse_work_item, parse_work_item_secret, session_id_problem
from ..control import StoreSpec
from ._config import Settings, mount_credentials
from ._options import CONFIG_OPTION, MOUNT_OPTIONS, SecretOnCommandLine, add_option


def setup_mount(p: argparse.ArgumentParser) -> None:
    """The flags of every command that mounts (`memfs mount`, `memfs run`)."""
    p.add_argument(
        "--token",
        "--secret",
        action=SecretOnCommandLine,
        const="give --token-file FILE or set MEMFS_TOKEN (or the work item secret in "
        "--secret-file FILE or MEMFS_WORK_ITEM_SECRET)",
    )
    for option in (*MOUNT_OPTIONS, CONFIG_OPTION):
        add_option(p, option)
    p.set_defaults(_settings=MOUNT_OPTIONS)
    p.epilog = (
        "Every flag may also be set as MEMFS_<FLAG> (MEMFS_SYNC_INTERVAL=30) or in the "
        "config file (sync-interval = 30); a flag wins over its variable, a variable over "
        "the file. See docs/configuration.md."
    )


SESSION_ENV = "ANTHROPIC_SESSION_ID"
"""The session `ant beta:worker poll --on-work` hands its script."""
STDIN = "-"
MAX_WORK_ITEM_BYTES = 1 << 20


@dataclass
class MountPlan:
    specs: list[StoreSpec]
    session: sup.SessionToFollow | None = None
    nothing: str | None = None
    """The sentence saying that the session has no memory store, when it has none."""
    read_stdin: bool = False
    """The work item came on standard input (so `memfs run`'s command does not)."""


def _read_stdin_json(where: str) -> str:
    """One JSON value from standard input (the rest of the chunk that ends it is dropped)."""
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
    """The work item in `path` (`-`: standard input), its secret checked,
    refused in a sentence that quotes nothing of it."""
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
    except (ValueError, RecursionError) as e:
        raise ConfigError(f"{where} is not JSON ({getattr(e, 'msg', 'unreadable')})")
    if text.strip()[end:].strip() and path != STDIN:
        raise ConfigError(f"{where} holds more than one JSON value")
    item = parse_work_item(obj, where)
    if item.secret is not None:
        parse_work_item_secret(item.secret)  # refused now, even where another token ranks first
    return item


def mounting(settings: Settings) -> sup.MountSettings:
    assert settings.mount is not None, "settle makes the settings of a command that mounts"
    return settings.mount


def _the_session(settings: Settings) -> tuple[str | None, WorkItem | None, str]:
    """The session whose stores to mount, the work item that named it, and
    where it came from; (None, None, "") for none."""
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
    """What to mount and the session to follow, refused before anything mounts."""
    session_id, item, named_by = _the_session(settings)
    mount = mounting(settings)
    if session_id is None:
        resources = [sup.parse_store_arg(s) for s in mount.store]
        if mount.resources:
            resources += sup.load_resources(mount.resources)
        if not resources and mount.resources:
            raise ConfigError(f"the resources file {mount.resources} names no memory store")
        if not resources:
            raise ConfigError("no store to mount: give --store ID or --resources FILE")
        sup.check_store_count(resources)
        creds = mount_credentials(settings)
        return MountPlan(sup.build_specs(resources, creds, mount.store_settings(), root=mount.root))
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
    specs, session = sup.session_plan(creds, session_id, mount)
    nothing = None if specs else f"session {session_id} has no memory store: nothing mounted"
    return MountPlan(specs, session, nothing, mount.work_item == STDIN)


def _to_stdout(line: str, problem: bool) -> None:
    if problem:
        sys.stderr.write(f"memfs: {line}\n")
    else:
        print(line, flush=True)


def run_mount(args: argparse.Namespace, settings: Settings) -> int:
    plan = mount_plan(settings)
    mount = mounting(settings)
    # Store processes log each pass at INFO unless --log-level, -v or MEMFS_LOG_LEVEL say otherwise.
    log_level = settings.log_level or "INFO"
    supervisor = sup.Supervisor(
        plan.specs,
        daemon=mount.daemon,
        log_level=log_level,
        metrics_addr=mount.metrics_addr,
        log_format=settings.log_format,
    )
    if not mount.daemon:
        supervisor.catch_stop_signals()
    supervisor.start_all()
    for spec in plan.specs:
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
    return 0 if mount.daemon else supervisor.wait()


def setup_unmount(p: argparse.ArgumentParser) -> None:
    p.add_argument("mount_paths", nargs="*", metavar="MOUNT_PATH")
    p.add_argument("--all", action="store_true", help="unmount every memfs mount of this machine")


def run_unmount(args: argparse.Namespace, settings: Settings) -> int:
    """The followers holding the paths stop first, so that none mounts a store
    attached meanwhile, and their every mount goes too."""
    if args.all and args.mount_paths:
        raise ConfigError("give the mount paths to unmount or --all, not both")
    paths = [os.path.abspath(p) for p in args.mount_paths]
    running = {os.path.abspath(s.mount_path) for s in sup.running_stores()}
    holding = None if args.all else [p for p in paths if p in running]
    for record in sup.stop_followers(holding=holding):
        print(f"stopped following session {record.session_id}")
        for held in record.mount_paths or []:
            real = os.path.abspath(held)
            if real not in paths and real in running:
                paths.append(real)
    return sup.unmount(paths, all_=args.all)


EXIT_LEFT_BEHIND = 75
"""sysexits' EX_TEMPFAIL: a later mount of the store uploads what is left."""


def setup_run(p: argparse.ArgumentParser) -> None:
    setup_mount(p)
    for action in p._actions:  # refused by `run`: not offered in its --help
        if action.dest == "daemon":
            action.help = argparse.SUPPRESS
    p.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND [ARGS...]",
        help="the command to run once every store is mounted",
    )


def run_run(args: argparse.Namespace, settings: Settings) -> int:
    if mounting(settings).daemon:
        raise ConfigError(
            "memfs run takes no --daemon: it stays in the foreground to run the command "
            "and the final sync after it"
        )
    command = args.command[1:] if args.command[:1] == ["--"] else list(args.command)
    if not command:
        raise ConfigError("no command to run: give it after --, as in memfs run --store ID -- sh")
    plan = mount_plan(settings)
    if plan.nothing:
        sys.stderr.write(f"memfs: {plan.nothing}\n")
    # Its stderr is the command's too: store processes say only what needs reading.
    result = sup.run(
        plan.specs,
        command,
        log_level=settings.log_level or "WARNING",
        log_format=settings.log_format,
        metrics_addr=mounting(settings).metrics_addr,
        session=plan.session,
        announce=lambda line, problem: print(f"memfs: {line}", file=sys.stderr),
        stdin_devnull=plan.read_stdin,
    )
    if result.not_started:
        sys.stderr.write(f"memfs: {result.not_started}\n")
    for store in result.stores:
        for path in store.not_uploaded:
            sys.stderr.write(f"memfs: not uploaded from {store.spec.mount_path}: {path}\n")
        if store.failure:
            sys.stderr.write(
                f"memfs: the final sync of {store.spec.mount_path} could not be confirmed: "
                f"{store.failure}\n"
            )
    # The follower named the files of each store detached when it unmounted it.
    ended = result.stores + result.detached
    left = sum(len(store.not_uploaded) for store in ended)
    if result.left_behind:
        what = f"{left} file{'s' if left != 1 else ''}" if left else "changes"
        then = (
            "the log says what becomes of each"
            if left
            else "the next mount of the store uploads them"
        )
        sys.stderr.write(
            f"memfs: the final sync left {what} behind, kept in the cache "
            f"({ended[0].spec.cache_dir}): {then}\n"
        )
        if result.status == 0:
            return EXIT_LEFT_BEHIND
    return result.status
