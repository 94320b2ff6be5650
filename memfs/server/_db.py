"""The state behind `memfs serve`: stores, memories and their versions in SQLite.

Every rule of the contract that depends on stored state is enforced here, in
one place, inside the same transaction as the change it guards: a real change
writes exactly one version in the transaction that makes it, a no-op writes
nothing. Errors are the `StatusError` subclasses of `_exceptions`, so the HTTP
layer only has to turn them into the error envelope; a write SQLite refuses on
a constraint is rolled back and answered as `Conflict` (409 conflict_error).

The class is synchronous on purpose: each call is a few fast statements on one
connection, and the server runs every request on one trio thread, so writes
are serialised without locks. `BEGIN IMMEDIATE` keeps a second process on the
same file from interleaving.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import secrets
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from .._exceptions import (
    Conflict,
    InvalidPath,
    InvalidRequest,
    NotFound,
    PathConflict,
    PermissionDenied,
    PreconditionFailed,
    RequestTooLarge,
)
from ..api import MAX_CONTENT_BYTES, MAX_MEMORIES, content_sha256, is_ancestor, normalize_path

MAX_STORE_NAME_CHARS = 255
MAX_DESCRIPTION_CHARS = 1024
MAX_METADATA_PAIRS = 16
MAX_METADATA_KEY_CHARS = 64
MAX_METADATA_VALUE_CHARS = 512
MAX_PAGE_LIMIT = 100
MAX_FULL_VIEW_LIMIT = 20
DEFAULT_PAGE_LIMIT = 20
OPERATIONS = ("created", "modified", "deleted")
# Our longest cursor holds a 1,024-byte path; anything much longer is not one of ours.
MAX_CURSOR_CHARS = 4096
# SQLite's INTEGER is a signed 64-bit number; a sequence number is never negative.
MAX_SQLITE_INT = 2**63 - 1

LONE_SURROGATE = re.compile("[\ud800-\udfff]")

_ID_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS stores (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    description TEXT NOT NULL,
    metadata TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    archived_at TEXT
);
CREATE INDEX IF NOT EXISTS stores_by_created ON stores (created_at, seq);
CREATE TABLE IF NOT EXISTS memories (
    id TEXT PRIMARY KEY,
    store_id TEXT NOT NULL,
    path TEXT NOT NULL,
    content TEXT NOT NULL,
    content_sha256 TEXT NOT NULL,
    content_size_bytes INTEGER NOT NULL,
    version_id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (store_id, path)
);
CREATE TABLE IF NOT EXISTS versions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    store_id TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    operation TEXT NOT NULL,
    created_at TEXT NOT NULL,
    path TEXT,
    content TEXT,
    content_sha256 TEXT,
    content_size_bytes INTEGER,
    created_by TEXT,
    redacted_at TEXT,
    redacted_by TEXT
);
CREATE INDEX IF NOT EXISTS versions_by_store ON versions (store_id, created_at, seq);
CREATE INDEX IF NOT EXISTS versions_by_memory ON versions (memory_id, created_at, seq);
"""


def new_id(prefix: str) -> str:
    """`prefix_` plus 24 random base62 characters (about 143 bits)."""
    number = int.from_bytes(secrets.token_bytes(18))
    digits = []
    for _ in range(24):
        number, digit = divmod(number, 62)
        digits.append(_ID_ALPHABET[digit])
    return prefix + "_" + "".join(digits)


