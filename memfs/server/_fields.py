"""The contract's rules for the values a request carries, checked before any
write: content, paths, names, descriptions, metadata and timestamps. Each
refusal is a 400 `InvalidRequest` (413 `RequestTooLarge` for content past the
limit) whose sentence names the field and the rule.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from .._exceptions import InvalidPath, InvalidRequest, RequestTooLarge
from ..api import MAX_CONTENT_BYTES, normalize_path
from ._sqlite import format_timestamp

MAX_STORE_NAME_CHARS = 255
MAX_DESCRIPTION_CHARS = 1024
MAX_METADATA_PAIRS = 16
MAX_METADATA_KEY_CHARS = 64
MAX_METADATA_VALUE_CHARS = 512

LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def check_content(content: Any) -> tuple[str, bytes]:
    """The content and its UTF-8 bytes."""
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


def check_path(path: Any) -> str:
    """The path in NFC, as it is stored."""
    try:
        return normalize_path(path)
    except InvalidPath as e:
        raise InvalidRequest(str(e))


def _no_control(text: str) -> bool:
    return not any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in text)


def check_store_name(name: Any) -> str:
    if not isinstance(name, str) or not 1 <= len(name) <= MAX_STORE_NAME_CHARS:
        raise InvalidRequest(f"name must be a string of 1 to {MAX_STORE_NAME_CHARS} characters")
    if not _no_control(name):
        raise InvalidRequest("name may not contain control characters")
    return name


def check_description(description: Any) -> str:
    """A store's description; null is the empty one."""
    if description is None:
        return ""
    if not isinstance(description, str) or len(description) > MAX_DESCRIPTION_CHARS:
        raise InvalidRequest(
            f"description must be a string of at most {MAX_DESCRIPTION_CHARS} characters"
        )
    return description


def apply_metadata(current: dict[str, str], patch: Any) -> dict[str, str]:
    """`current` with `patch` merged in: a null value removes its key, a null
    patch changes nothing; the result holds at most 16 pairs."""
    if patch is None:
        return current
    if not isinstance(patch, dict):
        raise InvalidRequest("metadata must be an object of string keys and string values")
    merged = dict(current)
    for key, value in patch.items():
        if not 1 <= len(key) <= MAX_METADATA_KEY_CHARS:
            raise InvalidRequest(f"metadata keys must be 1 to {MAX_METADATA_KEY_CHARS} characters")
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
