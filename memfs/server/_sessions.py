"""Sessions, their resources (memory stores) and their tokens, so that a worker's whole flow runs
against one `memfs serve`. A token is answered once, when its session is created; the file keeps
only its SHA-256, and it stops working when the session is deleted."""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .._exceptions import InvalidRequest
from ..api import ACCESS_READ_ONLY, ACCESS_READ_WRITE, MAX_STORES_PER_SESSION, ActorType, slugify
from ._auth import Caller
from ._sqlite import SQLiteFile, columns, new_id
from ._values import apply_metadata, check_limit, decode_cursor, encode_cursor

SESSIONS_TOKEN_PREFIX = "memfs_sesstok_"
"""Not `sk-ant-api`, so that memfs's own client sends it as `Authorization:
Bearer`, the one header it is taken in."""

DEFAULT_ENVIRONMENT_ID = "env_memfs_serve"
DEFAULT_AGENT_ID = "agent_memfs_serve"
MOUNT_ROOT = "/mnt/memory"
MAX_INSTRUCTIONS_CHARS = 4096
MAX_TITLE_CHARS = 512
MAX_MOUNT_PATH_BYTES = 4096
MAX_RESOURCES_PAGE = 1000
SESSION_STATUSES = ("rescheduling", "running", "idle", "terminated")


