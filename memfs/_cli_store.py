"""`memfs store`: a small client for people and demos (owned by the client work)."""

from __future__ import annotations

import argparse


def setup(p: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    raise NotImplementedError
