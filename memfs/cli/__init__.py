"""The `memfs` command: argument parsing, exit statuses and what a person
reads. Nothing imports this package.

This module itself imports almost nothing: `main` first starts the store
processes `memfs mount` and `memfs run` will need (memfs._children), so that
their imports overlap the command line's own.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

from .._children import EarlyStores

if TYPE_CHECKING:
    import argparse


def main(argv: Sequence[str] | None = None) -> int:
    """The `memfs` command line; its exit status."""
    early = EarlyStores.for_command(sys.argv[1:] if argv is None else argv)
    try:
        from ._main import main as run_command

        return run_command(argv, early=early)
    finally:
        early.close()


def run() -> NoReturn:
    """The `memfs` program: `main`, then an exit without the interpreter's
    teardown (~20 ms of every command, on the way out of `memfs mount`
    too), once the logs and what the command printed are flushed. Nothing
    the commands hold needs the teardown: they close what they open, and
    store processes are processes of their own."""
    code = main()
    import logging  # imported by then: the commands log

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`memfs status | head`)
            pass
    os._exit(code)


def build_parser() -> argparse.ArgumentParser:
    from ._main import build_parser as build

    return build()


__all__ = [
    "build_parser",
    "main",
    "run",
]
