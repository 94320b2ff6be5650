"""What travels on the wire: headers, limits, words, the objects answers hold
(their `from_json` tolerates fields a newer API adds or an older one leaves
out), and the error envelope, read and written by both ends here."""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import MISSING, dataclass, field, fields
from enum import StrEnum
from typing import Any, ClassVar, Generic, Literal, Protocol, TypeVar

from .._exceptions import STATUS_ERRORS, ServerError, StatusError
from ._session import ACCESS_READ_ONLY

AuthHeader = Literal["bearer", "x-api-key"]

ANTHROPIC_VERSION = "2023-06-01"
"""memfs's own; the Python SDK (`anthropic` 2.10 and later) sends the other."""
ANTHROPIC_VERSIONS = (ANTHROPIC_VERSION, "2026-10-21")
BETA = "agent-memory-2026-07-22"
OLD_BETA = "managed-agents-2026-04-01"
SESSIONS_BETA = OLD_BETA
DEFAULT_API_URL = "https://api.anthropic.com"
SERVE_DEFAULT_HOST = "127.0.0.1"
SERVE_DEFAULT_PORT = 8377
SERVE_TOKEN_ENV = "MEMFS_SERVE_TOKEN"

MAX_CONTENT_BYTES = 102_400
MAX_MEMORIES = 2_000


class View(StrEnum):
    """The basic view leaves `content` null, the full view holds it."""

    BASIC = "basic"
    FULL = "full"


class VersionOperation(StrEnum):
    CREATED = "created"
    MODIFIED = "modified"
    DELETED = "deleted"


class ActorType(StrEnum):
    """A version's `created_by.type`, with `user_id`, `session_id`,
    `api_key_id` or `service_account_id`."""

    USER = "user_actor"
    SESSION = "session_actor"
    API = "api_actor"
    SERVICE_ACCOUNT = "service_account_actor"


def content_sha256(content: bytes) -> str:
    """Lowercase hex, as the API reports it."""
    return hashlib.sha256(content).hexdigest()


class _Dataclass(Protocol):
    __dataclass_fields__: ClassVar[dict[str, Any]]


W = TypeVar("W", bound=_Dataclass)


def _from_fields(cls: type[W], d: dict[str, Any], **read: Any) -> W:
    """`cls` of the JSON object `d`: the values `read` holds, and each other
    field from the key of its name (its default when missing); `type` is the
    class's own."""
    for f in fields(cls):
        if f.name in read or f.name == "type":
            continue
        if f.name in d or (f.default is MISSING and f.default_factory is MISSING):
            read[f.name] = d[f.name]
    return cls(**read)


@dataclass(frozen=True)
class MemoryStore:
    id: str
    name: str = ""
    description: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    created_at: str = ""
    updated_at: str = ""
    archived_at: str | None = None
    type: str = "memory_store"

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> MemoryStore:
        metadata = dict(d.get("metadata") or {})
        return _from_fields(cls, d, description=d.get("description") or "", metadata=metadata)


@dataclass(frozen=True, slots=True)
class Memory:
    """A memory; `content` is None in the basic view."""

    id: str
    path: str
    memory_store_id: str = ""
    content_sha256: str = ""
    content_size_bytes: int = 0
    memory_version_id: str = ""
    created_at: str = ""
    updated_at: str = ""
    content: str | None = None
    type: str = "memory"

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Memory:
        return _from_fields(cls, d, content_size_bytes=int(d.get("content_size_bytes") or 0))


@dataclass(frozen=True)
class MemoryPrefix:
    """A subfolder in a depth-1 listing: `{"type": "memory_prefix", "path": "/dir/"}`."""

    path: str
    type: str = "memory_prefix"


@dataclass(frozen=True)
class MemoryVersion:
    id: str
    memory_id: str
    operation: str
    memory_store_id: str = ""
    created_at: str = ""
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
        return _from_fields(cls, d)


T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    data: list[T]
    next_page: str | None = None


