"""`memfs serve`: the Memory Store API on SQLite. Imports only `memfs.api`
(and the exception tree) from memfs, so a client bug and a server bug cannot
hide each other in the contract tests.

- `_serve`: running the server (socket, signals, the demo store);
- `_connections`: what uvicorn leaves to memfs: the client timeouts,
  closing after an unread body, the access log;
- `_app`: the routes (Starlette's router), each one call to a table of the
  database;
  `_session_routes` the session endpoints;
- `_http`: request headers, query values and bodies; JSON answers;
- `_auth`: tokens, grants, what a sessions token reaches, and the actor a
  change is recorded as;
- `_db`: the database, made of `_sqlite` (the file, its one schema,
  clock and transactions), `_stores`, `_memories`, `_versions`
  and `_sessions` (sessions with their resources and tokens), `_pages`
  (limits and cursors) and `_fields` (rules for request values).
"""

from __future__ import annotations

from ._app import MemoryStoreApp
from ._auth import Grant, parse_tokens
from ._serve import TOKEN_ENV, default_db_path, serve

__all__ = [
    "Grant",
    "MemoryStoreApp",
    "TOKEN_ENV",
    "default_db_path",
    "parse_tokens",
    "serve",
]
