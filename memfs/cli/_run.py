"""`memfs run [mount options] -- COMMAND [ARGS...]`: the stores mounted for
the length of one command, the way a sandbox container's entrypoint needs.

Every option of `memfs mount` (the same definitions, `setup_mount`) except
`--daemon`, which would leave nothing to wait for the command. memfs prints
nothing on stdout, which is the command's; its sentences go to stderr.

Exit statuses: the command's (128+N when it died by signal N, as shells
report it); 75 (EX_TEMPFAIL) when the command succeeded but a final sync
left files behind, each named on stderr as `memfs unmount` names them: the
one at the end, or that of a store detached from the session meanwhile; 127
or 126 when the command could not be started (not found, not executable),
after the stores were unmounted; 1 when a store could not be mounted (the
command never ran) and 2 for bad usage, as for `memfs mount`.
"""

from __future__ import annotations

import argparse
import logging
import sys

from .. import supervisor as sup
from .._exceptions import ConfigError
from ._config import Settings
from ._mount import mount_plan, mounting, setup_mount

log = logging.getLogger("memfs")

EXIT_LEFT_BEHIND = 75
"""The command succeeded but some files are not in their store (sysexits' EX_TEMPFAIL:
a later mount of the store uploads them from the cache)."""


def setup(p: argparse.ArgumentParser) -> None:
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


def _to_stderr(line: str, problem: bool) -> None:
    """What the session follower did: stdout is the command's."""
    sys.stderr.write(f"memfs: {line}\n")


def run(args: argparse.Namespace, settings: Settings) -> int:
    if mounting(settings).daemon:
        raise ConfigError(
            "memfs run takes no --daemon: it stays in the foreground to run the command "
            "and the final sync after it"
        )
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise ConfigError("no command to run: give it after --, as in memfs run --store ID -- sh")
    plan = mount_plan(settings)
    specs = plan.specs
    if plan.nothing:
        sys.stderr.write(f"memfs: {plan.nothing}\n")
    # Its stderr is the command's too: store processes say only what needs reading.
    result = sup.run(
        specs,
        command,
        log_level=settings.log_level or "WARNING",
        log_format=settings.log_format,
        metrics_addr=mounting(settings).metrics_addr,
        session=plan.session,
        announce=_to_stderr,
        stdin_devnull=plan.read_stdin,
    )
    if result.not_started:
        sys.stderr.write(f"memfs: {result.not_started}\n")
    left = 0
    for store in result.stores:
        for path in store.not_uploaded:
            sys.stderr.write(f"memfs: not uploaded from {store.spec.mount_path}: {path}\n")
        left += len(store.not_uploaded)
        if store.failure:
            sys.stderr.write(
                f"memfs: the final sync of {store.spec.mount_path} could not be confirmed: "
                f"{store.failure}\n"
            )
    for store in result.detached:  # each named by the follower when it unmounted it
        left += len(store.not_uploaded)
    if result.left_behind:
        what = f"{left} file{'s' if left != 1 else ''}" if left else "changes"
        then = (
            "the log says what becomes of each"
            if left
            else "the next mount of the store uploads them"
        )
        sys.stderr.write(
            f"memfs: the final sync left {what} behind; they stay in the cache "
            f"({(result.stores + result.detached)[0].spec.cache_dir}): {then}\n"
        )
        if result.status == 0:
            return EXIT_LEFT_BEHIND
    return result.status


COMMANDS = {
    "run": (
        "mount the stores, run a command, then the final sync and unmount",
        setup,
        run,
    ),
}
