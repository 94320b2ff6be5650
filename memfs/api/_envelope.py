"""The wire's error envelope, built by the server and read by the client:
`{"type": "error", "error": {"type", "message", ...}, "request_id": ...}`.

Both ends use this one module, so the status and `error.type` of every
refusal mean the same on both sides: `STATUS_ERRORS_BY_TYPE` names the
exception class of each error type the contract lists, and
`STATUS_ERRORS_BY_STATUS` the class an answer gets from its status alone
when its type is missing or unknown (409 has three types and no default).
Fields of `error` other than `type` and `message` (a path conflict's
`conflicting_memory_id`, say) travel as the exception's `extra`.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from .._exceptions import STATUS_ERRORS, ServerError, StatusError

STATUS_ERRORS_BY_TYPE: dict[str, type[StatusError]] = {cls.error_type: cls for cls in STATUS_ERRORS}

# A status alone names a class when exactly one class has it.
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
    fields = {"type": error.error_type, "message": error.message, **error.extra}
    return {"type": "error", "error": fields, "request_id": request_id}


def parse_error_envelope(
    status: int,
    body: Any,
    *,
    request_id: str | None = None,
    reason_phrase: str = "",
    retry_after: float | None = None,
) -> StatusError:
    """The exception an error answer stands for, whatever its body holds.

    `body` is the answer's decoded JSON (None when it was not JSON);
    `request_id` is the `request-id` header, which the body's own
    `request_id` overrides. The message is the server's, or names the status
    when it sent none, and ends with the request id when there is one, so a
    logged refusal can be traced on the server. An error type the class does
    not know is kept as it came (`unknown_error` when there is none).
    """
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
