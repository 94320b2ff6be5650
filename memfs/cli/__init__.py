"""The `memfs` command: argument parsing, exit statuses and what a person
reads; `python -m memfs` and the `memfs` program run it."""

from ._main import build_parser, main, run

__all__ = ["build_parser", "main", "run"]
