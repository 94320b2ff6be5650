"""The rules for the values a request carries, and the pages of a listing: `limit`, and `page`
cursors (the last item's sort key, as base64 of JSON, so that pages stay stable while writes
happen). Each refusal is a 400 `InvalidRequest` naming the field and the rule (413 for content too
large)."""

from __future__ import annotations

import base64
import json
import re
import sqlite3
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from .._exceptions import InvalidRequest, RequestTooLarge
from ..api import MAX_CONTENT_BYTES
from ._sqlite import SQLiteFile, format_timestamp

MAX_STORE_NAME_CHARS = 255
MAX_DESCRIPTION_CHARS = 1024
MAX_METADATA_PAIRS = 16
MAX_METADATA_KEY_CHARS = 64
MAX_METADATA_VALUE_CHARS = 512
MAX_PAGE_LIMIT = 100
MAX_FULL_VIEW_LIMIT = 20
DEFAULT_PAGE_LIMIT = 20
# Our longest cursor holds a 1,024-byte path; anything much longer is not one of ours.
MAX_CURSOR_CHARS = 4096
MAX_SQLITE_INT = 2**63 - 1

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


def check_store_name(name: Any) -> str:
    if not isinstance(name, str) or not 1 <= len(name) <= MAX_STORE_NAME_CHARS:
        raise InvalidRequest(f"name must be a string of 1 to {MAX_STORE_NAME_CHARS} characters")
    if any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in name):
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
    """Any RFC 3339 timestamp, brought to the stored form."""
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


def check_limit(
    limit: str | None, full: bool, most: int = MAX_PAGE_LIMIT, default: int = DEFAULT_PAGE_LIMIT
) -> int:
    """A query's `limit`: absent for `default`, else ASCII digits from 1 to
    `most` (no sign, space or `_`). A page of the full view holds at most 20."""
    if limit is None:
        return default
    digits = limit.isascii() and limit.isdigit() and len(limit) <= len(str(most))
    if not digits or not 1 <= int(limit) <= most:
        raise InvalidRequest(f"limit must be an integer from 1 to {most}")
    return min(int(limit), MAX_FULL_VIEW_LIMIT) if full else int(limit)


def encode_cursor(key: list[Any]) -> str:
    raw = json.dumps(key, separators=(",", ":"), ensure_ascii=False).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _cursor_part(value: Any, kind: type) -> bool:
    """Whether one part of a decoded cursor could have come from `encode_cursor`."""
    if kind is int:
        return type(value) is int and 0 <= value <= MAX_SQLITE_INT
    if kind is str:
        return isinstance(value, str) and LONE_SURROGATE.search(value) is None
    return isinstance(value, kind)


def decode_cursor(cursor: str, shape: tuple[type, ...]) -> list[Any]:
    """The sort key a `page` cursor carries; 400 when it is not one of ours."""
    refusal = InvalidRequest("page is not a cursor this server handed out")
    if len(cursor) > MAX_CURSOR_CHARS:
        raise refusal
    try:
        key = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode())
    except (ValueError, RecursionError):
        raise refusal
    if (
        not isinstance(key, list)
        or len(key) != len(shape)
        or not all(_cursor_part(v, t) for v, t in zip(key, shape, strict=True))
    ):
        raise refusal
    return key


def time_ordered_page(
    db: SQLiteFile,
    sql: str,
    params: list[Any],
    query: Mapping[str, str],
    limit: int,
    to_json: Callable[[sqlite3.Row], dict[str, Any]],
    *,
    newest_first: bool = False,
) -> dict[str, Any]:
    """A page of the rows `sql` keeps, ordered by (created_at, seq), with the
    query's `created_at[gte]`, `created_at[lte]` and `page` applied."""
    for bound, op in (("created_at[gte]", ">="), ("created_at[lte]", "<=")):
        if query.get(bound):
            sql += f" AND created_at {op} ?"
            params.append(parse_timestamp(query[bound], bound))
    if query.get("page"):
        sql += f" AND (created_at, seq) {'<' if newest_first else '>'} (?, ?)"
        params += decode_cursor(query["page"], (str, int))
    order = " DESC" if newest_first else ""
    rows = db.all(f"{sql} ORDER BY created_at{order}, seq{order} LIMIT ?", [*params, limit + 1])
    next_page = None
    if len(rows) > limit:
        rows = rows[:limit]
        next_page = encode_cursor([rows[-1]["created_at"], rows[-1]["seq"]])
    return {"data": [to_json(r) for r in rows], "next_page": next_page}
