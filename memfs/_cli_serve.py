"""`memfs serve`: the Memory Store API on SQLite (owned by the server work)."""

from __future__ import annotations

import argparse


def setup(p: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    raise NotImplementedError
