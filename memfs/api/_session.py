"""What a session hands `memfs mount`: the claimed work item, its secret (never shown, not even in a
refusal) and the `resources` array, checked as `store-api.md` says; and the form a store id must
have before it names a folder, a file or a mount option (`../x` or a comma would escape them)."""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, field
from typing import Any

from .._exceptions import InvalidResources, InvalidSecret, InvalidStoreId, InvalidWorkItem

STORE_ID_PREFIX = "memstore_"
MAX_STORE_ID_LENGTH = 128

STORE_ID_FORM = f"{STORE_ID_PREFIX} followed by letters and digits"

_STORE_ID = re.compile(
    f"{STORE_ID_PREFIX}[A-Za-z0-9]{{1,{MAX_STORE_ID_LENGTH - len(STORE_ID_PREFIX)}}}"
)
_SHOWN = 60


def store_id_problem(value: object) -> str | None:
    """Why `value` is not a store id, as the end of a sentence; None when it is."""
    if not isinstance(value, str):
        return "a store id is a string"
    if _STORE_ID.fullmatch(value) is not None:
        return None
    if len(value) > MAX_STORE_ID_LENGTH:
        return f"a store id has at most {MAX_STORE_ID_LENGTH} characters"
    return f"a store id is {STORE_ID_FORM}"


def shown_store_id(value: object) -> str:
    """A refused value as a sentence quotes it: its repr, cut when long."""
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


def check_store_id(value: object) -> str:
    """`value` itself when it is a store id; else InvalidStoreId."""
    problem = store_id_problem(value)
    if problem is not None:
        raise InvalidStoreId(f"{shown_store_id(value)} is not a store id: {problem}")
    assert isinstance(value, str)
    return value


MAX_STORES_PER_SESSION = 8
MAX_SESSION_ID_LENGTH = 128

ACCESS_READ_WRITE = "read_write"
ACCESS_READ_ONLY = "read_only"


@dataclass(frozen=True)
class WorkItemSecret:
    sessions_token: str = field(repr=False)
    api_base_url: str | None = None


_BASE64_TEXT = re.compile(r"[A-Za-z0-9+/_-]*")
_URLSAFE_TO_STANDARD = str.maketrans("-_", "+/")


def parse_work_item_secret(text: str) -> WorkItemSecret:
    """Base64 of `{"sessions_token": ..., "api_base_url"?: ...}`, in either
    alphabet, padding optional, whitespace anywhere ignored."""
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
    memory_store_id: str
    access: str = ACCESS_READ_WRITE
    name: str | None = None
    description: str = ""
    mount_path: str | None = None

    @property
    def read_only(self) -> bool:
        return self.access == ACCESS_READ_ONLY


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def parse_resources(obj: Any) -> list[Resource]:
    """A `resources` array as the API returns it: entries of other types are
    skipped, `access` null or absent is read-write, unknown fields ignored."""
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
        problem = store_id_problem(sid)
        if problem is not None:
            raise InvalidResources(
                f"resources[{i}] has memory_store_id {shown_store_id(sid)}, "
                f"which is not a store id: {problem}"
            )
        access = ACCESS_READ_WRITE if item.get("access") is None else item["access"]
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


def encode_work_item_secret(sessions_token: str, api_base_url: str | None = None) -> str:
    """A work item secret `parse_work_item_secret` reads back (unpadded URL-safe base64)."""
    if not sessions_token.strip():
        raise ValueError("a work item secret needs a sessions token")
    payload: dict[str, str] = {"sessions_token": sessions_token}
    if api_base_url:
        payload["api_base_url"] = api_base_url
    raw = json.dumps(payload, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


_SESSION_ID = re.compile(f"[A-Za-z0-9_-]{{1,{MAX_SESSION_ID_LENGTH}}}")


def session_id_problem(value: object) -> str | None:
    """Why `value` is not a session id, as the end of a sentence; None when it
    is. It names a file of memfs's, so it may hold nothing else."""
    if not isinstance(value, str) or not value:
        return "is not a session id"
    if not _SESSION_ID.fullmatch(value):
        return f"is not a session id (letters, digits, _ and -, at most {MAX_SESSION_ID_LENGTH})"
    return None


@dataclass(frozen=True)
class WorkItem:
    """A session's claimed work item, as the worker's poll returns it; `secret`
    is its text as given, decoded by whoever uses it."""

    id: str
    environment_id: str
    session_id: str
    secret: str | None = field(default=None, repr=False)


def parse_work_item(obj: Any, where: str = "the work item") -> WorkItem:
    """A decoded work item whose `data` is a session's; `where` names it in
    the refusals, which never quote the secret."""
    if not isinstance(obj, dict):
        raise InvalidWorkItem(f"{where} is not a JSON object")
    data = obj.get("data")
    if not isinstance(data, dict):
        raise InvalidWorkItem(f"{where} has no data object: it is not a work item of a session")
    kind = data.get("type")
    if kind != "session":
        shown = repr(kind) if isinstance(kind, str) and len(kind) <= 40 else 'not "session"'
        raise InvalidWorkItem(f"{where} is not a session's: its data.type is {shown}")
    session_id = data.get("id")
    problem = session_id_problem(session_id)
    if problem is not None:
        raise InvalidWorkItem(f"{where} names a data.id that {problem}")
    secret = obj.get("secret")
    if secret is not None and not isinstance(secret, str):
        raise InvalidWorkItem(f"{where} has a secret that is not a string")
    assert isinstance(session_id, str)
    return WorkItem(
        id=str(obj.get("id") or ""),
        environment_id=str(obj.get("environment_id") or ""),
        session_id=session_id,
        secret=secret if secret and secret.strip() else None,
    )
