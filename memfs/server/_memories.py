"""Memories and their versions: path conflicts, the store's cap, preconditions, listings by prefix
and depth, and the feed of versions. A real change writes exactly one version in its own
transaction; a change that changes nothing writes none, whatever its precondition."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any

from .._exceptions import InvalidRequest, NotFound, PathConflict, PreconditionFailed
from ..api import VersionOperation, content_sha256, is_ancestor, normalize_path
from ._sqlite import SQLiteFile, columns, new_id
from ._values import check_content, check_limit, decode_cursor, encode_cursor, time_ordered_page

_BASIC_COLUMNS = (
    "id, store_id, path, NULL AS content, content_sha256, content_size_bytes,"
    " version_id, created_at, updated_at"
)


def memory_json(row: sqlite3.Row, full: bool) -> dict[str, Any]:
    return {
        "id": row["id"],
        "type": "memory",
        "memory_store_id": row["store_id"],
        "path": row["path"],
        "content": row["content"] if full else None,
        **columns(row, "content_sha256", "content_size_bytes"),
        "memory_version_id": row["version_id"],
        **columns(row, "created_at", "updated_at"),
    }


def version_json(row: sqlite3.Row, full: bool) -> dict[str, Any]:
    return {
        "id": row["id"],
        "type": "memory_version",
        "memory_id": row["memory_id"],
        "memory_store_id": row["store_id"],
        **columns(row, "operation", "created_at", "path"),
        "content": row["content"] if full else None,
        **columns(row, "content_sha256", "content_size_bytes"),
        "created_by": json.loads(row["created_by"]) if row["created_by"] else None,
        "redacted_at": row["redacted_at"],
        "redacted_by": json.loads(row["redacted_by"]) if row["redacted_by"] else None,
    }


class Memories:
    """The `memories` and `versions` tables."""

    def __init__(self, db: SQLiteFile, *, max_memories: int) -> None:
        self.db = db
        self.max_memories = max_memories

    def _row(self, table: str, store_id: str, row_id: str) -> sqlite3.Row:
        """A row of `memories` or `versions` in the store; 404 when there is none."""
        what = "memory" if table == "memories" else "memory version"
        return self.db.row(
            f"SELECT * FROM {table} WHERE id = ? AND store_id = ?",
            (row_id, store_id),
            f"no {what} with id {row_id!r} in memory store {store_id}",
        )

    def _check_conflict(self, store_id: str, path: str, moving_id: str | None = None) -> None:
        """409 when `path` is taken, or is an ancestor or descendant of a memory's path."""
        candidates = [path] + [path[:i] for i in range(1, len(path)) if path[i] == "/"]
        row = self.db.one(
            f"SELECT id, path FROM memories WHERE store_id = ? AND id IS NOT ?"
            f" AND path IN ({','.join('?' * len(candidates))}) ORDER BY length(path) LIMIT 1",
            (store_id, moving_id, *candidates),
        )
        if row is None:
            # Descendants of `path` are exactly the paths in [path + "/", path + "0"):
            # "0" is the character right after "/".
            row = self.db.one(
                "SELECT id, path FROM memories WHERE store_id = ? AND id IS NOT ?"
                " AND path >= ? AND path < ? ORDER BY path LIMIT 1",
                (store_id, moving_id, path + "/", path + "0"),
            )
        if row is None:
            return
        other = row["path"]
        if other == path:
            why = f"a memory already exists at {path}"
        elif is_ancestor(other, path):
            why = f"{path} would be inside {other}, which is a memory, not a folder"
        else:
            why = f"{path} is a folder holding the memory {other}"
        raise PathConflict(
            why, extra={"conflicting_memory_id": row["id"], "conflicting_path": other}
        )

    def _add_version(
        self,
        store_id: str,
        memory_id: str,
        operation: VersionOperation,
        actor: dict[str, str],
        now: str,
        path: str,
        state: tuple[str, str, int] | tuple[None, None, None] = (None, None, None),
    ) -> str:
        """Record `operation`, which leaves the memory at `path` holding
        `state` (content, sha, size; none for a delete); the version's id."""
        version_id = new_id("memver")
        self.db.run(
            "INSERT INTO versions (id, store_id, memory_id, operation, created_at, path, content,"
            " content_sha256, content_size_bytes, created_by) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (version_id, store_id, memory_id, operation, now, path, *state, json.dumps(actor)),
        )
        return version_id

    def create(
        self, store_id: str, body: dict[str, Any], actor: dict[str, str], full: bool
    ) -> dict[str, Any]:
        self.db.store(store_id)
        path = normalize_path(body.get("path"))
        if "content" not in body:
            raise InvalidRequest("content is required (it may be the empty string)")
        content, data = check_content(body["content"])
        with self.db.transaction(f"the new memory at {path}"):
            self.db.store(store_id, writable=True)
            count = self.db.one("SELECT count(*) FROM memories WHERE store_id = ?", (store_id,))
            if count is not None and count[0] >= self.max_memories:
                raise InvalidRequest(
                    f"memory store {store_id} is full: it holds at most {self.max_memories} memories"
                )
            self._check_conflict(store_id, path)
            now = self.db.now()
            memory_id = new_id("mem")
            state = (content, content_sha256(data), len(data))
            version_id = self._add_version(
                store_id, memory_id, VersionOperation.CREATED, actor, now, path, state
            )
            self.db.run(
                "INSERT INTO memories (id, store_id, path, content, content_sha256,"
                " content_size_bytes, version_id, created_at, updated_at)"
                " VALUES (?,?,?,?,?,?,?,?,?)",
                (memory_id, store_id, path, *state, version_id, now, now),
            )
            return memory_json(self._row("memories", store_id, memory_id), full)

    def get(self, store_id: str, memory_id: str, full: bool) -> dict[str, Any]:
        """The memory, in one statement: the most frequent request of all."""
        row = self.db.row(
            "SELECT m.* FROM stores AS s LEFT JOIN memories AS m"
            " ON m.id = ? AND m.store_id = s.id WHERE s.id = ?",
            (memory_id, store_id),
            f"no memory store with id {store_id!r}",
        )
        if row["id"] is None:
            raise NotFound(f"no memory with id {memory_id!r} in memory store {store_id}")
        return memory_json(row, full)

    def update(
        self, store_id: str, memory_id: str, body: dict[str, Any], actor: dict[str, str], full: bool
    ) -> dict[str, Any]:
        """Move the memory to `path`, replace its `content`, or both; with a
        precondition, only while the stored content has that sha."""
        self.db.store(store_id)
        self._row("memories", store_id, memory_id)
        if body.get("path") is None and body.get("content") is None:
            raise InvalidRequest("an update needs content or path (or both)")
        new_path = normalize_path(body["path"]) if body.get("path") is not None else None
        new_content = check_content(body["content"]) if body.get("content") is not None else None
        precondition = body.get("precondition")
        if precondition is not None and (
            not isinstance(precondition, dict)
            or precondition.get("type") != "content_sha256"
            or not isinstance(precondition.get("content_sha256"), str)
        ):
            raise InvalidRequest(
                'precondition must be {"type": "content_sha256", "content_sha256": "<hex>"}'
            )
        expected = precondition["content_sha256"].lower() if precondition else None
        with self.db.transaction(f"the change to memory {memory_id}"):
            self.db.store(store_id, writable=True)
            row = self._row("memories", store_id, memory_id)
            path = new_path or row["path"]
            state = (row["content"], row["content_sha256"], row["content_size_bytes"])
            if new_content is not None:
                state = (new_content[0], content_sha256(new_content[1]), len(new_content[1]))
            if path == row["path"] and state[1] == row["content_sha256"]:
                return memory_json(row, full)
            if expected is not None and expected != row["content_sha256"]:
                raise PreconditionFailed(
                    f"memory {memory_id} has content_sha256 {row['content_sha256']}, not {expected}"
                )
            if path != row["path"]:
                self._check_conflict(store_id, path, moving_id=memory_id)
            now = self.db.now()
            version_id = self._add_version(
                store_id, memory_id, VersionOperation.MODIFIED, actor, now, path, state
            )
            self.db.run(
                "UPDATE memories SET path = ?, content = ?, content_sha256 = ?,"
                " content_size_bytes = ?, version_id = ?, updated_at = ? WHERE id = ?",
                (path, *state, version_id, now, memory_id),
            )
            return memory_json(self._row("memories", store_id, memory_id), full)

    def delete(
        self, store_id: str, memory_id: str, expected_sha: str | None, actor: dict[str, str]
    ) -> dict[str, Any]:
        """Delete the memory; an archived store's memories may be deleted too."""
        with self.db.transaction(f"deleting memory {memory_id}"):
            self.db.store(store_id)
            row = self._row("memories", store_id, memory_id)
            if expected_sha is not None and expected_sha.lower() != row["content_sha256"]:
                raise PreconditionFailed(
                    f"memory {memory_id} has content_sha256 {row['content_sha256']},"
                    f" not {expected_sha}"
                )
            now = self.db.now()
            self._add_version(
                store_id, memory_id, VersionOperation.DELETED, actor, now, row["path"]
            )
            self.db.run("DELETE FROM memories WHERE id = ?", (memory_id,))
            return {"id": memory_id, "type": "memory_deleted"}

    def list(
        self, store_id: str, prefix: str, depth: int, full: bool, query: Mapping[str, str]
    ) -> dict[str, Any]:
        """Memories under `prefix` in path order. At depth 1 each subfolder is
        one `memory_prefix` item, in the place its path sorts to; the cursor is
        the last item's path and whether it was a folder."""
        self.db.store(store_id)
        limit = check_limit(query.get("limit"), full)
        start, op = prefix, ">="
        if query.get("page"):
            after, folder = decode_cursor(query["page"], (str, bool))
            if after >= prefix:  # another listing's cursor starts at the prefix
                start, op = (after[:-1] + "0", ">=") if folder else (after, ">")
        columns = "*" if full else _BASIC_COLUMNS
        items: list[dict[str, Any]] = []
        last: list[Any] = []
        while True:
            rows = self.db.all(
                f"SELECT {columns} FROM memories WHERE store_id = ? AND path {op} ? AND path < ?"
                " ORDER BY path LIMIT ?",
                (store_id, start, prefix[:-1] + "0", limit - len(items) + 1),
            )
            for row in rows:
                if len(items) == limit:
                    return {"data": items, "next_page": encode_cursor(last)}
                cut = row["path"].find("/", len(prefix))
                if depth == 1 and cut != -1:
                    # One item for the whole subfolder; the next query starts past it.
                    folder_path = row["path"][: cut + 1]
                    items.append({"type": "memory_prefix", "path": folder_path})
                    last = [folder_path, True]
                    start, op = folder_path[:-1] + "0", ">="
                    break
                items.append(memory_json(row, full))
                last = [row["path"], False]
            else:
                return {"data": items, "next_page": None}

    def list_versions(self, store_id: str, full: bool, query: Mapping[str, str]) -> dict[str, Any]:
        """Versions newest first; every filter the query gives must hold."""
        self.db.store(store_id)
        limit = check_limit(query.get("limit"), full)
        sql = "SELECT * FROM versions WHERE store_id = ?"
        params: list[Any] = [store_id]
        if query.get("operation") and query["operation"] not in tuple(VersionOperation):
            raise InvalidRequest(f"operation must be one of {', '.join(VersionOperation)}")
        for name, column in (
            ("memory_id", "memory_id"),
            ("operation", "operation"),
            ("session_id", "json_extract(created_by, '$.session_id')"),
            ("api_key_id", "json_extract(created_by, '$.api_key_id')"),
            ("service_account_id", "json_extract(created_by, '$.service_account_id')"),
        ):
            if query.get(name):
                sql += f" AND {column} = ?"
                params.append(query[name])
        return time_ordered_page(
            self.db, sql, params, query, limit, lambda r: version_json(r, full), newest_first=True
        )

    def get_version(self, store_id: str, version_id: str, full: bool) -> dict[str, Any]:
        self.db.store(store_id)
        return version_json(self._row("versions", store_id, version_id), full)

    def redact_version(
        self, store_id: str, version_id: str, actor: dict[str, str]
    ) -> dict[str, Any]:
        """Empty the version's content and path once; redacting it again changes nothing."""
        with self.db.transaction(f"redacting version {version_id}"):
            self.db.store(store_id)
            row = self._row("versions", store_id, version_id)
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
                    (self.db.now(), json.dumps(actor), version_id),
                )
            return version_json(self._row("versions", store_id, version_id), True)
