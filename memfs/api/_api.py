"""The Memory Store API's rules as pure code: both the client and the server
keep to what is written here, so the two cannot drift apart.

Nothing here does I/O. Wire types are frozen dataclasses built from the JSON
the API answers with; path rules, slugs, the marker and the work item secret
are checked exactly as `store-api.md` says.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from .._exceptions import InvalidPath, InvalidResources, InvalidSecret

ANTHROPIC_VERSION = "2023-06-01"
BETA = "agent-memory-2026-07-22"
OLD_BETA = "managed-agents-2026-04-01"
DEFAULT_API_URL = "https://api.anthropic.com"
SERVE_DEFAULT_HOST = "127.0.0.1"
SERVE_DEFAULT_PORT = 8377
SERVE_TOKEN_ENV = "MEMFS_SERVE_TOKEN"

MAX_CONTENT_BYTES = 102_400
MAX_PATH_BYTES = 1_024
MAX_NAME_BYTES = 255
MAX_MEMORIES = 2_000
MAX_STORES_PER_SESSION = 8

MARKER_NAME = ".anthropic-memory-store"
MARKER_PATH = "/" + MARKER_NAME

ACCESS_READ_WRITE = "read_write"
ACCESS_READ_ONLY = "read_only"


def marker_content(store_id: str) -> bytes:
    """The marker's exact content: `version 1\\n<store_id>`, no trailing newline."""
    return f"version 1\n{store_id}".encode()


def content_sha256(content: bytes) -> str:
    """Lowercase hex SHA-256 of the content's bytes, as the API reports it."""
    return hashlib.sha256(content).hexdigest()


def _forbidden_char(ch: str) -> bool:
    # Cc: control characters; Cf: format characters (zero-width, bidi marks...);
    # Cs: lone surrogates, which cannot be UTF-8 at all.
    return unicodedata.category(ch) in ("Cc", "Cf", "Cs")


def check_name(name: str) -> None:
    """Raise InvalidPath unless `name` may be one segment of a memory path."""
    if name in ("", ".", ".."):
        raise InvalidPath(f"a path segment may not be {name!r}")
    if "/" in name:
        raise InvalidPath("a path segment may not contain '/'")
    for ch in name:
        if _forbidden_char(ch):
            raise InvalidPath(f"a path may not contain the character U+{ord(ch):04X}")
    if unicodedata.normalize("NFC", name) != name:
        raise InvalidPath("a path must be NFC-normalised")


def normalize_path(path: Any) -> str:
    """Return the NFC form of a memory path, or raise InvalidPath with the rule it breaks.

    Rules, in the order they are checked: a string; starts with `/`; at least
    one segment; no control or format characters; at most 1,024 bytes of
    UTF-8 (after NFC); no empty, `.` or `..` segment.
    """
    if not isinstance(path, str):
        raise InvalidPath("path must be a string")
    if not path.startswith("/"):
        raise InvalidPath("path must start with '/'")
    if path == "/":
        raise InvalidPath("path must have at least one segment")
    for ch in path:
        if _forbidden_char(ch):
            raise InvalidPath(f"path may not contain the character U+{ord(ch):04X}")
    path = unicodedata.normalize("NFC", path)
    if len(path.encode("utf-8")) > MAX_PATH_BYTES:
        raise InvalidPath(f"path is longer than {MAX_PATH_BYTES} bytes")
    for segment in path[1:].split("/"):
        if segment == "":
            raise InvalidPath("path may not have an empty segment")
        if segment in (".", ".."):
            raise InvalidPath(f"path may not have a {segment!r} segment")
    return path


def normalize_prefix(prefix: Any) -> str:
    """A `path_prefix`: `/`, or whole segments ending in `/`."""
    if not isinstance(prefix, str) or not prefix.startswith("/") or not prefix.endswith("/"):
        raise InvalidPath("path_prefix must start and end with '/'")
    if prefix == "/":
        return prefix
    return normalize_path(prefix[:-1]) + "/"


def is_ancestor(ancestor: str, path: str) -> bool:
    """True when `ancestor` is a proper ancestor folder of `path` (`/a` of `/a/b`)."""
    return path.startswith(ancestor + "/")


def parent_path(path: str) -> str:
    """`/a/b` → `/a`; `/a` → `/`."""
    head = path.rsplit("/", 1)[0]
    return head or "/"


