"""What travels on the wire: the protocol's headers and limits, the words it
uses (views, version operations, actor types) and the objects it answers with.

Wire types are frozen dataclasses built from the JSON the API answers with;
`from_json` tolerates the fields a newer API adds and the ones an older one
leaves out, so the hosted API and `memfs serve` read the same.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Generic, Literal, TypeVar

AuthHeader = Literal["bearer", "x-api-key"]
"""The header a token travels in: `Authorization: Bearer` or `x-api-key`."""

ANTHROPIC_VERSION = "2023-06-01"
BETA = "agent-memory-2026-07-22"
OLD_BETA = "managed-agents-2026-04-01"
DEFAULT_API_URL = "https://api.anthropic.com"
SERVE_DEFAULT_HOST = "127.0.0.1"
SERVE_DEFAULT_PORT = 8377
SERVE_TOKEN_ENV = "MEMFS_SERVE_TOKEN"

MAX_CONTENT_BYTES = 102_400
MAX_MEMORIES = 2_000


class View(StrEnum):
    """How much of a memory or a version an answer carries: the basic view
    leaves `content` null, the full view holds it."""

    BASIC = "basic"
    FULL = "full"


class VersionOperation(StrEnum):
    """What a memory version records: the change that made it."""

    CREATED = "created"
    MODIFIED = "modified"
    DELETED = "deleted"


class ActorType(StrEnum):
    """Who made a change, as a version's `created_by.type` says: a person
    (`user_id`), an agent session (`session_id`) or an API key (`api_key_id`)."""

    USER = "user_actor"
    SESSION = "session_actor"
    API = "api_actor"


def content_sha256(content: bytes) -> str:
    """Lowercase hex SHA-256 of the content's bytes, as the API reports it."""
    return hashlib.sha256(content).hexdigest()


@dataclass(frozen=True)
class MemoryStore:
    id: str
    name: str
    description: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    created_at: str = ""
    updated_at: str = ""
    archived_at: str | None = None
    type: str = "memory_store"

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> MemoryStore:
        return cls(
            id=d["id"],
            name=d.get("name", ""),
            description=d.get("description") or "",
            metadata=dict(d.get("metadata") or {}),
            created_at=d.get("created_at", ""),
            updated_at=d.get("updated_at", ""),
            archived_at=d.get("archived_at"),
        )


@dataclass(frozen=True)
class Memory:
    """A memory; `content` is None in the basic view."""

    id: str
    memory_store_id: str
    path: str
    content_sha256: str
    content_size_bytes: int
    memory_version_id: str
    created_at: str = ""
    updated_at: str = ""
    content: str | None = None
    type: str = "memory"

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Memory:
        return cls(
            id=d["id"],
            memory_store_id=d.get("memory_store_id", ""),
            path=d["path"],
            content_sha256=d.get("content_sha256", ""),
            content_size_bytes=int(d.get("content_size_bytes") or 0),
            memory_version_id=d.get("memory_version_id", ""),
            created_at=d.get("created_at", ""),
            updated_at=d.get("updated_at", ""),
            content=d.get("content"),
        )


@dataclass(frozen=True)
class MemoryPrefix:
    """A subfolder in a depth-1 listing: `{"type": "memory_prefix", "path": "/dir/"}`."""

    path: str
    type: str = "memory_prefix"


@dataclass(frozen=True)
class MemoryVersion:
    id: str
    memory_id: str
    memory_store_id: str
    operation: str
    created_at: str
    content: str | None = None
    content_sha256: str | None = None
    content_size_bytes: int | None = None
    path: str | None = None
    created_by: dict[str, Any] | None = None
    redacted_at: str | None = None
    redacted_by: dict[str, Any] | None = None
    type: str = "memory_version"

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> MemoryVersion:
        return cls(
            id=d["id"],
            memory_id=d["memory_id"],
            memory_store_id=d.get("memory_store_id", ""),
            operation=d["operation"],
            created_at=d.get("created_at", ""),
            content=d.get("content"),
            content_sha256=d.get("content_sha256"),
            content_size_bytes=d.get("content_size_bytes"),
            path=d.get("path"),
            created_by=d.get("created_by"),
            redacted_at=d.get("redacted_at"),
            redacted_by=d.get("redacted_by"),
        )


T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    data: list[T]
    next_page: str | None = None
