"""`memfs serve`: the Memory Store API on SQLite (docs/serve.md). Imports only `memfs.api` (and the
exception tree) from memfs, so that a client bug and a server bug cannot hide each other in the
contract tests."""

from __future__ import annotations

from ._app import MemoryStoreApp
from ._auth import Grant, parse_tokens
from ._serve import default_db_path, serve

__all__ = ["Grant", "MemoryStoreApp", "default_db_path", "parse_tokens", "serve"]
