"""What travels on the wire: headers, limits, words, the objects answers hold
(their `from_json` tolerates fields a newer API adds or an older one leaves
out), and the error envelope, read and written by both ends here."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from enum import StrEnum
from typing import Any, ClassVar, Generic, Literal, Protocol, Self, TypeVar

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

Reader = Callable[[dict[str, Any], str], Any]


def _read(reader: Reader) -> dict[str, Reader]:
    """The metadata of a field `from_json` reads its own way."""
    return {"read": reader}


def _from_fields(cls: type[W], d: dict[str, Any], **read: Any) -> W:
    """`cls` of the JSON object `d`, each field from the key of its name (its
    default when missing) but those in `read`, those with a reader, and `type`."""
    own = [f for f in fields(cls) if f.name not in read and f.name != "type"]
    values = {f.name: f.metadata["read"](d, f.name) for f in own if "read" in f.metadata}
    for f in own:
        if f.name in values:
            continue
        if f.name in d or (f.default is MISSING and f.default_factory is MISSING):
            values[f.name] = d[f.name]
    return cls(**values, **read)


class _FromJSON:
    __slots__ = ()

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Self:
        return _from_fields(cls, d)


def _blank_if_absent(d: dict[str, Any], key: str) -> Any:
    return d.get(key, "")


def _blank_if_null(d: dict[str, Any], key: str) -> Any:
    return d.get(key) or ""


def _text(d: dict[str, Any], key: str) -> str:
    return str(d.get(key) or "")


def _text_or_none(d: dict[str, Any], key: str) -> str | None:
    value = d.get(key)
    return value if isinstance(value, str) else None


def _mapping(d: dict[str, Any], key: str) -> dict[str, Any]:
    return dict(d.get(key) or {})


def _count(d: dict[str, Any], key: str) -> int:
    return int(d.get(key) or 0)


@dataclass(frozen=True)
class MemoryStore(_FromJSON):
    id: str
    name: str = field(metadata=_read(_blank_if_absent))
    description: str = field(default="", metadata=_read(_blank_if_null))
    metadata: dict[str, str] = field(default_factory=dict, metadata=_read(_mapping))
    created_at: str = ""
    updated_at: str = ""
    archived_at: str | None = None
    type: str = "memory_store"


@dataclass(frozen=True, slots=True)
class Memory(_FromJSON):
    """A memory; `content` is None in the basic view."""

    id: str
    memory_store_id: str = field(metadata=_read(_blank_if_absent))
    path: str
    content_sha256: str = field(metadata=_read(_blank_if_absent))
    content_size_bytes: int = field(metadata=_read(_count))
    memory_version_id: str = field(metadata=_read(_blank_if_absent))
    created_at: str = ""
    updated_at: str = ""
    content: str | None = None
    type: str = "memory"


@dataclass(frozen=True)
class MemoryPrefix:
    """A subfolder in a depth-1 listing: `{"type": "memory_prefix", "path": "/dir/"}`."""

    path: str
    type: str = "memory_prefix"


@dataclass(frozen=True)
class MemoryVersion(_FromJSON):
    id: str
    memory_id: str
    memory_store_id: str = field(metadata=_read(_blank_if_absent))
    operation: str
    created_at: str = field(metadata=_read(_blank_if_absent))
    content: str | None = None
    content_sha256: str | None = None
    content_size_bytes: int | None = None
    path: str | None = None
    created_by: dict[str, Any] | None = None
    redacted_at: str | None = None
    redacted_by: dict[str, Any] | None = None
    type: str = "memory_version"


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
    def is_memory_store(self) -> bool:
        return self.type == "memory_store" and bool(self.memory_store_id)

    @property
    def read_only(self) -> bool:
        return self.access == ACCESS_READ_ONLY

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SessionResource:
        """Only text counts: a field whose value is not a string has its default."""
        texts = {key: value for key, value in d.items() if isinstance(value, str)}
        return _from_fields(cls, texts, type=str(d.get("type") or ""))


def _session_resources(d: dict[str, Any], key: str) -> list[SessionResource]:
    listed = d.get(key)
    return [
        SessionResource.from_json(r)
        for r in (listed if isinstance(listed, list) else [])
        if isinstance(r, dict)
    ]


@dataclass(frozen=True)
class Session(_FromJSON):
    """The fields of a session memfs reads."""

    id: str
    status: str = field(default="", metadata=_read(_text))
    resources: list[SessionResource] = field(
        default_factory=list, metadata=_read(_session_resources)
    )
    environment_id: str = field(default="", metadata=_read(_text))
    title: str | None = field(default=None, metadata=_read(_text_or_none))
    metadata: dict[str, str] = field(default_factory=dict, metadata=_read(_mapping))
    created_at: str = ""
    updated_at: str = ""
    archived_at: str | None = None
    type: str = "session"

    @property
    def memory_stores(self) -> list[SessionResource]:
        return [r for r in self.resources if r.is_memory_store]


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
    if cls is None:
        cls = ServerError if status >= 500 else StatusError
    return cls


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
    an unknown error type is kept as it came (`unknown_error` when none came)."""
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