def format_timestamp(moment: datetime) -> str:
    """RFC 3339 UTC with microseconds: `2026-11-30T12:00:00.123456Z`.

    The fixed width makes string order the same as time order, which the
    queries rely on."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_timestamp(text: str, name: str) -> str:
    """Any RFC 3339 timestamp, brought to the stored form; 400 when it is not one."""
    try:
        moment = datetime.fromisoformat(text.strip().replace("z", "Z"))
    except ValueError:
        raise InvalidRequest(f"{name} is not an RFC 3339 timestamp: {text!r}")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        return format_timestamp(moment)
    except (OverflowError, ValueError):
        raise InvalidRequest(f"{name} is outside the years 0001 to 9999 in UTC: {text!r}")


def encode_cursor(key: list[Any]) -> str:
    raw = json.dumps(key, separators=(",", ":"), ensure_ascii=False).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _cursor_part(value: Any, kind: type) -> bool:
    """Whether one part of a decoded cursor could have come from `encode_cursor`:
    a bool is not a number here, a number fits SQLite, a string is valid UTF-8."""
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return type(value) is int and 0 <= value <= MAX_SQLITE_INT
    if kind is str:
        return isinstance(value, str) and LONE_SURROGATE.search(value) is None
    return isinstance(value, kind)


def decode_cursor(cursor: str, shape: tuple[type, ...]) -> list[Any]:
    """The sort key a `page` cursor carries; 400 when it is not one of ours
    (too long, not base64 of UTF-8 JSON, nested, or not a list of `shape`)."""
    refusal = InvalidRequest("page is not a cursor this server handed out")
    if len(cursor) > MAX_CURSOR_CHARS:
        raise refusal
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        key = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        raise refusal
    if (
        not isinstance(key, list)
        or len(key) != len(shape)
        or not all(_cursor_part(v, t) for v, t in zip(key, shape, strict=True))
    ):
        raise refusal
    return key


def actor_for(token: str, scheme: str, user: str | None = None) -> dict[str, str]:
    """Who made a change, as versions record it, derived from the token so it
    is stable across restarts and never reveals the token: a token configured
    for a user is a `user_actor` with `user_id` `user_<name>`, whatever the
    scheme; otherwise an x-api-key is an `api_actor` with `api_key_id`
    `apikey_<hash>` and a bearer token a `session_actor` with `session_id`
    `sesn_<hash>`."""
    if user is not None:
        return {"type": "user_actor", "user_id": "user_" + user}
    digest = hashlib.sha256(b"memfs-serve-actor\0" + token.encode()).hexdigest()[:24]
    if scheme == "bearer":
        return {"type": "session_actor", "session_id": "sesn_" + digest}
    return {"type": "api_actor", "api_key_id": "apikey_" + digest}


def _check_content(content: Any) -> tuple[str, bytes]:
    if not isinstance(content, str):
        raise InvalidRequest("content must be a string")
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidRequest("content must be valid UTF-8 (it holds a lone surrogate)")
    if len(data) > MAX_CONTENT_BYTES:
        raise RequestTooLarge(
            f"content is {len(data)} bytes; a memory holds at most {MAX_CONTENT_BYTES} bytes"
        )
    return content, data


def _check_path(path: Any) -> str:
    try:
        return normalize_path(path)
    except InvalidPath as e:
        raise InvalidRequest(str(e))


def _no_control(text: str) -> bool:
    return not any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in text)


def _check_limit(limit: Any, full: bool) -> int:
    """`limit` as sent: None for the default, else ASCII digits (a query value)
    or an int; 400 for anything else, signs, spaces and `_` included."""
    if limit is None:
        limit = DEFAULT_PAGE_LIMIT
    elif isinstance(limit, str):
        if not (limit.isascii() and limit.isdigit() and len(limit) <= 3):
            raise InvalidRequest(f"limit must be an integer from 1 to {MAX_PAGE_LIMIT}")
        limit = int(limit)
    if type(limit) is not int or not 1 <= limit <= MAX_PAGE_LIMIT:
        raise InvalidRequest(f"limit must be an integer from 1 to {MAX_PAGE_LIMIT}")
    return min(limit, MAX_FULL_VIEW_LIMIT) if full else limit


def _make_private_folders(folder: str) -> None:
    """Create `folder` and its missing ancestors 0700, whatever the umask.
    Folders that already exist (or that another process makes meanwhile) are
    left as they are."""
    missing = []
    current = folder
    while not os.path.isdir(current):
        missing.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    for made in reversed(missing):
        try:
            os.mkdir(made, 0o700)
        except FileExistsError:
            continue
        os.chmod(made, 0o700)


def _create_private_file(path: str) -> None:
    """Create an empty `path` 0600, whatever the umask, unless it exists. SQLite
    gives the -wal and -shm files it makes the mode of the database file."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