def token_sha256(token: str) -> str:
    """How a sessions token is kept (it holds 256 random bits: no salt is needed)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def resource_json(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "type": "memory_store",
        "memory_store_id": row["store_id"],
        **columns(row, "access", "name", "description", "instructions", "mount_path"),
        **columns(row, "created_at", "updated_at"),
    }


def _agent_json(agent: Any) -> dict[str, Any]:
    """The agent the SDK's session type requires: memfs serve runs none, so
    it keeps the id (and version) the request named and empty values."""
    agent_id, version = DEFAULT_AGENT_ID, 1
    if isinstance(agent, str) and agent:
        agent_id = agent
    elif isinstance(agent, dict):
        if isinstance(agent.get("id"), str) and agent["id"]:
            agent_id = agent["id"]
        if type(agent.get("version")) is int:
            version = agent["version"]
    return {
        "type": "agent",
        "id": agent_id,
        "version": version,
        "name": "memfs serve",
        "description": None,
        "system": None,
        "model": {"id": "memfs-serve"},
        "tools": [],
        "skills": [],
        "mcp_servers": [],
        "execution_identity": {"type": "service_account"},
        "multiagent": None,
    }


def _optional_text(body: Mapping[str, Any], key: str, limit: int, where: str) -> str | None:
    value = body.get(key)
    if value is not None and (not isinstance(value, str) or len(value) > limit):
        raise InvalidRequest(f"{where}{key} must be a string of at most {limit} characters")
    return value


def _check_mount_path(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if (
        not isinstance(value, str)
        or not value.startswith("/")
        or len(value.encode("utf-8", "surrogatepass")) > MAX_MOUNT_PATH_BYTES
        or any(ord(c) < 32 or ord(c) == 0x7F for c in value)
        or any(part in (".", "..") for part in value.split("/"))
    ):
        raise InvalidRequest(
            f"{where}mount_path must be an absolute path without '.' or '..' segments"
            f" or control characters, at most {MAX_MOUNT_PATH_BYTES} bytes"
        )
    return value.rstrip("/") or "/"


def _same_path(mount_path: str) -> str:
    """The form two mount paths are compared in: repeated slashes are one."""
    return "/" + "/".join(part for part in mount_path.split("/") if part)


@dataclass(frozen=True)
class _Attach:
    """One memory store a request asks to attach."""

    store_id: str
    access: str
    instructions: str | None
    mount_path: str | None


def _parse_attach(item: Any, where: str) -> _Attach:
    if not isinstance(item, dict):
        raise InvalidRequest(f"{where.rstrip(': ')} must be an object")
    if item.get("type") != "memory_store":
        raise InvalidRequest(
            f"{where}type must be memory_store: memfs serve attaches memory stores only"
        )
    store_id = item.get("memory_store_id")
    if not isinstance(store_id, str) or not store_id:
        raise InvalidRequest(f"{where}memory_store_id is required")
    access = ACCESS_READ_WRITE if item.get("access") is None else item["access"]
    if access not in (ACCESS_READ_WRITE, ACCESS_READ_ONLY):
        raise InvalidRequest(f"{where}access must be read_write or read_only")
    instructions = _optional_text(item, "instructions", MAX_INSTRUCTIONS_CHARS, where)
    return _Attach(store_id, access, instructions, _check_mount_path(item.get("mount_path"), where))


class Sessions:
    """The `sessions` and `session_resources` tables."""

    def __init__(self, db: SQLiteFile) -> None:
        self.db = db

    def caller_for(self, token: str) -> Caller | None:
        """The caller a sessions token is, reaching its session's stores as
        they are attached now; None when no live session has it."""
        rows = self.db.all(
            "SELECT s.id AS session_id, r.store_id, r.access FROM sessions AS s"
            " LEFT JOIN session_resources AS r ON r.session_id = s.id"
            " WHERE s.token_sha256 = ?",
            (token_sha256(token),),
        )
        if not rows:
            return None
        stores = frozenset(r["store_id"] for r in rows if r["store_id"] is not None)
        read_only = frozenset(r["store_id"] for r in rows if r["access"] == ACCESS_READ_ONLY)
        actor = {"type": ActorType.SESSION.value, "session_id": rows[0]["session_id"]}
        return Caller(actor, stores, rows[0]["session_id"], read_only)

    def _row(self, session_id: str) -> sqlite3.Row:
        missing = f"no session with id {session_id!r}"
        return self.db.row("SELECT * FROM sessions WHERE id = ?", (session_id,), missing)

    def _resource_rows(self, session_id: str) -> list[sqlite3.Row]:
        return self.db.all(
            "SELECT * FROM session_resources WHERE session_id = ? ORDER BY seq", (session_id,)
        )

    def get(self, session_id: str) -> dict[str, Any]:
        row = self._row(session_id)
        started = datetime.strptime(row["created_at"], "%Y-%m-%dT%H:%M:%S.%fZ")
        duration = (datetime.now(UTC) - started.replace(tzinfo=UTC)).total_seconds()
        return {
            "id": row["id"],
            "type": "session",
            **columns(row, "status", "title", "environment_id"),
            "metadata": json.loads(row["metadata"]),
            "resources": [resource_json(r) for r in self._resource_rows(session_id)],
            "agent": _agent_json({"id": row["agent_id"]}),
            "vault_ids": [],
            "outcome_evaluations": [],
            "stats": {"active_seconds": 0.0, "duration_seconds": max(0.0, round(duration, 3))},
            "usage": {"input_tokens": 0, "output_tokens": 0, "cache_read_input_tokens": 0},
            "budget": None,
            "deployment_id": None,
            "archived_at": None,
            **columns(row, "created_at", "updated_at"),
        }

    def creator_and_stores(self, session_id: str) -> tuple[str | None, list[str]]:
        """The `token_id` of the token that created the session, and its stores."""
        row = self._row(session_id)
        return row["created_by_token"], [r["store_id"] for r in self._resource_rows(session_id)]

    def create(
        self, body: dict[str, Any], check_store: Callable[[str], None], created_by: str | None
    ) -> tuple[dict[str, Any], str]:
        """A new session holding the resources asked for, recorded as created by
        the token whose `token_id` is `created_by`; its JSON and its token."""
        raw = [] if body.get("resources") is None else body["resources"]
        if not isinstance(raw, list):
            raise InvalidRequest("resources must be an array")
        if len(raw) > MAX_STORES_PER_SESSION:
            raise InvalidRequest(f"a session holds at most {MAX_STORES_PER_SESSION} memory stores")
        wanted = [_parse_attach(item, f"resources[{i}].") for i, item in enumerate(raw)]
        environment_id = body.get("environment_id")
        environment_id = DEFAULT_ENVIRONMENT_ID if environment_id is None else environment_id
        if not isinstance(environment_id, str) or not environment_id:
            raise InvalidRequest("environment_id must be a non-empty string")
        title = _optional_text(body, "title", MAX_TITLE_CHARS, "")
        metadata = json.dumps(apply_metadata({}, body.get("metadata")))
        agent_id = _agent_json(body.get("agent"))["id"]
        for attach in wanted:
            check_store(attach.store_id)
        token = SESSIONS_TOKEN_PREFIX + secrets.token_urlsafe(32)
        digest = token_sha256(token)
        with self.db.transaction("the new session"):
            now = self.db.now()
            session_id = new_id("sesn")
            self.db.run(
                "INSERT INTO sessions (id, token_sha256, environment_id, title, metadata, agent_id,"
                " created_at, updated_at, created_by_token) VALUES (?1,?2,?3,?4,?5,?6,?7,?7,?8)",
                (session_id, digest, environment_id, title, metadata, agent_id, now, created_by),
            )
            for i, attach in enumerate(wanted):
                self._attach(session_id, attach, now, f"resources[{i}]: ")
            return self.get(session_id), token

    def set_status(self, session_id: str, body: dict[str, Any]) -> dict[str, Any]:
        status = body.get("status")
        if status not in SESSION_STATUSES:
            raise InvalidRequest(f"status must be one of {', '.join(SESSION_STATUSES)}")
        with self.db.transaction(f"setting the status of session {session_id}"):
            self._row(session_id)
            self.db.run(
                "UPDATE sessions SET status = ?, updated_at = ? WHERE id = ?",
                (status, self.db.now(), session_id),
            )
            return self.get(session_id)

    def delete(self, session_id: str) -> dict[str, Any]:
        with self.db.transaction(f"deleting session {session_id}"):
            self._row(session_id)
            self.db.run("DELETE FROM session_resources WHERE session_id = ?", (session_id,))
            self.db.run("DELETE FROM sessions WHERE id = ?", (session_id,))
            return {"id": session_id, "type": "session_deleted"}

    def _attach(self, session_id: str, attach: _Attach, now: str, where: str) -> str:
        """Insert one resource, inside the caller's transaction; its id. Its
        `mount_path` is the one asked for, else one made of the store's name."""
        store = self.db.store(attach.store_id, writable=True)
        rows = self._resource_rows(session_id)
        if any(r["store_id"] == attach.store_id for r in rows):
            raise InvalidRequest(
                f"{where}memory store {attach.store_id} is attached to this session already"
            )
        if len(rows) >= MAX_STORES_PER_SESSION:
            raise InvalidRequest(f"a session holds at most {MAX_STORES_PER_SESSION} memory stores")
        taken = {_same_path(r["mount_path"]) for r in rows}
        mount_path = attach.mount_path
        if mount_path is None:
            base = f"{MOUNT_ROOT}/{slugify(store['name'])}"
            mount_path, n = base, 2
            while mount_path in taken:
                mount_path, n = f"{base}-{n}", n + 1
        elif _same_path(mount_path) in taken:
            raise InvalidRequest(
                f"{where}mount_path {mount_path} is the mount path of another store of this session"
            )
        resource_id = new_id("sesrsc")
        self.db.run(
            "INSERT INTO session_resources (id, session_id, store_id, access, name, description,"
            " instructions, mount_path, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (
                resource_id,
                session_id,
                attach.store_id,
                attach.access,
                store["name"],
                store["description"],
                attach.instructions,
                mount_path,
                now,
                now,
            ),
        )
        return resource_id

    def _resource_row(self, session_id: str, resource_id: str) -> sqlite3.Row:
        """A resource by its id, or by its store's id."""
        return self.db.row(
            "SELECT * FROM session_resources WHERE session_id = ? AND (id = ? OR store_id = ?)",
            (session_id, resource_id, resource_id),
            f"no resource {resource_id!r} in session {session_id}",
        )

    def list_resources(self, session_id: str, query: Mapping[str, str]) -> dict[str, Any]:
        """The resources in the order they were attached; without a `limit`,
        all of them (as the SDK documents)."""
        self._row(session_id)
        limit = query.get("limit") or None
        count = check_limit(limit, False, most=MAX_RESOURCES_PAGE, default=MAX_RESOURCES_PAGE)
        after = decode_cursor(query["page"], (int,))[0] if query.get("page") else 0
        rows = self.db.all(
            "SELECT * FROM session_resources WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (session_id, after, count + 1),
        )
        next_page = encode_cursor([rows[count - 1]["seq"]]) if len(rows) > count else None
        return {"data": [resource_json(r) for r in rows[:count]], "next_page": next_page}

    def get_resource(self, session_id: str, resource_id: str) -> dict[str, Any]:
        self._row(session_id)
        return resource_json(self._resource_row(session_id, resource_id))

    def add_resource(
        self, session_id: str, body: dict[str, Any], check_store: Callable[[str], None]
    ) -> dict[str, Any]:
        """Attach one more memory store to a live session."""
        attach = _parse_attach(body, "")
        check_store(attach.store_id)
        with self.db.transaction(f"attaching a store to session {session_id}"):
            self._row(session_id)
            now = self.db.now()
            resource_id = self._attach(session_id, attach, now, "")
            self.db.run("UPDATE sessions SET updated_at = ? WHERE id = ?", (now, session_id))
            return resource_json(self._resource_row(session_id, resource_id))

    def delete_resource(self, session_id: str, resource_id: str) -> dict[str, Any]:
        """Detach a store: the session's token reaches it no more."""
        with self.db.transaction(f"detaching {resource_id} from session {session_id}"):
            self._row(session_id)
            row = self._resource_row(session_id, resource_id)
            self.db.run("DELETE FROM session_resources WHERE id = ?", (row["id"],))
            self.db.run(
                "UPDATE sessions SET updated_at = ? WHERE id = ?", (self.db.now(), session_id)
            )
            return {"id": row["id"], "type": "session_resource_deleted"}
