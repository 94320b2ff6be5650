"""One request's headers, query values and JSON body, checked as the contract says, and the JSON
answers, each with its `request-id` header."""

from __future__ import annotations

import json
import random
import re
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from .._exceptions import InvalidRequest, RequestTooLarge, StatusError
from ..api import (
    ANTHROPIC_VERSIONS,
    BETA,
    MAX_CONTENT_BYTES,
    OLD_BETA,
    SESSIONS_BETA,
    View,
    error_envelope,
)
from ._values import LONE_SURROGATE

# A JSON body holding the largest content, escaped at worst (\uXXXX per byte), with room to spare.
MAX_BODY_BYTES = 6 * MAX_CONTENT_BYTES + 64 * 1024

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


# Request ids need to be unique, not secret: a generator seeded from the OS
# once, rather than a system call per answer.
_request_ids = random.Random()


def new_request_id() -> str:
    return f"req_{_request_ids.getrandbits(96):024x}"


_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_VIEWS = tuple(View)


def json_response(
    status: int, body: dict[str, Any], request_id: str, headers: dict[str, str] | None = None
) -> Response:
    return Response(
        _JSON.encode(body).encode("utf-8"),
        status_code=status,
        media_type="application/json",
        headers={"request-id": request_id, **(headers or {})},
    )


def error_response(
    error: StatusError, request_id: str, headers: dict[str, str] | None = None
) -> Response:
    """The answer refusing a request with `error`, in the contract's envelope."""
    return json_response(error.status, error_envelope(error, request_id), request_id, headers)


def query_choice(request: Request, name: str, choices: tuple[str, ...], default: str) -> str:
    """A query value that must be one of `choices`; absent or empty is `default`."""
    value = request.query_params.get(name) or default
    if value not in choices:
        raise InvalidRequest(f"{name} must be one of {', '.join(choices)}, not {value!r}")
    return value


def query_bool(request: Request, name: str) -> bool:
    value = request.query_params.get(name) or "false"
    if value.lower() not in ("true", "1", "false", "0"):
        raise InvalidRequest(f"{name} must be true or false, not {value!r}")
    return value.lower() in ("true", "1")


def full_view(request: Request, default: View) -> bool:
    """Whether the request's `view` (else `default`) is the full view."""
    if not request.scope["query_string"]:
        return default == View.FULL
    return query_choice(request, "view", _VIEWS, default) == View.FULL


def check_headers(request: Request, sessions: bool) -> None:
    """The `anthropic-version` and `anthropic-beta` headers docs/serve.md
    asks for; the session endpoints take the Managed Agents beta."""
    version = request.headers.get("anthropic-version")
    if version is not None and version.strip() not in ANTHROPIC_VERSIONS:
        raise InvalidRequest(
            f"anthropic-version must be {' or '.join(ANTHROPIC_VERSIONS)}, not {version!r}"
        )
    betas = {
        item.strip()
        for value in request.headers.getlist("anthropic-beta")
        for item in value.split(",")
    }
    if sessions:
        if SESSIONS_BETA not in betas:
            raise InvalidRequest(
                f"the session endpoints need the header anthropic-beta: {SESSIONS_BETA}"
            )
    elif BETA in betas and OLD_BETA in betas:
        raise InvalidRequest(f"send one anthropic-beta of {BETA} or {OLD_BETA}, not both")
    elif BETA not in betas and OLD_BETA not in betas:
        raise InvalidRequest(f"the Memory Store API needs the header anthropic-beta: {BETA}")


async def json_body(request: Request) -> dict[str, Any]:
    """The request's JSON object (`{}` for an empty body), refused (413) as
    soon as it passes `MAX_BODY_BYTES`: no more than that is ever held."""
    too_large = RequestTooLarge(f"the request body is larger than {MAX_BODY_BYTES} bytes")
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise too_large
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY_BYTES:
            raise too_large
    if not raw.strip():
        return {}
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidRequest("the request body is not valid UTF-8")
    try:
        body = json.loads(text)
    except RecursionError:
        raise InvalidRequest("the request body is nested too deeply to be a request")
    except ValueError as e:
        raise InvalidRequest(f"the request body is not valid JSON: {e}")
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object")
    # The text is strict UTF-8, so only a \uD800-\uDFFF escape can make a lone surrogate.
    if _SURROGATE_ESCAPE.search(text):
        field = _field_with_lone_surrogate(body)
        if field is not None:
            raise InvalidRequest(f"{field} must be valid UTF-8 (it holds a lone surrogate)")
    return body


def _field_with_lone_surrogate(body: dict[str, Any]) -> str | None:
    """The top-level field whose value (or a key or string within it) holds a
    lone surrogate; None when there is none. Walks without recursion: the
    body may be nested as deep as the parser allows."""
    for field, value in body.items():
        if LONE_SURROGATE.search(field):
            return "a field name"
        stack = [value]
        while stack:
            item = stack.pop()
            if isinstance(item, str) and LONE_SURROGATE.search(item):
                return field
            if isinstance(item, dict):
                stack += [*item.keys(), *item.values()]
            elif isinstance(item, list):
                stack += item
    return None
