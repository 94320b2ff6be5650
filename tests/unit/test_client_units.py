"""StoreClient's pure parts: the error mapping, backoff bounds, and that the
token never shows. No server needed."""

from __future__ import annotations

import errno
import json

import httpx
import pytest

from memfs._exceptions import (
    AuthenticationFailed,
    ConfigError,
    InvalidRequest,
    NotFound,
    Overloaded,
    PathConflict,
    PermissionDenied,
    PreconditionFailed,
    RateLimited,
    RequestTooLarge,
    ServerError,
    StatusError,
    TransportError,
)
from memfs.client import StoreClient
from memfs.client._sending import RetryPolicy, status_error, transport_error
from memfs.client._sending import should_retry as _should_retry

TOKEN = "sk-unit-secret-0123456789"


def _answer(status: int, error_type: str | None, message: str = "m", headers=None, **extra):
    if error_type is None:
        content = b"<html>bad gateway</html>"
    else:
        envelope = {
            "type": "error",
            "error": {"type": error_type, "message": message, **extra},
            "request_id": "req_body",
        }
        content = json.dumps(envelope).encode()
    return httpx.Response(status, content=content, headers=headers or {})


@pytest.mark.parametrize(
    ("status", "error_type", "cls"),
    [
        (400, "invalid_request_error", InvalidRequest),
        (401, "authentication_error", AuthenticationFailed),
        (403, "permission_error", PermissionDenied),
        (404, "not_found_error", NotFound),
        (409, "memory_precondition_failed_error", PreconditionFailed),
        (409, "memory_path_conflict_error", PathConflict),
        (413, "request_too_large", RequestTooLarge),
        (429, "rate_limit_error", RateLimited),
        (500, "api_error", ServerError),
        (529, "overloaded_error", Overloaded),
    ],
)
def test_error_table_rows_map_to_their_class(status, error_type, cls):
    err = status_error(_answer(status, error_type, "no memory mem_x"))
    assert type(err) is cls
    assert err.status == status
    assert err.type == error_type
    assert err.request_id == "req_body"
    assert "no memory mem_x" in str(err)
    assert "req_body" in str(err)


def test_type_wins_over_status_and_unknown_5xx_is_server_error():
    assert type(status_error(_answer(400, "not_found_error"))) is NotFound
    bare = status_error(_answer(502, None, headers={"request-id": "req_hdr"}))
    assert type(bare) is ServerError
    assert bare.status == 502
    assert bare.request_id == "req_hdr"
    assert "502" in str(bare)
    odd = status_error(_answer(418, None))
    assert type(odd) is StatusError and odd.status == 418


def test_path_conflict_carries_the_conflicting_memory():
    err = status_error(
        _answer(
            409,
            "memory_path_conflict_error",
            conflicting_memory_id="mem_1",
            conflicting_path="/a",
        )
    )
    assert isinstance(err, PathConflict)
    assert err.conflicting_memory_id == "mem_1"
    assert err.conflicting_path == "/a"


def test_retry_after_is_read_in_seconds():
    err = status_error(_answer(429, "rate_limit_error", headers={"retry-after": "1.5"}))
    assert err.retry_after == 1.5
    assert status_error(_answer(429, "rate_limit_error")).retry_after is None


def test_transport_errors_become_one_sentence():
    refused = httpx.ConnectError("All connection attempts failed")
    refused.__cause__ = ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")
    err = transport_error(refused, "http://127.0.0.1:9", 0.0, 3)
    assert isinstance(err, TransportError)
    assert str(err) == "cannot reach http://127.0.0.1:9: connection refused (after 3 attempts)"
    timed_out = transport_error(httpx.ReadTimeout("x"), "http://h", 2)
    assert str(timed_out) == "cannot reach http://h: no answer within 2 s"


async def test_token_never_in_repr():
    async with StoreClient("http://127.0.0.1:1", TOKEN) as client:
        assert TOKEN not in repr(client)
        assert "127.0.0.1:1" in repr(client)
    async with StoreClient("http://127.0.0.1:1", TOKEN, auth="x-api-key") as client:
        assert TOKEN not in repr(client)


def test_backoff_is_full_jitter_capped_and_honours_retry_after():
    policy = RetryPolicy(backoff_base=0.5, backoff_max=2.0)
    delays = [policy.delay(10, None) for _ in range(200)]
    assert all(0 <= d <= 2.0 for d in delays)
    assert max(delays) > 1.0
    assert all(policy.delay(0, None) <= 0.5 for _ in range(50))
    assert policy.delay(3, 1.25) == 1.25
    assert policy.delay(3, 3600) == 6.0


def test_bad_url_or_auth_is_a_config_error():
    with pytest.raises(ConfigError):
        StoreClient("ftp://h", TOKEN)
    with pytest.raises(ConfigError):
        StoreClient("http://h", TOKEN, auth="basic")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "250", "retry-after": "30"}, 0.25),
        ({"retry-after-ms": "soon", "retry-after": "2"}, 2.0),
        ({"retry-after-ms": "-5"}, 0.0),
        ({"retry-after": "1.5"}, 1.5),
        ({}, None),
    ],
)
def test_retry_after_ms_is_preferred_to_retry_after(headers, seconds):
    err = status_error(_answer(429, "rate_limit_error", headers=headers))
    assert err.retry_after == seconds


@pytest.mark.parametrize(
    ("status", "header", "retried"),
    [
        (408, None, True),
        (429, None, True),
        (500, None, True),
        (529, None, True),
        (409, None, False),
        (400, None, False),
        (409, "true", True),
        (400, "True", True),
        (503, "false", False),
        (429, "false", False),
        (503, "maybe", True),
        (200, "true", False),
    ],
)
def test_x_should_retry_overrides_the_clients_own_rule(status, header, retried):
    headers = {"x-should-retry": header} if header is not None else {}
    assert _should_retry(httpx.Response(status, headers=headers)) is retried


def test_an_http_api_sets_up_no_tls_and_could_accept_no_certificate():
    """memfs serve on loopback (http://) skips loading the CA bundle; the context
    it gets trusts no CA, so nothing could be accepted over it by mistake."""
    import ssl

    from memfs.client._client import _tls_for

    plain = _tls_for("http://127.0.0.1:8080")
    assert isinstance(plain, ssl.SSLContext)
    assert plain.verify_mode == ssl.CERT_REQUIRED and plain.check_hostname
    assert plain.cert_store_stats()["x509_ca"] == 0
    assert _tls_for("https://api.anthropic.com") is True
    assert _tls_for("HTTPS://api.anthropic.com") is True
