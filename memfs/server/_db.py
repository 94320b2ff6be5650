"""The state behind `memfs serve`: one SQLite file holding every store. Every
rule that depends on stored state is checked inside the transaction of the
change it guards.
"""

from __future__ import annotations

from ..api import MAX_MEMORIES
from ._memories import Memories
from ._sessions import Sessions
from ._sqlite import SQLiteFile
from ._stores import Stores


class Database:
    """The file and its tables, whose methods are one transaction each at most."""

    def __init__(self, path: str, *, max_memories: int = MAX_MEMORIES) -> None:
        self.file = SQLiteFile(path)
        self.stores = Stores(self.file)
        self.memories = Memories(self.file, self.stores, max_memories=max_memories)
        self.sessions = Sessions(self.file, self.stores)

    def close(self) -> None:
        self.file.close()
