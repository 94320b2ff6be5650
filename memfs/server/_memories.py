"""Memories: their rows, the path rules that depend on what else is stored,
the store's cap, preconditions, and listings by prefix and depth.

Every change writes its version in the same transaction, and a change that
changes nothing (same path, same content) writes none and answers the memory
as it is, whatever its precondition.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from .._exceptions import InvalidRequest, NotFound, PathConflict, PreconditionFailed
from ..api import VersionOperation, content_sha256, is_ancestor
from ._fields import check_content, check_path
from ._pages import check_limit, decode_cursor, encode_cursor
from ._sqlite import SQLiteFile, new_id
from ._stores import Stores
from ._versions import Versions

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
        "content_sha256": row["content_sha256"],
        "content_size_bytes": row["content_size_bytes"],
        "memory_version_id": row["version_id"],
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
    }


def _expected_sha(precondition: Any) -> str | None:
    """The content_sha256 an update's `precondition` requires, lowercased."""
    if precondition is None:
        return None
    if (
        not isinstance(precondition, dict)
        or precondition.get("type") != "content_sha256"
        or not isinstance(precondition.get("content_sha256"), str)
    ):
        raise InvalidRequest(
            'precondition must be {"type": "content_sha256", "content_sha256": "<hex>"}'
        )
    expected: str = precondition["content_sha256"]
    return expected.lower()


