"""`memfs mount`, `memfs unmount`, `memfs sync` and `memfs status`."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from .. import supervisor as sup
from .._exceptions import ConfigError
from ..control import ErrorReply, StoreSpec
from ._main import SecretOnCommandLine
from ._status import print_table

log = logging.getLogger("memfs")


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds")


def _count(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number")


def setup_mount(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--token",
        "--secret",
        action=SecretOnCommandLine,
        const="give --token-file FILE or set MEMFS_TOKEN (or the work item secret in "
        "--secret-file FILE or MEMFS_WORK_ITEM_SECRET)",
    )
    p.add_argument(
        "--store",
        action="append",
        default=[],
        metavar="ID[:read_only|:read_write][=MOUNT_PATH]",
        help="a store to mount (repeatable, at most 8)",
    )
    p.add_argument("--resources", metavar="FILE", help="the session's resources array (JSON)")
    p.add_argument(
        "--root",
        default="/mnt/memory",
        help="where stores without a mount path go (default %(default)s)",
    )
    p.add_argument(
        "--api-url",
        help="the Memory Store API (default $MEMFS_API_URL, $ANTHROPIC_BASE_URL, the secret's, "
        "or the public API)",
    )
    p.add_argument(
        "--token-file",
        metavar="FILE",
        help="a file holding the token (or set MEMFS_TOKEN, ANTHROPIC_API_KEY or "
        "ANTHROPIC_AUTH_TOKEN); an sk-ant-api... key travels as x-api-key",
    )
    p.add_argument(
        "--secret-file",
        metavar="FILE",
        help="a file holding the work item secret (or set MEMFS_WORK_ITEM_SECRET or "
        "ANTHROPIC_WORK_SECRET)",
    )
    p.add_argument(
        "--cache-dir",
        help="the local cache (default $XDG_CACHE_HOME/memfs, /var/cache/memfs as root)",
    )
    p.add_argument("--uid", type=int, help="owner shown for files (default: the caller)")
    p.add_argument("--gid", type=int, help="group shown for files (default: the caller's)")
    p.add_argument("--allow-other", action="store_true", help="let other users reach the mounts")
    p.add_argument(
        "--sync-interval",
        type=_float,
        default=15.0,
        help="seconds between passes (default 15, min 5)",
    )
    p.add_argument(
        "--sync-deletions",
        choices=("enabled", "log_only", "disabled"),
        default="enabled",
        help="what a local delete does in the store (default %(default)s)",
    )
    p.add_argument(
        "--final-sync-timeout",
        type=_float,
        default=30.0,
        help="seconds for the final sync on stop (default 30)",
    )
    p.add_argument(
        "--sync-concurrency",
        type=_count,
        default=16,
        metavar="N",
        help="requests at once in a sync pass, 1-32 (default 16; the final sync uses "
        "twice as many, at most 32)",
    )
    p.add_argument(
        "--metrics-addr",
        metavar="HOST:PORT",
        help="serve Prometheus metrics of every mounted store there (e.g. 127.0.0.1:9477)",
    )
    p.add_argument("--daemon", action="store_true", help="return once every store is mounted")


def mount_specs(args: argparse.Namespace) -> list[StoreSpec]:
    """One spec per store from the options `setup_mount` defines, every refusal
    (a store, the resources file, the credentials, a value) raised before
    anything mounts: `memfs mount` and `memfs run` share it."""
    resources = [sup.parse_store_arg(s) for s in args.store]
    if args.resources:
        resources += sup.load_resources(args.resources)
    if not resources:
        raise ConfigError("no store to mount: give --store ID or --resources FILE")
    if len(resources) > 8:
        raise ConfigError(f"{len(resources)} stores were given; at most 8 can be mounted at once")
    creds = sup.resolve_credentials(
        api_url=args.api_url, token_file=args.token_file, secret_file=args.secret_file
    )
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
    # Store processes log each pass at INFO unless -v or MEMFS_LOG_LEVEL say otherwise.
    if args.metrics_addr:
        sup.parse_metrics_addr(args.metrics_addr)
    supervisor = sup.Supervisor(
        specs,
        daemon=args.daemon,
        log_level=args.log_level or "INFO",
        metrics_addr=args.metrics_addr,
    )
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