def join_path(parent: str, name: str) -> str:
    return ("" if parent == "/" else parent) + "/" + name


_SLUG_RUN = re.compile(r"[^a-z0-9]+")


def slugify(name: str) -> str:
    """The store's name lowercased, every run of other characters than a-z0-9
    made one `-`, leading and trailing `-` dropped: "User Preferences" →
    "user-preferences". An empty result becomes "store"."""
    slug = _SLUG_RUN.sub("-", name.lower()).strip("-")
    return slug or "store"


@dataclass(frozen=True)
class WorkItemSecret:
    sessions_token: str
    api_base_url: str | None = None

    def __repr__(self) -> str:
        return f"WorkItemSecret(sessions_token=<hidden>, api_base_url={self.api_base_url!r})"


_BASE64_TEXT = re.compile(r"[A-Za-z0-9+/_-]*")
_URLSAFE_TO_STANDARD = str.maketrans("-_", "+/")


def parse_work_item_secret(text: str) -> WorkItemSecret:
    """Decode a work item secret: base64 of `{"sessions_token": "...",
    "api_base_url"?: "...", ...}`, other fields ignored. Either alphabet
    (URL-safe or standard), padding optional; whitespace anywhere, such as
    the line breaks `base64` puts in, is ignored."""
    raw = "".join(text.split()).rstrip("=")
    try:
        if not raw or not _BASE64_TEXT.fullmatch(raw):
            raise ValueError("not base64")
        data = raw.translate(_URLSAFE_TO_STANDARD)
        obj = json.loads(base64.b64decode(data + "=" * (-len(data) % 4), validate=True))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise InvalidSecret(
            "the work item secret is not URL-safe base64 (nor standard base64) of a JSON object"
        )
    token = obj.get("sessions_token") if isinstance(obj, dict) else None
    if not isinstance(token, str) or not token.strip():
        raise InvalidSecret("the work item secret has no sessions_token")
    url = obj.get("api_base_url")
    if url is not None and not isinstance(url, str):
        raise InvalidSecret("the work item secret's api_base_url is not a string")
    return WorkItemSecret(token.strip(), (url or "").strip() or None)


@dataclass(frozen=True)
class Resource:
    """One entry of a session's `resources` array, as `memfs mount` takes it."""

    memory_store_id: str
    access: str = ACCESS_READ_WRITE
    name: str | None = None
    description: str = ""
    mount_path: str | None = None

    @property
    def read_only(self) -> bool:
        return self.access == ACCESS_READ_ONLY


def _text(value: Any) -> str | None:
    """A string field as given, None when absent, empty or not a string."""
    return value if isinstance(value, str) and value.strip() else None


def parse_resources(obj: Any) -> list[Resource]:
    """Validate a `resources` array exactly as the API returns it: entries of
    other types than memory_store are skipped; `access` null or absent is
    read-write; `mount_path` and `name` are optional; unknown fields
    (`instructions`, ...) are ignored."""
    if isinstance(obj, dict) and isinstance(obj.get("resources"), list):
        obj = obj["resources"]
    if not isinstance(obj, list):
        raise InvalidResources("resources must be a JSON array")
    out = []
    for i, item in enumerate(obj):
        if not isinstance(item, dict):
            raise InvalidResources(f"resources[{i}] is not an object")
        if item.get("type", "memory_store") != "memory_store":
            continue
        sid = item.get("memory_store_id")
        if not isinstance(sid, str) or not sid:
            raise InvalidResources(f"resources[{i}] has no memory_store_id")
        access = item.get("access")
        if access is None:
            access = ACCESS_READ_WRITE
        if access not in (ACCESS_READ_WRITE, ACCESS_READ_ONLY):
            raise InvalidResources(
                f"resources[{i}] has access {access!r}: use read_write or read_only"
            )
        mount_path = item.get("mount_path")
        if mount_path is not None and not isinstance(mount_path, str):
            raise InvalidResources(f"resources[{i}] has a mount_path that is not a string")
        out.append(
            Resource(
                memory_store_id=sid,
                access=access,
                name=_text(item.get("name")),
                description=_text(item.get("description")) or "",
                mount_path=mount_path or None,
            )
        )
    return out


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
