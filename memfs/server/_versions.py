"""Memory versions: the record of every change, newest first, and redaction.

A version is written by the memory change it records, in that change's
transaction (`Versions.add`); a no-op writes none. A `deleted` version keeps
the path the memory had and no content (`content`, `content_sha256` and
`content_size_bytes` are null, as the SDK documents). Redaction empties a
version's content and path but keeps the row, so the feed never loses its
place; the current version of a memory cannot be redacted; an archived
store's versions can still be redacted.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any

from .._exceptions import InvalidRequest
from ..api import VersionOperation
from ._pages import check_limit, created_between, decode_cursor, time_ordered_page
from ._sqlite import SQLiteFile, new_id
from ._stores import Stores

# The ids a version's `created_by` may be filtered by.
_ACTOR_ID_FIELDS = ("session_id", "api_key_id", "service_account_id")


def version_json(row: sqlite3.Row, full: bool) -> dict[str, Any]:
    return {
        "id": row["id"],
        "type": "memory_version",
        "memory_id": row["memory_id"],
        "memory_store_id": row["store_id"],
        "operation": row["operation"],
        "created_at": row["created_at"],
        "path": row["path"],
        "content": row["content"] if full else None,
        "content_sha256": row["content_sha256"],
        "content_size_bytes": row["content_size_bytes"],
        "created_by": json.loads(row["created_by"]) if row["created_by"] else None,
        "redacted_at": row["redacted_at"],
        "redacted_by": json.loads(row["redacted_by"]) if row["redacted_by"] else None,
    }


class Versions:
    """The `versions` table."""

    def __init__(self, db: SQLiteFile, stores: Stores) -> None:
        self.db = db
        self.stores = stores

    def add(
        self,
        store_id: str,
        memory_id: str,
        operation: VersionOperation,
        state: sqlite3.Row | Mapping[str, Any],
        actor: dict[str, str] | None,
        now: str,
    ) -> str:
        """Record `operation` on the memory, which leaves it in `state` (its
        path and content; a delete keeps only the path); to be called inside
        the change's transaction."""
        version_id = new_id("memver")
        deleted = operation == VersionOperation.DELETED
        self.db.run(
            "INSERT INTO versions (id, store_id, memory_id, operation, created_at, path, content,"
            " content_sha256, content_size_bytes, created_by) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (
                version_id,
                store_id,
                memory_id,
                operation.value,
                now,
                state["path"],
                None if deleted else state["content"],
                None if deleted else state["content_sha256"],
                None if deleted else state["content_size_bytes"],
                json.dumps(actor) if actor else None,
            ),
        )
        return version_id

    def _row(self, store_id: str, version_id: str) -> sqlite3.Row:
        return self.db.row(
            "SELECT * FROM versions WHERE id = ? AND store_id = ?",
            (version_id, store_id),
            f"no memory version with id {version_id!r} in memory store {store_id}",
        )

    def list(
        self,
        store_id: str,
        *,
        memory_id: str | None = None,
        operation: str | None = None,
        created_gte: str | None = None,
        created_lte: str | None = None,
        session_id: str | None = None,
        api_key_id: str | None = None,
        service_account_id: str | None = None,
        full: bool = False,
        limit: Any = None,
        page: str | None = None,
    ) -> dict[str, Any]:
        """Versions newest first, ordered by (created_at, seq) descending.
        `session_id`, `api_key_id` and `service_account_id` keep the versions
        whose `created_by` carries that id; every filter given must hold."""
        self.stores.row(store_id)
        page_limit = check_limit(limit, full)
        sql = "SELECT * FROM versions WHERE store_id = ?"
        params: list[Any] = [store_id]
        if memory_id is not None:
            sql += " AND memory_id = ?"
            params.append(memory_id)
        if operation is not None:
            if operation not in tuple(VersionOperation):
                raise InvalidRequest(f"operation must be one of {', '.join(VersionOperation)}")
            sql += " AND operation = ?"
            params.append(operation)
        sql += created_between(created_gte, created_lte, params)
        actor_ids = (session_id, api_key_id, service_account_id)
        for field, value in zip(_ACTOR_ID_FIELDS, actor_ids, strict=True):
            if value is not None:
                sql += f" AND json_extract(created_by, '$.{field}') = ?"
                params.append(value)
        if page:
            created_at, seq = decode_cursor(page, (str, int))
            sql += " AND (created_at, seq) < (?, ?)"
            params += [created_at, seq]
        sql += " ORDER BY created_at DESC, seq DESC"
        return time_ordered_page(self.db, sql, params, page_limit, lambda r: version_json(r, full))

    def get(self, store_id: str, version_id: str, full: bool) -> dict[str, Any]:
        self.stores.row(store_id)
        return version_json(self._row(store_id, version_id), full)

    def redact(
        self, store_id: str, version_id: str, actor: dict[str, str] | None
    ) -> dict[str, Any]:
        """Empty the version's content and path once; redacting it again changes nothing."""

        def txn() -> dict[str, Any]:
            self.stores.row(store_id)
            row = self._row(store_id, version_id)
            head = self.db.one(
                "SELECT 1 FROM memories WHERE id = ? AND version_id = ?",
                (row["memory_id"], version_id),
            )
            if head is not None:
                raise InvalidRequest(
                    f"version {version_id} is the current content of memory {row['memory_id']};"
                    " change or delete the memory before redacting it"
                )
            if row["redacted_at"] is None:
                self.db.run(
                    "UPDATE versions SET content = NULL, path = NULL, content_sha256 = NULL,"
                    " content_size_bytes = NULL, redacted_at = ?, redacted_by = ? WHERE id = ?",
                    (self.db.now(), json.dumps(actor) if actor else None, version_id),
                )
            return version_json(self._row(store_id, version_id), True)

        return self.db.write(txn, f"redacting version {version_id}")
