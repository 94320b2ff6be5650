"""The `memfs` command: argument parsing, exit statuses and what a person
reads. Nothing imports this package.

This module itself imports almost nothing: `main` first starts the store
processes `memfs mount` and `memfs run` will need, and `run` ends the
program without the interpreter's teardown (memfs._startup, which says
what each buys).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

from .._startup import EARLY_STORES, exit_now, skip_httpx_cli, start_early_stores

if TYPE_CHECKING:
    import argparse


def main(argv: Sequence[str] | None = None) -> int:
    """The `memfs` command line; its exit status."""
    start_early_stores(sys.argv[1:] if argv is None else argv)
    skip_httpx_cli()
    try:
        from ._main import main as run_command

        return run_command(argv)
    finally:
        EARLY_STORES.close()


def run() -> NoReturn:
    """The `memfs` program: `main`, then its exit (memfs._startup's `exit_now`)."""
    exit_now(main())


def build_parser() -> argparse.ArgumentParser:
    from ._main import build_parser as build

    return build()


__all__ = [
    "build_parser",
    "main",
    "run",
]
