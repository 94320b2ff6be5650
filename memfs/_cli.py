"""The `memfs` command: argument parsing, exit statuses and what a person reads.

Exit statuses: 0 success; 1 the work failed (a store refused, a sync did not
finish, a mount failed); 2 bad usage (a flag, file or value memfs cannot use).
Errors are one sentence on stderr, `memfs: <sentence>`, never a traceback.
Nothing imports this module; it imports the layers below.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from . import __version__
from ._exceptions import MemfsError, UsageError

log = logging.getLogger("memfs")

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one sentence and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"memfs: {message} (see '{self.prog} --help')\n")
        raise SystemExit(EXIT_USAGE)


def _setup_logging(verbose: int) -> None:
    level = logging.DEBUG if verbose > 1 else logging.INFO if verbose == 1 else logging.WARNING
    env = os.environ.get("MEMFS_LOG_LEVEL")
    if env:
        level = getattr(logging, env.upper(), level)
    logging.basicConfig(
        level=level,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )


def _commands():
    """name -> (help, setup(parser), run(args) -> exit status)."""
    from . import _cli_mount, _cli_serve, _cli_store

    return {
        "serve": ("run the Memory Store API locally on SQLite", _cli_serve.setup, _cli_serve.run),
        "store": (
            "talk to a Memory Store API: create stores, put, cat, ls, rm, log",
            _cli_store.setup,
            _cli_store.run,
        ),
        **_cli_mount.COMMANDS,
    }


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="memfs", description="Memory Stores as ordinary folders, over FUSE.")
    parser.add_argument("--version", action="version", version=f"memfs {__version__}")
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more log output (-vv for debug)"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name, (help_text, setup, run) in _commands().items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("-v", "--verbose", action="count", default=0, help=argparse.SUPPRESS)
        setup(p)
        p.set_defaults(_run=run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _setup_logging(args.verbose)
    try:
        return int(args._run(args) or 0)
    except UsageError as e:
        sys.stderr.write(f"memfs: {e}\n")
        return EXIT_USAGE
    except MemfsError as e:
        sys.stderr.write(f"memfs: {e}\n")
        return EXIT_FAILED
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
