"""`memfs mount`, `memfs unmount`, `memfs sync` and `memfs status`."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from .. import supervisor as sup
from .._exceptions import ConfigError
from ..api import MAX_STORES_PER_SESSION
from ..control import ErrorReply, StoreSpec
from ._config import mount_credentials
from ._main import SecretOnCommandLine
from ._options import add_options
from ._status import print_table

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


def mount_specs(args: argparse.Namespace) -> list[StoreSpec]:
    """One spec per store from the options `setup_mount` defines, every refusal
    (a store, the resources file, the credentials, a value) raised before
    anything mounts: `memfs mount` and `memfs run` share it."""
    resources = [sup.parse_store_arg(s) for s in args.store]
    if args.resources:
        resources += sup.load_resources(args.resources)
    if not resources:
        raise ConfigError("no store to mount: give --store ID or --resources FILE")
    if len(resources) > MAX_STORES_PER_SESSION:
        raise ConfigError(
            f"{len(resources)} stores were given; "
            f"at most {MAX_STORES_PER_SESSION} can be mounted at once"
        )
    creds = mount_credentials(args)
    if creds is not None:
        log.info("the token comes from %s and travels as %s", creds.source, creds.auth)
    return sup.build_specs(
        resources,
        creds,
        root=args.root,
        cache_dir=os.path.abspath(args.cache_dir or sup.default_cache_dir()),
        uid=args.uid,
        gid=args.gid,
        allow_other=args.allow_other,
        sync_interval=args.sync_interval,
        sync_deletions=args.sync_deletions,
        final_sync_timeout=args.final_sync_timeout,
        sync_concurrency=args.sync_concurrency,
    )


def run_mount(args: argparse.Namespace) -> int:
    specs = mount_specs(args)
    # Store processes log each pass at INFO unless --log-level, -v or MEMFS_LOG_LEVEL say otherwise.
    supervisor = sup.Supervisor(
        specs,
        daemon=args.daemon,
        log_level=args.log_level or "INFO",
        metrics_addr=args.metrics_addr,
        log_format=args.log_format,
        early=args.early,
    )
    if not args.daemon:
        supervisor.catch_stop_signals()
    supervisor.start_all()
    for spec in specs:
        access = "read-only" if spec.read_only else "read-write"
        print(f"mounted {spec.store_id} at {spec.mount_path} ({access})", flush=True)
    if args.daemon:
        return 0
    return supervisor.wait()


def setup_unmount(p: argparse.ArgumentParser) -> None:
    p.add_argument("mount_paths", nargs="*", metavar="MOUNT_PATH")
    p.add_argument("--all", action="store_true", help="unmount every memfs mount of this machine")


def run_unmount(args: argparse.Namespace) -> int:
    return sup.unmount(args.mount_paths, all_=args.all)


def setup_sync(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "mount_paths", nargs="*", metavar="MOUNT_PATH", help="default: every mounted store"
    )
    p.add_argument("--json", action="store_true", help="print the reports as JSON")


def run_sync(args: argparse.Namespace) -> int:
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


def run_status(args: argparse.Namespace) -> int:
    results = sup.status()
    if args.json:
        print(
            json.dumps(
                [
                    {"mount_path": s.mount_path, **r.to_json()}
                    if isinstance(r, ErrorReply)
                    else r.status.to_json()
                    for s, r in results
                ],
                indent=2,
            )
        )
        return 0
    if not results:
        print("no memfs mounts are running")
        return 0
    print_table(results)
    return 0


COMMANDS = {
    "mount": ("mount Memory Stores as folders (one FUSE mount per store)", setup_mount, run_mount),
    "unmount": ("unmount memfs mounts, after a final sync", setup_unmount, run_unmount),
    "sync": ("run a sync pass now and wait for it", setup_sync, run_sync),
    "status": ("show the mounted stores and what is pending", setup_status, run_status),
}
