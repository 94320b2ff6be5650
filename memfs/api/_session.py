"""What a session hands `memfs mount`: the work item secret and the `resources`
array, decoded and checked as `store-api.md` says.

The secret's token is never shown: its repr hides it, and every refusal
names what is wrong without quoting what was given.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from typing import Any

from .._exceptions import InvalidResources, InvalidSecret
from ._ids import shown_store_id, store_id_problem

MAX_STORES_PER_SESSION = 8

ACCESS_READ_WRITE = "read_write"
ACCESS_READ_ONLY = "read_only"


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
        problem = store_id_problem(sid)
        if problem is not None:
            raise InvalidResources(
                f"resources[{i}] has memory_store_id {shown_store_id(sid)}, "
                f"which is not a store id: {problem}"
            )
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


def encode_work_item_secret(sessions_token: str, api_base_url: str | None = None) -> str:
    """A work item secret `parse_work_item_secret` reads back: URL-safe base64
    (unpadded) of `{"sessions_token": ..., "api_base_url": ...}`, as
    `memfs store session create` hands one to a worker."""
    if not sessions_token.strip():
        raise ValueError("a work item secret needs a sessions token")
    payload: dict[str, str] = {"sessions_token": sessions_token}
    if api_base_url:
        payload["api_base_url"] = api_base_url
    raw = json.dumps(payload, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")
