"""Pages of a listing: the `limit` a request may ask for and the `page`
cursors the server hands out.

A cursor is the sort key of the last item of a page, as URL-safe base64 of a
JSON list; the next page is a keyset query after that key, so pages stay
stable while writes happen. A cursor the server did not make is a 400, never
a query with odd values.
"""

from __future__ import annotations

import base64
import json
import sqlite3
from collections.abc import Callable
from typing import Any

from .._exceptions import InvalidRequest
from ._fields import LONE_SURROGATE, parse_timestamp
from ._sqlite import SQLiteFile

MAX_PAGE_LIMIT = 100
MAX_FULL_VIEW_LIMIT = 20
DEFAULT_PAGE_LIMIT = 20
# Our longest cursor holds a 1,024-byte path; anything much longer is not one of ours.
MAX_CURSOR_CHARS = 4096
# SQLite's INTEGER is a signed 64-bit number; a sequence number is never negative.
MAX_SQLITE_INT = 2**63 - 1


def check_limit(limit: Any, full: bool) -> int:
    """`limit` as sent: None for the default, else ASCII digits (a query value)
    or an int; 400 for anything else, signs, spaces and `_` included. A page
    of the full view holds at most 20 items, whatever was asked."""
    if limit is None:
        limit = DEFAULT_PAGE_LIMIT
    elif isinstance(limit, str):
        if not (limit.isascii() and limit.isdigit() and len(limit) <= 3):
            raise InvalidRequest(f"limit must be an integer from 1 to {MAX_PAGE_LIMIT}")
        limit = int(limit)
    if type(limit) is not int or not 1 <= limit <= MAX_PAGE_LIMIT:
        raise InvalidRequest(f"limit must be an integer from 1 to {MAX_PAGE_LIMIT}")
    return min(limit, MAX_FULL_VIEW_LIMIT) if full else limit


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


def created_between(gte: str | None, lte: str | None, params: list[Any]) -> str:
    """The SQL conditions keeping rows created from `gte` to `lte` (RFC 3339,
    both ends included, either may be None), their values appended to `params`."""
    sql = ""
    if gte is not None:
        sql += " AND created_at >= ?"
        params.append(parse_timestamp(gte, "created_at[gte]"))
    if lte is not None:
        sql += " AND created_at <= ?"
        params.append(parse_timestamp(lte, "created_at[lte]"))
    return sql


def time_ordered_page(
    db: SQLiteFile,
    sql: str,
    params: list[Any],
    limit: int,
    to_json: Callable[[sqlite3.Row], dict[str, Any]],
) -> dict[str, Any]:
    """Run a keyset query ordered by (created_at, seq) with one row more than
    `limit`: that extra row says whether a next page exists."""
    rows = db.all(sql + " LIMIT ?", [*params, limit + 1])
    next_page = None
    if len(rows) > limit:
        rows = rows[:limit]
        next_page = encode_cursor([rows[-1]["created_at"], rows[-1]["seq"]])
    return {"data": [to_json(r) for r in rows], "next_page": next_page}
