"""The error envelope of `memfs.api`: what the server builds, the client reads
back as the same refusal. Pure code, no server."""

from __future__ import annotations

import pytest

from memfs._exceptions import (
    Conflict,
    InvalidRequest,
    NotFound,
    PathConflict,
    PreconditionFailed,
    ServerError,
    StatusError,
)
from memfs.api import error_class, error_envelope, parse_error_envelope
from memfs.api._wire import STATUS_ERRORS_BY_STATUS, STATUS_ERRORS_BY_TYPE


@pytest.mark.parametrize("cls", sorted(STATUS_ERRORS_BY_TYPE.values(), key=lambda c: c.__name__))
def test_every_refusal_survives_the_wire(cls):
    sent = cls("no such thing", extra={"conflicting_path": "/a"})
    body = error_envelope(sent, "req_1")
    assert body == {
        "type": "error",
        "error": {"type": cls.error_type, "message": "no such thing", "conflicting_path": "/a"},
        "request_id": "req_1",
    }
    got = parse_error_envelope(cls.status, body, request_id="req_header")
    assert type(got) is cls
    assert (got.status, got.error_type, got.request_id) == (cls.status, cls.error_type, "req_1")
    assert got.message == "no such thing [request req_1]"
    assert got.extra == {"conflicting_path": "/a"}


def test_the_tables_agree_with_the_classes():
    # The error table of shared/store-api.md: type -> the class memfs raises, its status.
    assert {t: (cls.__name__, cls.status) for t, cls in STATUS_ERRORS_BY_TYPE.items()} == {
        "invalid_request_error": ("InvalidRequest", 400),
        "authentication_error": ("AuthenticationFailed", 401),
        "billing_error": ("BillingError", 402),
        "permission_error": ("PermissionDenied", 403),
        "not_found_error": ("NotFound", 404),
        "memory_precondition_failed_error": ("PreconditionFailed", 409),
        "memory_path_conflict_error": ("PathConflict", 409),
        "conflict_error": ("Conflict", 409),
        "request_too_large": ("RequestTooLarge", 413),
        "rate_limit_error": ("RateLimited", 429),
        "api_error": ("ServerError", 500),
        "timeout_error": ("GatewayTimeout", 504),
        "overloaded_error": ("Overloaded", 529),
    }
    assert {s: cls.error_type for s, cls in STATUS_ERRORS_BY_STATUS.items()} == {
        400: "invalid_request_error",
        401: "authentication_error",
        402: "billing_error",
        403: "permission_error",
        404: "not_found_error",
        413: "request_too_large",
        429: "rate_limit_error",
        500: "api_error",
        504: "timeout_error",
        529: "overloaded_error",
    }
    assert 409 not in STATUS_ERRORS_BY_STATUS  # three 409 types, none the default
    assert {PreconditionFailed, PathConflict, Conflict} <= set(STATUS_ERRORS_BY_TYPE.values())


def test_the_type_wins_over_the_status_and_the_status_stands_in_for_a_missing_type():
    assert error_class(400, "not_found_error") is NotFound
    assert error_class(400, None) is InvalidRequest
    assert error_class(502, "teapot_error") is ServerError
    assert error_class(409, None) is StatusError
    assert error_class(418, None) is StatusError


def test_an_answer_that_is_not_an_envelope_still_says_what_happened():
    got = parse_error_envelope(
        502, None, request_id="req_hdr", reason_phrase="Bad Gateway", retry_after=2.0
    )
    assert type(got) is ServerError
    assert got.message == "the store answered HTTP 502 Bad Gateway [request req_hdr]"
    assert (got.error_type, got.request_id, got.retry_after) == ("api_error", "req_hdr", 2.0)
    odd = parse_error_envelope(418, ["not", "an", "object"])
    assert (type(odd), odd.error_type, odd.message) == (
        StatusError,
        "unknown_error",
        "the store answered HTTP 418",
    )


def test_an_unknown_error_type_is_kept_as_it_came():
    body = {"type": "error", "error": {"type": "new_kind_error", "message": "m"}}
    got = parse_error_envelope(409, body)
    assert (type(got), got.status, got.error_type, got.message) == (
        StatusError,
        409,
        "new_kind_error",
        "m",
    )
