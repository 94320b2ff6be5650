"""Memory stores: their rows, their life (created, changed, archived,
deleted) and the rule creating or updating a store's memories checks first:
the store exists and is not archived.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from .._exceptions import InvalidRequest
from ._fields import apply_metadata, check_description, check_store_name
from ._pages import check_limit, created_between, decode_cursor, time_ordered_page
from ._sqlite import SQLiteFile, new_id


def store_json(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "type": "memory_store",
        "name": row["name"],
        "description": row["description"],
        "metadata": json.loads(row["metadata"]),
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
        "archived_at": row["archived_at"],
    }


class Stores:
    """The `stores` table. Deleting a store deletes its memories and versions
    in the same transaction, and detaches it from every session."""

    def __init__(self, db: SQLiteFile) -> None:
        self.db = db

    def row(self, store_id: str) -> sqlite3.Row:
        """The store's row; 404 when there is none."""
        return self.db.row(
            "SELECT * FROM stores WHERE id = ?",
            (store_id,),
            f"no memory store with id {store_id!r}",
        )

    def writable(self, store_id: str) -> sqlite3.Row:
        """The store's row; 404 when there is none, 400 when it is archived:
        the rule of creating and updating memories (deleting them and
        redacting versions stay allowed)."""
        row = self.row(store_id)
        if row["archived_at"] is not None:
            raise InvalidRequest(f"memory store {store_id} is archived and cannot be changed")
        return row

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        name = check_store_name(body.get("name"))
        description = check_description(body.get("description"))
        metadata = apply_metadata({}, body.get("metadata"))

        def txn() -> dict[str, Any]:
            now = self.db.now()
            store_id = new_id("memstore")
            self.db.run(
                "INSERT INTO stores (id, name, description, metadata, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (store_id, name, description, json.dumps(metadata), now, now),
            )
            return store_json(self.row(store_id))

        return self.db.write(txn, "the new memory store")

    def get(self, store_id: str) -> dict[str, Any]:
        return store_json(self.row(store_id))

    def list(
        self,
        *,
        limit: Any = None,
        page: str | None = None,
        include_archived: bool = False,
        created_gte: str | None = None,
        created_lte: str | None = None,
        only: frozenset[str] | None = None,
    ) -> dict[str, Any]:
        """Stores in creation order; `created_gte` / `created_lte` bound
        `created_at` (RFC 3339, both ends included); `only` keeps those ids."""
        page_limit = check_limit(limit, False)
        sql = "SELECT * FROM stores WHERE 1"
        params: list[Any] = []
        if not include_archived:
            sql += " AND archived_at IS NULL"
        sql += created_between(created_gte, created_lte, params)
        if page:
            created_at, seq = decode_cursor(page, (str, int))
            sql += " AND (created_at, seq) > (?, ?)"
            params += [created_at, seq]
        if only is not None:
            sql += f" AND id IN ({','.join('?' * len(only))})"
            params += sorted(only)
        sql += " ORDER BY created_at, seq"
        return time_ordered_page(self.db, sql, params, page_limit, store_json)

    def update(self, store_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """Change what the body names; `updated_at` moves only on a real change."""

        def txn() -> dict[str, Any]:
            row = self.writable(store_id)
            name = check_store_name(body["name"]) if "name" in body else row["name"]
            description = (
                check_description(body["description"])
                if "description" in body
                else row["description"]
            )
            metadata = apply_metadata(json.loads(row["metadata"]), body.get("metadata"))
            if (name, description, metadata) != (
                row["name"],
                row["description"],
                json.loads(row["metadata"]),
            ):
                self.db.run(
                    "UPDATE stores SET name = ?, description = ?, metadata = ?, updated_at = ?"
                    " WHERE id = ?",
                    (name, description, json.dumps(metadata), self.db.now(), store_id),
                )
            return store_json(self.row(store_id))

        return self.db.write(txn, f"the change to memory store {store_id}")

    def archive(self, store_id: str) -> dict[str, Any]:
        """Archive the store once; archiving it again changes nothing."""

        def txn() -> dict[str, Any]:
            row = self.row(store_id)
            if row["archived_at"] is None:
                now = self.db.now()
                self.db.run(
                    "UPDATE stores SET archived_at = ?, updated_at = ? WHERE id = ?",
                    (now, now, store_id),
                )
            return store_json(self.row(store_id))

        return self.db.write(txn, f"archiving memory store {store_id}")

    def delete(self, store_id: str) -> dict[str, Any]:
        def txn() -> dict[str, Any]:
            self.row(store_id)
            self.db.run("DELETE FROM versions WHERE store_id = ?", (store_id,))
            self.db.run("DELETE FROM memories WHERE store_id = ?", (store_id,))
            self.db.run("DELETE FROM session_resources WHERE store_id = ?", (store_id,))
            self.db.run("DELETE FROM stores WHERE id = ?", (store_id,))
            return {"id": store_id, "type": "memory_store_deleted"}

        return self.db.write(txn, f"deleting memory store {store_id}")
