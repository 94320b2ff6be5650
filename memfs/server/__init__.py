"""`memfs serve`: the Memory Store API on SQLite. Imports only `memfs.api`
(and the exception tree) from memfs, so a client bug and a server bug cannot
hide each other in the contract tests.
"""

from __future__ import annotations

from ._app import (
    TOKEN_ENV,
    MemoryStoreApp,
    default_db_path,
    parse_tokens,
    serve,
)

__all__ = [
    "MemoryStoreApp",
    "TOKEN_ENV",
    "default_db_path",
    "parse_tokens",
    "serve",
]
