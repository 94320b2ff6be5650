"""The one place where httpx's exceptions and the store's error answers
become memfs's exception tree (`memfs._exceptions`).

- An error answer becomes the `StatusError` subclass its `error.type` names,
  else the one its status names (any other 5xx: `ServerError`), with the
  message, the request id, the envelope's other fields and `retry-after`:
  the envelope is read by `memfs.api.parse_error_envelope`, the same
  module the server writes it with.
- An httpx exception becomes a `TransportError` whose sentence names the URL
  and, in a few words, why no answer came.
"""

from __future__ import annotations

import errno
from typing import Any

import httpx

from .._exceptions import StoreError, TransportError
from ..api import parse_error_envelope


def _causes(exc: BaseException) -> list[BaseException]:
    """The exception, its causes and contexts, and the members of any group
    among them (trio reports failed connection attempts as a group)."""
    seen: list[BaseException] = []
    stack: list[BaseException | None] = [exc]
    while stack:
        current = stack.pop()
        if current is None or any(current is s for s in seen):
            continue
        seen.append(current)
        if isinstance(current, BaseExceptionGroup):
            stack.extend(current.exceptions)
        stack.extend([current.__cause__, current.__context__])
    return seen


def transport_reason(exc: BaseException, timeout: float) -> str:
    """A few words saying why no answer came, for a person to read."""
    if isinstance(exc, httpx.ConnectTimeout):
        return "the connection timed out"
    if isinstance(exc, httpx.TimeoutException):
        return f"no answer within {timeout:g} s"
    if isinstance(exc, httpx.RemoteProtocolError):
        return "the connection closed before a whole answer came"
    if isinstance(exc, httpx.UnsupportedProtocol):
        return "the URL's scheme is not http or https"
    for cause in _causes(exc):
        if isinstance(cause, OSError) and cause.errno is not None:
            if cause.errno == errno.ECONNREFUSED:
                return "connection refused"
            if cause.errno == errno.ECONNRESET:
                return "connection reset"
            return (cause.strerror or str(cause)).lower()
    text = str(exc).lower()
    if "refused" in text or "all connection attempts failed" in text:
        return "connection refused"
    if "name or service not known" in text or "nodename nor servname" in text:
        return "the host name does not resolve"
    if isinstance(exc, httpx.ConnectError):
        return "cannot connect"
    if isinstance(exc, (httpx.ReadError, httpx.WriteError)):
        return "the connection was reset"
    return str(exc) or type(exc).__name__


def _header_number(response: httpx.Response, name: str) -> float | None:
    value = response.headers.get(name)
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return None if number != number else max(0.0, number)  # NaN is no number


def retry_after_seconds(response: httpx.Response) -> float | None:
    """The wait the answer asks for: `retry-after-ms` (milliseconds) when it
    is a number, else `retry-after` (seconds); None when neither is."""
    ms = _header_number(response, "retry-after-ms")
    if ms is not None:
        return ms / 1000
    return _header_number(response, "retry-after")


def error_from(
    *,
    response: httpx.Response | None = None,
    exc: BaseException | None = None,
    base_url: str = "",
    timeout: float = 0.0,
    attempts: int = 1,
) -> StoreError:
    """The one place an httpx answer or exception becomes a memfs exception.

    An error answer becomes the StatusError its envelope stands for, with the
    request id of the body, else of the `request-id` header, and the wait
    `retry-after-ms` or `retry-after` asks for. An httpx exception becomes a
    TransportError whose sentence names the URL and the reason.
    """
    if response is None:
        reason = transport_reason(exc, timeout) if exc is not None else "no answer"
        tries = f" (after {attempts} attempts)" if attempts > 1 else ""
        return TransportError(f"cannot reach {base_url}: {reason}{tries}")

    try:
        body: Any = response.json()
    except (ValueError, UnicodeDecodeError):
        body = None
    return parse_error_envelope(
        response.status_code,
        body,
        request_id=response.headers.get("request-id"),
        reason_phrase=response.reason_phrase,
        retry_after=retry_after_seconds(response),
    )