@dataclass(frozen=True)
class SessionResource:
    """One entry of a session's `resources`: only `type` is always there; a
    `memory_store` one has `memory_store_id` and `access` (None: read-write)."""

    type: str
    id: str | None = None
    memory_store_id: str | None = None
    access: str | None = None
    name: str | None = None
    description: str | None = None
    instructions: str | None = None
    mount_path: str | None = None
    created_at: str = ""
    updated_at: str = ""

    @property
    def read_only(self) -> bool:
        return self.access == ACCESS_READ_ONLY

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SessionResource:
        """Only text counts: a field whose value is not a string has its default."""
        texts = {key: value for key, value in d.items() if isinstance(value, str)}
        return _from_fields(cls, texts, type=str(d.get("type") or ""))


@dataclass(frozen=True)
class Session:
    """The fields of a session memfs reads."""

    id: str
    status: str = ""
    resources: list[SessionResource] = field(default_factory=list)
    environment_id: str = ""
    title: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    created_at: str = ""
    updated_at: str = ""
    archived_at: str | None = None
    type: str = "session"

    @property
    def memory_stores(self) -> list[SessionResource]:
        return [r for r in self.resources if r.type == "memory_store" and r.memory_store_id]

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Session:
        listed, title = d.get("resources"), d.get("title")
        return _from_fields(
            cls,
            d,
            status=str(d.get("status") or ""),
            resources=[
                SessionResource.from_json(r)
                for r in (listed if isinstance(listed, list) else [])
                if isinstance(r, dict)
            ],
            environment_id=str(d.get("environment_id") or ""),
            title=title if isinstance(title, str) else None,
            metadata=dict(d.get("metadata") or {}),
        )


@dataclass(frozen=True)
class CreatedSession:
    """What `POST /v1/sessions` on `memfs serve` answers: the session and the
    sessions token it minted (never shown by `repr()`)."""

    session: Session
    sessions_token: str = field(repr=False)


STATUS_ERRORS_BY_TYPE: dict[str, type[StatusError]] = {cls.error_type: cls for cls in STATUS_ERRORS}

# A status alone names a class when exactly one class has it (409 has three).
_STATUS_COUNTS = Counter(cls.status for cls in STATUS_ERRORS)
STATUS_ERRORS_BY_STATUS: dict[int, type[StatusError]] = {
    cls.status: cls for cls in STATUS_ERRORS if _STATUS_COUNTS[cls.status] == 1
}


def error_class(status: int, error_type: str | None) -> type[StatusError]:
    """The exception class of an error answer: by its `error.type`, else by its
    status, else `ServerError` for any other 5xx and `StatusError` itself."""
    cls = STATUS_ERRORS_BY_TYPE.get(error_type or "") or STATUS_ERRORS_BY_STATUS.get(status)
    return cls or (ServerError if status >= 500 else StatusError)


def error_envelope(error: StatusError, request_id: str) -> dict[str, Any]:
    """The body of the answer refusing a request with `error`."""
    error_fields = {"type": error.error_type, "message": error.message, **error.extra}
    return {"type": "error", "error": error_fields, "request_id": request_id}


def parse_error_envelope(
    status: int,
    body: Any,
    *,
    request_id: str | None = None,
    reason_phrase: str = "",
    retry_after: float | None = None,
) -> StatusError:
    """The exception an error answer stands for, whatever its body (decoded
    JSON, or None) holds. The body's `request_id` overrides the header's and
    ends the message, so that a logged refusal can be traced on the server;
    an unknown error type is kept as it came; none: the status's (or `unknown_error`)."""
    error: dict[str, Any] = {}
    if isinstance(body, dict):
        if isinstance(body.get("error"), dict):
            error = body["error"]
        if isinstance(body.get("request_id"), str):
            request_id = body["request_id"]
    error_type = error.get("type") if isinstance(error.get("type"), str) else None
    cls = error_class(status, error_type)
    message = error.get("message") if isinstance(error.get("message"), str) else None
    if not message:
        message = f"the store answered HTTP {status} {reason_phrase}".rstrip()
    if request_id:
        message = f"{message} [request {request_id}]"
    return cls(
        message,
        status=status,
        error_type=error_type or cls.error_type or "unknown_error",
        request_id=request_id,
        extra={k: v for k, v in error.items() if k not in ("type", "message")},
        retry_after=retry_after,
    )
