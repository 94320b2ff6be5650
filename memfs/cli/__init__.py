"""The `memfs` command: argument parsing, exit statuses and what a person
reads; `python -m memfs` and the `memfs` program run it."""

from __future__ import annotations

import sys
from typing import NoReturn

from ._main import build_parser, main


def run() -> NoReturn:
    sys.exit(main())


__all__ = ["build_parser", "main", "run"]
