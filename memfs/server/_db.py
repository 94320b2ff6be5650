"""The state behind `memfs serve`: stores, memories and their versions in SQLite.

Every rule of the contract that depends on stored state is enforced in the
tables' classes, inside the same transaction as the change it guards: a real
change writes exactly one version in the transaction that makes it, a no-op
writes nothing. Errors are the `StatusError` subclasses of `_exceptions`, so
the HTTP layer only has to turn them into the error envelope; a write SQLite
refuses on a constraint is rolled back and answered as `Conflict` (409
conflict_error).

The parts: `_sqlite` (the file, its schema, clock and transactions),
`_stores`, `_memories` and `_versions` (one table each, answering
wire-shaped dicts), `_sessions` (sessions, their resources and tokens), `_pages` (limits and cursors) and `_fields` (the rules
for request values).
"""

from __future__ import annotations

from ..api import MAX_MEMORIES
from ._memories import Memories
from ._sessions import Sessions
from ._sqlite import SQLiteFile
from ._stores import Stores
from ._versions import Versions


class Database:
    """One SQLite file holding every store: `stores`, `memories`,
    `versions` and `sessions`, whose methods are one transaction each at most."""

    def __init__(self, path: str, *, max_memories: int = MAX_MEMORIES) -> None:
        self.file = SQLiteFile(path)
        self.stores = Stores(self.file)
        self.versions = Versions(self.file, self.stores)
        self.memories = Memories(self.file, self.stores, self.versions, max_memories=max_memories)
        self.sessions = Sessions(self.file, self.stores)

    def close(self) -> None:
        self.file.close()
