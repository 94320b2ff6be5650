"""The state behind `memfs serve`: one SQLite file holding every store, and the stores' own table.
Every rule that depends on stored state is checked inside the transaction of the change it guards.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any

from ..api import MAX_MEMORIES
from ._memories import Memories
from ._sessions import Sessions
from ._sqlite import SQLiteFile, columns, new_id
from ._values import (
    apply_metadata,
    check_description,
    check_limit,
    check_store_name,
    time_ordered_page,
)


def store_json(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "type": "memory_store",
        **columns(row, "name", "description"),
        "metadata": json.loads(row["metadata"]),
        **columns(row, "created_at", "updated_at", "archived_at"),
    }


class Stores:
    """The `stores` table."""

    def __init__(self, db: SQLiteFile) -> None:
        self.db = db

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        name = check_store_name(body.get("name"))
        description = check_description(body.get("description"))
        metadata = apply_metadata({}, body.get("metadata"))
        with self.db.transaction("the new memory store"):
            store_id, now = new_id("memstore"), self.db.now()
            self.db.run(
                "INSERT INTO stores (id, name, description, metadata, created_at, updated_at)"
                " VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
                (store_id, name, description, json.dumps(metadata), now),
            )
            return store_json(self.db.store(store_id))

    def get(self, store_id: str) -> dict[str, Any]:
        return store_json(self.db.store(store_id))

    def list(
        self, query: Mapping[str, str], include_archived: bool, only: frozenset[str] | None
    ) -> dict[str, Any]:
        """Stores in creation order, as the query asks; `only` keeps those ids."""
        limit = check_limit(query.get("limit"), False)
        sql = "SELECT * FROM stores WHERE 1"
        params: list[Any] = []
        if not include_archived:
            sql += " AND archived_at IS NULL"
        if only is not None:
            sql += f" AND id IN ({','.join('?' * len(only))})"
            params += sorted(only)
        return time_ordered_page(self.db, sql, params, query, limit, store_json)

    def update(self, store_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """Change what the body names; `updated_at` moves only on a real change."""
        with self.db.transaction(f"the change to memory store {store_id}"):
            row = self.db.store(store_id, writable=True)
            old = (row["name"], row["description"], json.loads(row["metadata"]))
            new = (
                check_store_name(body["name"]) if "name" in body else old[0],
                check_description(body["description"]) if "description" in body else old[1],
                apply_metadata(old[2], body.get("metadata")),
            )
            if new != old:
                self.db.run(
                    "UPDATE stores SET name = ?, description = ?, metadata = ?, updated_at = ?"
                    " WHERE id = ?",
                    (new[0], new[1], json.dumps(new[2]), self.db.now(), store_id),
                )
            return store_json(self.db.store(store_id))

    def archive(self, store_id: str) -> dict[str, Any]:
        """Archive the store once; archiving it again changes nothing."""
        with self.db.transaction(f"archiving memory store {store_id}"):
            if self.db.store(store_id)["archived_at"] is None:
                now = self.db.now()
                self.db.run(
                    "UPDATE stores SET archived_at = ?, updated_at = ? WHERE id = ?",
                    (now, now, store_id),
                )
            return store_json(self.db.store(store_id))

    def delete(self, store_id: str) -> dict[str, Any]:
        """Delete the store with its memories and versions, and detach it from every session."""
        with self.db.transaction(f"deleting memory store {store_id}"):
            self.db.store(store_id)
            self.db.run("DELETE FROM versions WHERE store_id = ?", (store_id,))
            self.db.run("DELETE FROM memories WHERE store_id = ?", (store_id,))
            self.db.run("DELETE FROM session_resources WHERE store_id = ?", (store_id,))
            self.db.run("DELETE FROM stores WHERE id = ?", (store_id,))
            return {"id": store_id, "type": "memory_store_deleted"}


class Database:
    """The file and its tables, whose methods are one transaction each at most."""

    def __init__(self, path: str, *, max_memories: int = MAX_MEMORIES) -> None:
        self.file = SQLiteFile(path)
        self.stores = Stores(self.file)
        self.memories = Memories(self.file, max_memories=max_memories)
        self.sessions = Sessions(self.file)

    def close(self) -> None:
        self.file.conn.close()