class Database:
    """One SQLite file holding every store. Methods answer wire-shaped dicts.

    A database file it creates is 0600 (so are its -wal and -shm files), and
    the folders it creates for it are 0700, whatever the umask; an existing
    file or folder keeps its mode."""

    def __init__(self, path: str, *, max_memories: int = MAX_MEMORIES) -> None:
        _make_private_folders(os.path.dirname(os.path.abspath(path)))
        _create_private_file(path)
        self.path = path
        self.max_memories = max_memories
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.conn.row_factory = sqlite3.Row
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute("PRAGMA busy_timeout=10000")
        self.conn.execute("PRAGMA foreign_keys=OFF")
        self.conn.executescript(_SCHEMA)
        row = self.conn.execute(
            "SELECT max(t) FROM (SELECT max(created_at) AS t FROM versions"
            " UNION ALL SELECT max(updated_at) FROM stores)"
        ).fetchone()
        self._last_time = row[0] or ""

    def close(self) -> None:
        self.conn.close()

    # -- plumbing -------------------------------------------------------

    def _now(self) -> str:
        """A timestamp strictly later than any this database handed out before,
        so the version feed orders by time with (almost) no ties."""
        moment = datetime.now(UTC)
        stamp = format_timestamp(moment)
        if stamp <= self._last_time:
            last = datetime.strptime(self._last_time, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
            stamp = format_timestamp(last + timedelta(microseconds=1))
        self._last_time = stamp
        return stamp

    def _begin(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def _write(self, fn, subject: str):
        """Run `fn` in one write transaction: commit on return, roll back on any error.

        SQLite refusing the change on a constraint (something else wrote to
        the file meanwhile, or a trigger or constraint added to it from
        outside) is a 409 `Conflict` naming `subject`: nothing was written,
        and the same change may succeed once read again and retried."""
        self._begin()
        try:
            result = fn()
        except sqlite3.IntegrityError:
            self.conn.execute("ROLLBACK")
            raise Conflict(
                f"{subject} conflicts with another change to the database;"
                " nothing was written, read it again and retry"
            ) from None
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")
        return result

    # -- stores ---------------------------------------------------------

    @staticmethod
    def _store_json(row: sqlite3.Row) -> dict[str, Any]:
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

    def _store_row(self, store_id: str) -> sqlite3.Row:
        row = self.conn.execute("SELECT * FROM stores WHERE id = ?", (store_id,)).fetchone()
        if row is None:
            raise NotFound(f"no memory store with id {store_id!r}")
        return row

    def _writable_store(self, store_id: str) -> sqlite3.Row:
        row = self._store_row(store_id)
        if row["archived_at"] is not None:
            raise InvalidRequest(f"memory store {store_id} is archived and cannot be changed")
        return row

    @staticmethod
    def _check_name(name: Any) -> str:
        if not isinstance(name, str) or not 1 <= len(name) <= MAX_STORE_NAME_CHARS:
            raise InvalidRequest(f"name must be a string of 1 to {MAX_STORE_NAME_CHARS} characters")
        if not _no_control(name):
            raise InvalidRequest("name may not contain control characters")
        return name

    @staticmethod
    def _check_description(description: Any) -> str:
        if description is None:
            return ""
        if not isinstance(description, str) or len(description) > MAX_DESCRIPTION_CHARS:
            raise InvalidRequest(
                f"description must be a string of at most {MAX_DESCRIPTION_CHARS} characters"
            )
        return description

    @staticmethod
    def _apply_metadata(current: dict[str, str], patch: Any) -> dict[str, str]:
        if patch is None:
            return current
        if not isinstance(patch, dict):
            raise InvalidRequest("metadata must be an object of string keys and string values")
        merged = dict(current)
        for key, value in patch.items():
            if not 1 <= len(key) <= MAX_METADATA_KEY_CHARS:
                raise InvalidRequest(
                    f"metadata keys must be 1 to {MAX_METADATA_KEY_CHARS} characters"
                )
            if value is None:
                merged.pop(key, None)
            elif not isinstance(value, str) or len(value) > MAX_METADATA_VALUE_CHARS:
                raise InvalidRequest(
                    f"metadata value of {key!r} must be a string of at most "
                    f"{MAX_METADATA_VALUE_CHARS} characters"
                )
            else:
                merged[key] = value
        if len(merged) > MAX_METADATA_PAIRS:
            raise InvalidRequest(f"metadata holds at most {MAX_METADATA_PAIRS} pairs")
        return merged

    def create_store(self, body: dict[str, Any]) -> dict[str, Any]:
        name = self._check_name(body.get("name"))
        description = self._check_description(body.get("description"))
        metadata = self._apply_metadata({}, body.get("metadata"))

        def txn() -> dict[str, Any]:
            now = self._now()
            store_id = new_id("memstore")
            self.conn.execute(
                "INSERT INTO stores (id, name, description, metadata, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (store_id, name, description, json.dumps(metadata), now, now),
            )
            return self._store_json(self._store_row(store_id))

        return self._write(txn, "the new memory store")

    def get_store(self, store_id: str) -> dict[str, Any]:
        return self._store_json(self._store_row(store_id))

    def list_stores(
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
        `created_at` (RFC 3339, both ends included)."""
        limit = _check_limit(limit, False)
        sql = "SELECT * FROM stores WHERE 1"
        params: list[Any] = []
        if not include_archived:
            sql += " AND archived_at IS NULL"
        if created_gte is not None:
            sql += " AND created_at >= ?"
            params.append(parse_timestamp(created_gte, "created_at[gte]"))
        if created_lte is not None:
            sql += " AND created_at <= ?"
            params.append(parse_timestamp(created_lte, "created_at[lte]"))
        if page:
            created_at, seq = decode_cursor(page, (str, int))
            sql += " AND (created_at, seq) > (?, ?)"
            params += [created_at, seq]
        if only is not None:
            sql += f" AND id IN ({','.join('?' * len(only))})"
            params += sorted(only)
        sql += " ORDER BY created_at, seq"
        return self._time_ordered_page(sql, params, limit, self._store_json)

    def update_store(self, store_id: str, body: dict[str, Any]) -> dict[str, Any]:
        def txn() -> dict[str, Any]:
            row = self._writable_store(store_id)
            name = self._check_name(body["name"]) if "name" in body else row["name"]
            description = (
                self._check_description(body["description"])
                if "description" in body
                else row["description"]
            )
            metadata = self._apply_metadata(json.loads(row["metadata"]), body.get("metadata"))
            if (name, description, metadata) != (
                row["name"],
                row["description"],
                json.loads(row["metadata"]),
            ):
                self.conn.execute(
                    "UPDATE stores SET name = ?, description = ?, metadata = ?, updated_at = ?"
                    " WHERE id = ?",
                    (name, description, json.dumps(metadata), self._now(), store_id),
                )
            return self._store_json(self._store_row(store_id))

        return self._write(txn, f"the change to memory store {store_id}")

    def archive_store(self, store_id: str) -> dict[str, Any]:
        def txn() -> dict[str, Any]:
            row = self._store_row(store_id)
            if row["archived_at"] is None:
                now = self._now()
                self.conn.execute(
                    "UPDATE stores SET archived_at = ?, updated_at = ? WHERE id = ?",
                    (now, now, store_id),
                )
            return self._store_json(self._store_row(store_id))

        return self._write(txn, f"archiving memory store {store_id}")

    def delete_store(self, store_id: str) -> dict[str, Any]:
        def txn() -> dict[str, Any]:
            self._store_row(store_id)
            self.conn.execute("DELETE FROM versions WHERE store_id = ?", (store_id,))
            self.conn.execute("DELETE FROM memories WHERE store_id = ?", (store_id,))
            self.conn.execute("DELETE FROM stores WHERE id = ?", (store_id,))
            return {"id": store_id, "type": "memory_store_deleted"}

        return self._write(txn, f"deleting memory store {store_id}")

    # -- memories -------------------------------------------------------

    @staticmethod
    def _memory_json(row: sqlite3.Row, full: bool) -> dict[str, Any]:
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

    def _memory_row(self, store_id: str, memory_id: str) -> sqlite3.Row:
        row = self.conn.execute(
            "SELECT * FROM memories WHERE id = ? AND store_id = ?", (memory_id, store_id)
        ).fetchone()
        if row is None:
            raise NotFound(f"no memory with id {memory_id!r} in memory store {store_id}")
        return row

    def _check_conflict(self, store_id: str, path: str, moving_id: str | None = None) -> None:
        """409 when `path` is taken, or is an ancestor or descendant of a memory's path."""
        ancestors = []
        cut = path.find("/", 1)
        while cut != -1:
            ancestors.append(path[:cut])
            cut = path.find("/", cut + 1)
        candidates = [path, *ancestors]
        row = self.conn.execute(
            f"SELECT id, path FROM memories WHERE store_id = ? AND id IS NOT ?"
            f" AND path IN ({','.join('?' * len(candidates))}) ORDER BY length(path) LIMIT 1",
            (store_id, moving_id, *candidates),
        ).fetchone()
        if row is None:
            # Descendants of `path` are exactly the paths in [path + "/", path + "0"):
            # "0" is the character right after "/".
            row = self.conn.execute(
                "SELECT id, path FROM memories WHERE store_id = ? AND id IS NOT ?"
                " AND path >= ? AND path < ? ORDER BY path LIMIT 1",
                (store_id, moving_id, path + "/", path + "0"),
            ).fetchone()
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
        operation: str,
        state: sqlite3.Row | dict[str, Any],
        actor: dict[str, str] | None,
        now: str,
    ) -> str:
        version_id = new_id("memver")
        self.conn.execute(
            "INSERT INTO versions (id, store_id, memory_id, operation, created_at, path, content,"
            " content_sha256, content_size_bytes, created_by) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (
                version_id,
                store_id,
                memory_id,
                operation,
                now,
                state["path"],
                state["content"],
                state["content_sha256"],
                state["content_size_bytes"],
                json.dumps(actor) if actor else None,
            ),
        )
        return version_id

    def create_memory(
        self, store_id: str, body: dict[str, Any], actor: dict[str, str] | None, full: bool
    ) -> dict[str, Any]:
        self._store_row(store_id)
        path = _check_path(body.get("path"))
        if "content" not in body:
            raise InvalidRequest("content is required (it may be the empty string)")
        content, data = _check_content(body["content"])

        def txn() -> dict[str, Any]:
            self._writable_store(store_id)
            (count,) = self.conn.execute(
                "SELECT count(*) FROM memories WHERE store_id = ?", (store_id,)
            ).fetchone()
            if count >= self.max_memories:
                raise InvalidRequest(
                    f"memory store {store_id} is full: it holds at most {self.max_memories} memories"
                )
            self._check_conflict(store_id, path)
            now = self._now()
            memory_id = new_id("mem")
            state = {
                "path": path,
                "content": content,
                "content_sha256": content_sha256(data),
                "content_size_bytes": len(data),
            }
            version_id = self._add_version(store_id, memory_id, "created", state, actor, now)
            self.conn.execute(
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
            return self._memory_json(self._memory_row(store_id, memory_id), full)

        return self._write(txn, f"the new memory at {path}")

    def get_memory(self, store_id: str, memory_id: str, full: bool) -> dict[str, Any]:
        self._store_row(store_id)
        return self._memory_json(self._memory_row(store_id, memory_id), full)

    def update_memory(
        self,
        store_id: str,
        memory_id: str,
        body: dict[str, Any],
        actor: dict[str, str] | None,
        full: bool,
    ) -> dict[str, Any]:
        self._store_row(store_id)
        self._memory_row(store_id, memory_id)
        if body.get("path") is None and body.get("content") is None:
            raise InvalidRequest("an update needs content or path (or both)")
        new_path = _check_path(body["path"]) if body.get("path") is not None else None
        new_content = data = None
        if body.get("content") is not None:
            new_content, data = _check_content(body["content"])
        expected = None
        precondition = body.get("precondition")
        if precondition is not None:
            if (
                not isinstance(precondition, dict)
                or precondition.get("type") != "content_sha256"
                or not isinstance(precondition.get("content_sha256"), str)
            ):
                raise InvalidRequest(
                    'precondition must be {"type": "content_sha256", "content_sha256": "<hex>"}'
                )
            expected = precondition["content_sha256"].lower()

        def txn() -> dict[str, Any]:
            self._writable_store(store_id)
            row = self._memory_row(store_id, memory_id)
            path = row["path"] if new_path is None else new_path
            if new_content is None:
                content, sha, size = (
                    row["content"],
                    row["content_sha256"],
                    row["content_size_bytes"],
                )
            else:
                content, sha, size = new_content, content_sha256(data), len(data)
            if path == row["path"] and sha == row["content_sha256"]:
                return self._memory_json(row, full)
            if expected is not None and expected != row["content_sha256"]:
                raise PreconditionFailed(
                    f"memory {memory_id} has content_sha256 {row['content_sha256']}, not {expected}"
                )
            if path != row["path"]:
                self._check_conflict(store_id, path, moving_id=memory_id)
            now = self._now()
            state = {
                "path": path,
                "content": content,
                "content_sha256": sha,
                "content_size_bytes": size,
            }
            version_id = self._add_version(store_id, memory_id, "modified", state, actor, now)
            self.conn.execute(
                "UPDATE memories SET path = ?, content = ?, content_sha256 = ?,"
                " content_size_bytes = ?, version_id = ?, updated_at = ? WHERE id = ?",
                (path, content, sha, size, version_id, now, memory_id),
            )
            return self._memory_json(self._memory_row(store_id, memory_id), full)

        return self._write(txn, f"the change to memory {memory_id}")

    def delete_memory(
        self,
        store_id: str,
        memory_id: str,
        expected_sha: str | None,
        actor: dict[str, str] | None,
    ) -> dict[str, Any]:
        def txn() -> dict[str, Any]:
            self._store_row(store_id)
            row = self._memory_row(store_id, memory_id)
            self._writable_store(store_id)
            if expected_sha is not None and expected_sha.lower() != row["content_sha256"]:
                raise PreconditionFailed(
                    f"memory {memory_id} has content_sha256 {row['content_sha256']},"
                    f" not {expected_sha}"
                )
            self._add_version(store_id, memory_id, "deleted", row, actor, self._now())
            self.conn.execute("DELETE FROM memories WHERE id = ?", (memory_id,))
            return {"id": memory_id, "type": "memory_deleted"}

        return self._write(txn, f"deleting memory {memory_id}")

    def list_memories(
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
        self._store_row(store_id)
        limit = _check_limit(limit, full)
        upper = prefix[:-1] + "0"
        after, after_folder = prefix, False
        inclusive = True
        if page:
            after, after_folder = decode_cursor(page, (str, bool))
            inclusive = False
        columns = (
            "*"
            if full
            else (
                "id, store_id, path, NULL AS content, content_sha256, content_size_bytes,"
                " version_id, created_at, updated_at"
            )
        )
        items: list[dict[str, Any]] = []
        last_key: list[Any] | None = None
        more = False
        while True:
            need = limit - len(items)
            if after_folder:
                start, op = after[:-1] + "0", ">="
            else:
                start, op = after, ">=" if inclusive else ">"
            rows = self.conn.execute(
                f"SELECT {columns} FROM memories WHERE store_id = ? AND path {op} ? AND path < ?"
                " ORDER BY path LIMIT ?",
                (store_id, start, upper, need + 1),
            ).fetchall()
            jumped = False
            for row in rows:
                if len(items) == limit:
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
                items.append(self._memory_json(row, full))
                last_key = [row["path"], False]
                after, after_folder, inclusive = row["path"], False, False
            if more or not jumped:
                break
            if len(items) == limit:
                more = self._has_after(store_id, after, after_folder, upper)
                break
        next_page = encode_cursor(last_key) if more and last_key else None
        return {"data": items, "next_page": next_page}

    def _has_after(self, store_id: str, after: str, after_folder: bool, upper: str) -> bool:
        start, op = (after[:-1] + "0", ">=") if after_folder else (after, ">")
        row = self.conn.execute(
            f"SELECT 1 FROM memories WHERE store_id = ? AND path {op} ? AND path < ? LIMIT 1",
            (store_id, start, upper),
        ).fetchone()
        return row is not None

    # -- versions -------------------------------------------------------

    def _time_ordered_page(
        self, sql: str, params: list[Any], limit: int, to_json: Callable[[sqlite3.Row], dict]
    ) -> dict[str, Any]:
        """Run a keyset query ordered by (created_at, seq) with one row more than
        `limit`: that extra row says whether a next page exists."""
        rows = self.conn.execute(sql + " LIMIT ?", [*params, limit + 1]).fetchall()
        next_page = None
        if len(rows) > limit:
            rows = rows[:limit]
            next_page = encode_cursor([rows[-1]["created_at"], rows[-1]["seq"]])
        return {"data": [to_json(r) for r in rows], "next_page": next_page}

    @staticmethod
    def _version_json(row: sqlite3.Row, full: bool) -> dict[str, Any]:
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

    def _version_row(self, store_id: str, version_id: str) -> sqlite3.Row:
        row = self.conn.execute(
            "SELECT * FROM versions WHERE id = ? AND store_id = ?", (version_id, store_id)
        ).fetchone()
        if row is None:
            raise NotFound(f"no memory version with id {version_id!r} in memory store {store_id}")
        return row

    def list_versions(
        self,
        store_id: str,
        *,
        memory_id: str | None = None,
        operation: str | None = None,
        created_gte: str | None = None,
        created_lte: str | None = None,
        session_id: str | None = None,
        api_key_id: str | None = None,
        full: bool = False,
        limit: Any = None,
        page: str | None = None,
    ) -> dict[str, Any]:
        """Versions newest first, ordered by (created_at, seq) descending.
        `session_id` and `api_key_id` keep the versions whose `created_by`
        carries that id; every filter given must hold."""
        self._store_row(store_id)
        limit = _check_limit(limit, full)
        sql = "SELECT * FROM versions WHERE store_id = ?"
        params: list[Any] = [store_id]
        if memory_id is not None:
            sql += " AND memory_id = ?"
            params.append(memory_id)
        if operation is not None:
            if operation not in OPERATIONS:
                raise InvalidRequest("operation must be one of created, modified, deleted")
            sql += " AND operation = ?"
            params.append(operation)
        if created_gte is not None:
            sql += " AND created_at >= ?"
            params.append(parse_timestamp(created_gte, "created_at[gte]"))
        if created_lte is not None:
            sql += " AND created_at <= ?"
            params.append(parse_timestamp(created_lte, "created_at[lte]"))
        for field, value in (("session_id", session_id), ("api_key_id", api_key_id)):
            if value is not None:
                sql += f" AND json_extract(created_by, '$.{field}') = ?"
                params.append(value)
        if page:
            created_at, seq = decode_cursor(page, (str, int))
            sql += " AND (created_at, seq) < (?, ?)"
            params += [created_at, seq]
        sql += " ORDER BY created_at DESC, seq DESC"
        return self._time_ordered_page(sql, params, limit, lambda r: self._version_json(r, full))

    def get_version(self, store_id: str, version_id: str, full: bool) -> dict[str, Any]:
        self._store_row(store_id)
        return self._version_json(self._version_row(store_id, version_id), full)

    def redact_version(
        self, store_id: str, version_id: str, actor: dict[str, str] | None
    ) -> dict[str, Any]:
        def txn() -> dict[str, Any]:
            self._writable_store(store_id)
            row = self._version_row(store_id, version_id)
            head = self.conn.execute(
                "SELECT 1 FROM memories WHERE id = ? AND version_id = ?",
                (row["memory_id"], version_id),
            ).fetchone()
            if head is not None:
                raise InvalidRequest(
                    f"version {version_id} is the current content of memory {row['memory_id']};"
                    " change or delete the memory before redacting it"
                )
            if row["redacted_at"] is None:
                self.conn.execute(
                    "UPDATE versions SET content = NULL, path = NULL, content_sha256 = NULL,"
                    " content_size_bytes = NULL, redacted_at = ?, redacted_by = ? WHERE id = ?",
                    (self._now(), json.dumps(actor) if actor else None, version_id),
                )
            return self._version_json(self._version_row(store_id, version_id), True)

        return self._write(txn, f"redacting version {version_id}")


def check_store_access(store_id: str, allowed: frozenset[str] | None) -> None:
    """403 when a token restricted to some stores reaches for another."""
    if allowed is not None and store_id not in allowed:
        raise PermissionDenied(f"these credentials may not use memory store {store_id}")
