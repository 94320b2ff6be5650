"""The parser and what every command shares: exit statuses 0, 1 (the work failed) and 2 (bad usage);
errors as one sentence, `memfs: <sentence>`, never echoing a refused value that may be a secret
typed in the wrong place; the closest command, choice or flag suggested, and no flag abbreviated
(`--token X` must not be read as `--token-file X`)."""

from __future__ import annotations

import argparse
import difflib
import logging
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from .._exceptions import ConfigError, MemfsError, UsageError
from .._logging import setup_logging
from .._version import __version__
from ._config import Settings, log_sources, settle
from ._options import HIDDEN, add_log_options, looks_like_token

log = logging.getLogger("memfs")

EXIT_FAILED = 1
EXIT_USAGE = 2
_QUOTED = re.compile(r"'([^']*)'")


def _flag_name(arg: str) -> str | None:
    """`--name` of `--name=VALUE`, `-t` of `-tVALUE`; None for a value."""
    if arg.startswith("--"):
        return arg.split("=", 1)[0]
    return arg[:2] if arg.startswith("-") and len(arg) > 1 else None


def _unrecognized(extras: list[str], known_flags: Sequence[str]) -> str:
    """The flags and values memfs could not place, each flag with the closest
    it knows; never a flag's `=VALUE`, nor a value that may be a secret."""
    names = {name.lstrip("-"): name for name in known_flags}
    shown: list[str] = []
    hidden = 0
    for arg in extras:
        flag = _flag_name(arg)
        if flag:
            close = difflib.get_close_matches(flag.lstrip("-"), list(names), n=1)
            shown.append(flag + (f" (did you mean {names[close[0]]}?)" if close else ""))
        elif looks_like_token(arg):
            hidden += 1
        else:
            shown.append(repr(arg))
    secret = (
        "not shown in case it is a secret" if hidden == 1 else "not shown in case one is a secret"
    )
    if not shown:
        return f"{hidden} unrecognized argument{'s' if hidden > 1 else ''}, {secret}"
    named = f"unrecognized argument{'s' if len(shown) > 1 else ''} {', '.join(shown)}"
    if hidden:
        named += f" and {hidden} more argument{'s' if hidden > 1 else ''}, {secret}"
    return named