class Memories:
    """The `memories` table; each change records its version through `versions`."""

    def __init__(
        self, db: SQLiteFile, stores: Stores, versions: Versions, *, max_memories: int
    ) -> None:
        self.db = db
        self.stores = stores
        self.versions = versions
        self.max_memories = max_memories

    def _row(self, store_id: str, memory_id: str) -> sqlite3.Row:
        return self.db.row(
            "SELECT * FROM memories WHERE id = ? AND store_id = ?",
            (memory_id, store_id),
            f"no memory with id {memory_id!r} in memory store {store_id}",
        )

    def _check_conflict(self, store_id: str, path: str, moving_id: str | None = None) -> None:
        """409 when `path` is taken, or is an ancestor or descendant of a memory's path."""
        ancestors = []
        cut = path.find("/", 1)
        while cut != -1:
            ancestors.append(path[:cut])
            cut = path.find("/", cut + 1)
        candidates = [path, *ancestors]
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

    def create(
        self, store_id: str, body: dict[str, Any], actor: dict[str, str] | None, full: bool
    ) -> dict[str, Any]:
        self.stores.row(store_id)
        path = check_path(body.get("path"))
        if "content" not in body:
            raise InvalidRequest("content is required (it may be the empty string)")
        content, data = check_content(body["content"])

        def txn() -> dict[str, Any]:
            self.stores.writable(store_id)
            count_row = self.db.one("SELECT count(*) FROM memories WHERE store_id = ?", (store_id,))
            if count_row is not None and count_row[0] >= self.max_memories:
                raise InvalidRequest(
                    f"memory store {store_id} is full: it holds at most {self.max_memories} memories"
                )
            self._check_conflict(store_id, path)
            now = self.db.now()
            memory_id = new_id("mem")
            state = {
                "path": path,
                "content": content,
                "content_sha256": content_sha256(data),
                "content_size_bytes": len(data),
            }
            version_id = self.versions.add(
                store_id, memory_id, VersionOperation.CREATED, state, actor, now
            )
            self.db.run(
                "INSERT INTO memories (id, store_id, path, content, content_sha256,"
                " content_size_bytes, version_id, created_at, updated_at)"
                " VALUES (?,?,?,?,?,?,?,?,?)",
                (
                    memory_id,
                    store_id,
                    path,
                    content,
                    state["content_sha256"],
                    len(data),
                    version_id,
                    now,
                    now,
                ),
            )
            return memory_json(self._row(store_id, memory_id), full)

        return self.db.write(txn, f"the new memory at {path}")

    def get(self, store_id: str, memory_id: str, full: bool) -> dict[str, Any]:
        """The memory, in one statement: the most frequent request of all."""
        row = self.db.one(
            "SELECT m.* FROM stores AS s LEFT JOIN memories AS m"
            " ON m.id = ? AND m.store_id = s.id WHERE s.id = ?",
            (memory_id, store_id),
        )
        if row is None:
            raise NotFound(f"no memory store with id {store_id!r}")
        if row["id"] is None:
            raise NotFound(f"no memory with id {memory_id!r} in memory store {store_id}")
        return memory_json(row, full)

    def update(
        self,
        store_id: str,
        memory_id: str,
        body: dict[str, Any],
        actor: dict[str, str] | None,
        full: bool,
    ) -> dict[str, Any]:
        """Move the memory to `path`, replace its `content`, or both; with a
        precondition, only while the stored content has that sha."""
        self.stores.row(store_id)
        self._row(store_id, memory_id)
        if body.get("path") is None and body.get("content") is None:
            raise InvalidRequest("an update needs content or path (or both)")
        new_path = check_path(body["path"]) if body.get("path") is not None else None
        new_content: tuple[str, bytes] | None = None
        if body.get("content") is not None:
            new_content = check_content(body["content"])
        expected = _expected_sha(body.get("precondition"))

        def txn() -> dict[str, Any]:
            self.stores.writable(store_id)
            row = self._row(store_id, memory_id)
            path = row["path"] if new_path is None else new_path
            if new_content is None:
                content, sha, size = (
                    row["content"],
                    row["content_sha256"],
                    row["content_size_bytes"],
                )
            else:
                content, data = new_content
                sha, size = content_sha256(data), len(data)
            if path == row["path"] and sha == row["content_sha256"]:
                return memory_json(row, full)
            if expected is not None and expected != row["content_sha256"]:
                raise PreconditionFailed(
                    f"memory {memory_id} has content_sha256 {row['content_sha256']}, not {expected}"
                )
            if path != row["path"]:
                self._check_conflict(store_id, path, moving_id=memory_id)
            now = self.db.now()
            state = {
                "path": path,
                "content": content,
                "content_sha256": sha,
                "content_size_bytes": size,
            }
            version_id = self.versions.add(
                store_id, memory_id, VersionOperation.MODIFIED, state, actor, now
            )
            self.db.run(
                "UPDATE memories SET path = ?, content = ?, content_sha256 = ?,"
                " content_size_bytes = ?, version_id = ?, updated_at = ? WHERE id = ?",
                (path, content, sha, size, version_id, now, memory_id),
            )
            return memory_json(self._row(store_id, memory_id), full)

        return self.db.write(txn, f"the change to memory {memory_id}")

    def delete(
        self,
        store_id: str,
        memory_id: str,
        expected_sha: str | None,
        actor: dict[str, str] | None,
    ) -> dict[str, Any]:
        """Delete the memory; an archived store's memories may be deleted too."""

        def txn() -> dict[str, Any]:
            self.stores.row(store_id)
            row = self._row(store_id, memory_id)
            if expected_sha is not None and expected_sha.lower() != row["content_sha256"]:
                raise PreconditionFailed(
                    f"memory {memory_id} has content_sha256 {row['content_sha256']},"
                    f" not {expected_sha}"
                )
            self.versions.add(
                store_id, memory_id, VersionOperation.DELETED, row, actor, self.db.now()
            )
            self.db.run("DELETE FROM memories WHERE id = ?", (memory_id,))
            return {"id": memory_id, "type": "memory_deleted"}

        return self.db.write(txn, f"deleting memory {memory_id}")

    def list(
        self,
        store_id: str,
        *,
        prefix: str = "/",
        depth: int = 0,
        full: bool = False,
        limit: Any = None,
        page: str | None = None,
    ) -> dict[str, Any]:
        """Memories under `prefix` in path order. At depth 1 each subfolder is
        one `memory_prefix` item, in the place its path sorts to; the cursor is
        the last item's path and whether it was a folder."""
        self.stores.row(store_id)
        page_limit = check_limit(limit, full)
        upper = prefix[:-1] + "0"
        after, after_folder = prefix, False
        inclusive = True
        if page:
            after, after_folder = decode_cursor(page, (str, bool))
            inclusive = False
        columns = "*" if full else _BASIC_COLUMNS
        items: list[dict[str, Any]] = []
        last_key: list[Any] | None = None
        more = False
        while True:
            need = page_limit - len(items)
            if after_folder:
                start, op = after[:-1] + "0", ">="
            else:
                start, op = after, ">=" if inclusive else ">"
            rows = self.db.all(
                f"SELECT {columns} FROM memories WHERE store_id = ? AND path {op} ? AND path < ?"
                " ORDER BY path LIMIT ?",
                (store_id, start, upper, need + 1),
            )
            jumped = False
            for row in rows:
                if len(items) == page_limit:
                    more = True
                    break
                rest = row["path"][len(prefix) :]
                cut = rest.find("/")
                if depth == 1 and cut != -1:
                    folder = prefix + rest[: cut + 1]
                    items.append({"type": "memory_prefix", "path": folder})
                    last_key = [folder, True]
                    after, after_folder, jumped = folder, True, True
                    break
                items.append(memory_json(row, full))
                last_key = [row["path"], False]
                after, after_folder, inclusive = row["path"], False, False
            if more or not jumped:
                break
            if len(items) == page_limit:
                more = self._has_after(store_id, after, after_folder, upper)
                break
        next_page = encode_cursor(last_key) if more and last_key else None
        return {"data": items, "next_page": next_page}

    def _has_after(self, store_id: str, after: str, after_folder: bool, upper: str) -> bool:
        start, op = (after[:-1] + "0", ">=") if after_folder else (after, ">")
        row = self.db.one(
            f"SELECT 1 FROM memories WHERE store_id = ? AND path {op} ? AND path < ? LIMIT 1",
            (store_id, start, upper),
        )
        return row is not None
