"""The `memfs` command: argument parsing, exit statuses and what a person
reads. `python -m memfs` and the `memfs` program run it; `memfs.testing`
builds its parser to document the flags.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    import argparse


def main(argv: Sequence[str] | None = None) -> int:
    """The `memfs` command line; its exit status."""
    from ._main import main as run_command

    return run_command(argv)


def run() -> NoReturn:
    """The `memfs` program: `main`, then its exit status."""
    sys.exit(main())


def build_parser() -> argparse.ArgumentParser:
    from ._main import build_parser as build

    return build()


__all__ = [
    "build_parser",
    "main",
    "run",
]