def _flags_in_use(parser: argparse.ArgumentParser, namespace: argparse.Namespace) -> list[str]:
    """The flags --help shows of `parser` and of the subcommands chosen (in
    `namespace`, or among the words read when `memfs run`'s command took it)."""
    flags: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            name = getattr(namespace, action.dest, None)
            if not isinstance(name, str):
                words = getattr(parser, "_arg_strings", [])
                name = next((word for word in words if word in action.choices), "")
            chosen = action.choices.get(name)
            if chosen is not None:
                flags += _flags_in_use(chosen, namespace)
        elif action.help != argparse.SUPPRESS:
            flags += action.option_strings
    return flags


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one sentence and exit status 2, takes flags only by
    their full names, and echoes no refused value that may be a secret."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._arg_strings = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        namespace, extras = self.parse_known_args(args, namespace)
        if extras:
            self.error(_unrecognized(extras, _flags_in_use(self, namespace)))
        return namespace

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        """An invalid choice names the closest choice, and itself unless it may be a token; an
        unknown flag before it (`memfs store --tok X list`) is the mistake named."""
        if action.choices is None or value in action.choices:
            return
        unknown = [
            arg
            for arg in getattr(self, "_arg_strings", [])
            if _flag_name(arg) and _flag_name(arg) not in self._option_string_actions
        ]
        if unknown:
            flags = _flags_in_use(self, argparse.Namespace())
            raise argparse.ArgumentError(None, _unrecognized(unknown, flags))
        choices = [str(choice) for choice in action.choices]
        named = "" if looks_like_token(str(value)) else f" {str(value)!r}"
        close = difflib.get_close_matches(str(value), choices, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        listed = ", ".join(map(repr, choices))
        raise argparse.ArgumentError(action, f"invalid choice{named}{hint} (choose from {listed})")

    def error(self, message: str) -> None:  # type: ignore[override]
        message = _QUOTED.sub(lambda m: HIDDEN if looks_like_token(m[1]) else m[0], message)
        sys.stderr.write(f"memfs: {message} (see '{self.prog} --help')\n")
        raise SystemExit(EXIT_USAGE)


Run = Callable[[argparse.Namespace, Settings], int]
"""A command: its arguments and its settings -> its exit status."""


_HELP = {
    "serve": "run the Memory Store API locally on SQLite",
    "store": "talk to a Memory Store API: create stores, put, cat, ls, rm, log",
    "mount": "mount Memory Stores as folders (one FUSE mount per store)",
    "unmount": "unmount memfs mounts, after a final sync",
    "sync": "run a sync pass now and wait for it, or push files now and confirm each",
    "status": "show the mounted stores and what is pending",
    "run": "mount the stores, run a command, then the final sync and unmount",
}
"""Each command's help, in the order `memfs --help` lists them."""


def _commands() -> dict[str, tuple[Callable[[argparse.ArgumentParser], None], Run]]:
    """name -> (setup(parser), run(args, settings) -> exit status)."""
    from . import _mount, _serve, _status, _store

    return {
        "serve": (_serve.setup, _serve.run),
        "store": (_store.setup, _store.run),
        "mount": (_mount.setup_mount, _mount.run_mount),
        "unmount": (_mount.setup_unmount, _mount.run_unmount),
        "sync": (_status.setup_sync, _status.run_sync),
        "status": (_status.setup_status, _status.run_status),
        "run": (_mount.setup_run, _mount.run_run),
    }


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="memfs", description="Memory Stores as ordinary folders, over FUSE.")
    parser.add_argument("--version", action="version", version=f"memfs {__version__}")
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more log output (-vv for debug)"
    )
    add_log_options(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    commands = _commands()
    for name, help_text in _HELP.items():
        setup, run = commands[name]
        p = sub.add_parser(name, help=help_text, description=help_text)
        # Its own dest: a subparser's default would overwrite the count of `memfs -v`.
        p.add_argument(
            "-v",
            "--verbose",
            action="count",
            default=0,
            dest="verbose_after",
            help=argparse.SUPPRESS,
        )
        add_log_options(p, top=False)
        setup(p)
        p.set_defaults(_run=run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        os.getcwd()
    except OSError:  # a mount gone from under the shell: imports need a folder
        print("memfs: the current folder is gone; working from /", file=sys.stderr)
        os.chdir("/")
    parser = build_parser()
    args = parser.parse_args(argv)
    args.verbose += args.verbose_after  # `memfs -v mount -v` is -vv
    try:
        settings = settle(args, os.environ)
    except ConfigError as e:
        sys.stderr.write(f"memfs: {e}\n")
        return EXIT_USAGE
    setup_logging(settings.cli_log_level, settings.log_format)
    log_sources(settings)
    run: Run = args._run
    try:
        return run(args, settings)
    except UsageError as e:
        return _refuse(settings, e, EXIT_USAGE)
    except MemfsError as e:
        return _refuse(settings, e, EXIT_FAILED)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_FAILED
    except UnicodeEncodeError:
        return _refuse(settings, UsageError("a value given is not UTF-8 text"), EXIT_USAGE)


def run() -> NoReturn:
    sys.exit(main())


def _refuse(settings: Settings, e: MemfsError, code: int) -> int:
    """The command's one sentence, or in a JSON log one more record."""
    if settings.log_format != "json":
        sys.stderr.write(f"memfs: {e}\n")
    elif code == EXIT_USAGE:
        log.error("%s", e, extra={"event": "usage_error"})
    else:
        log.error("%s", e, extra={"event": "command_failed"})
    return code
