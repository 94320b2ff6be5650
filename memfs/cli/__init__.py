"""The `memfs` command: argument parsing, exit statuses and what a person
reads. Nothing imports this package.
"""

from __future__ import annotations

from ._main import (
    build_parser,
    main,
)

__all__ = [
    "build_parser",
    "main",
]
