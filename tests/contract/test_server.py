"""`memfs serve` against raw HTTP: every rule the server enforces, as a client sees it.

The server is a real subprocess on loopback with a real SQLite file; the
requests are plain httpx, so these tests pin the wire format itself.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
import trio

from memfs.api import BETA, OLD_BETA
from tests.support import ServerProcess, api_headers
from tests.support.faults import FaultProxy, FaultProxyProcess


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def http(shared_memfs_server: ServerProcess) -> Iterator[httpx.Client]:
    with shared_memfs_server.http() as client:
        yield client


@pytest.fixture
def store(http: httpx.Client) -> str:
    r = http.post("/v1/memory_stores", json={"name": "server test"})
    assert r.status_code == 200, r.text
    return r.json()["id"]


def create(http: httpx.Client, sid: str, path: str, content: str = "x") -> httpx.Response:
    return http.post(f"/v1/memory_stores/{sid}/memories", json={"path": path, "content": content})


def created(http: httpx.Client, sid: str, path: str, content: str = "x") -> dict:
    r = create(http, sid, path, content)
    assert r.status_code == 200, r.text
    return r.json()


def assert_error(r: httpx.Response, status: int, error_type: str) -> dict:
    assert r.status_code == status, r.text
    body = r.json()
    assert body["type"] == "error"
    assert body["error"]["type"] == error_type
    assert body["error"]["message"]
    assert body["request_id"] == r.headers["request-id"]
    return body["error"]


def versions(http: httpx.Client, sid: str, **params) -> list[dict]:
    r = http.get(f"/v1/memory_stores/{sid}/memory_versions", params={"limit": 100, **params})
    assert r.status_code == 200, r.text
    return r.json()["data"]


def list_all(http: httpx.Client, sid: str, **params) -> list[dict]:
    items, page = [], None
    while True:
        query = dict(params, **({"page": page} if page else {}))
        r = http.get(f"/v1/memory_stores/{sid}/memories", params=query)
        assert r.status_code == 200, r.text
        items += r.json()["data"]
        page = r.json()["next_page"]
        if not page:
            return items


# ---- the error table -----------------------------------------------------


def test_bad_json_is_400(http, store):
    r = http.post(
        f"/v1/memory_stores/{store}/memories",
        content=b'{"path": "/a", "content": ',
        headers={"content-type": "application/json"},
    )
    assert "JSON" in assert_error(r, 400, "invalid_request_error")["message"]
    r = http.post(f"/v1/memory_stores/{store}/memories", content=b"[1, 2]")
    assert_error(r, 400, "invalid_request_error")
    r = http.post(f"/v1/memory_stores/{store}/memories", content=b"\xff\xfe")
    assert_error(r, 400, "invalid_request_error")


def test_wrong_types_are_400(http, store):
    assert_error(create(http, store, 42), 400, "invalid_request_error")
    r = http.post(f"/v1/memory_stores/{store}/memories", json={"path": "/a", "content": 3})
    assert_error(r, 400, "invalid_request_error")
    r = http.post(f"/v1/memory_stores/{store}/memories", json={"path": "/a"})
    assert "content" in assert_error(r, 400, "invalid_request_error")["message"]
    r = http.get(f"/v1/memory_stores/{store}/memories", params={"limit": "lots"})
    assert_error(r, 400, "invalid_request_error")
    r = http.get(f"/v1/memory_stores/{store}/memories", params={"limit": 101})
    assert_error(r, 400, "invalid_request_error")
    r = http.get(f"/v1/memory_stores/{store}/memories", params={"depth": 2})
    assert_error(r, 400, "invalid_request_error")
    r = http.get(f"/v1/memory_stores/{store}/memories", params={"view": "everything"})
    assert_error(r, 400, "invalid_request_error")
    r = http.get(f"/v1/memory_stores/{store}/memories", params={"page": "not-a-cursor"})
    assert_error(r, 400, "invalid_request_error")


def test_unauthenticated_is_401(shared_memfs_server, store):
    url = shared_memfs_server.url + "/v1/memory_stores"
    no_key = {k: v for k, v in api_headers().items() if k != "x-api-key"}
    assert_error(httpx.get(url, headers=no_key), 401, "authentication_error")
    assert_error(httpx.get(url, headers=api_headers("wrong-token")), 401, "authentication_error")
    bearer = {**no_key, "authorization": "Bearer wrong-token"}
    assert_error(httpx.get(url, headers=bearer), 401, "authentication_error")


def test_bearer_and_api_key_both_authenticate(shared_memfs_server, store):
    url = shared_memfs_server.url + f"/v1/memory_stores/{store}"
    no_key = {k: v for k, v in api_headers().items() if k != "x-api-key"}
    r = httpx.get(url, headers={**no_key, "authorization": "Bearer test-token"})
    assert r.status_code == 200 and r.json()["id"] == store
    r = httpx.get(url, headers=api_headers())
    assert r.status_code == 200 and r.json()["id"] == store


def test_missing_store_memory_and_version_are_404(http, store):
    assert_error(http.get("/v1/memory_stores/memstore_nope"), 404, "not_found_error")
    assert_error(create(http, "memstore_nope", "/a"), 404, "not_found_error")
    r = http.get(f"/v1/memory_stores/{store}/memories/mem_nope")
    assert "no memory with id 'mem_nope'" in assert_error(r, 404, "not_found_error")["message"]
    r = http.get("/v1/memory_stores/memstore_nope/memories/mem_nope")
    assert "no memory store" in assert_error(r, 404, "not_found_error")["message"]
    r = http.post(f"/v1/memory_stores/{store}/memories/mem_nope", json={"content": "y"})
    assert_error(r, 404, "not_found_error")
    assert_error(
        http.delete(f"/v1/memory_stores/{store}/memories/mem_nope"), 404, "not_found_error"
    )
    r = http.get(f"/v1/memory_stores/{store}/memory_versions/memver_nope")
    assert_error(r, 404, "not_found_error")
    other = http.post("/v1/memory_stores", json={"name": "other"}).json()["id"]
    mem = created(http, other, "/elsewhere")
    r = http.get(f"/v1/memory_stores/{store}/memories/{mem['id']}")
    assert_error(r, 404, "not_found_error")


def test_unknown_route_and_method_answer_the_envelope(http):
    assert_error(http.get("/v1/nothing/here"), 404, "not_found_error")
    r = http.put("/v1/memory_stores")
    assert r.status_code == 405
    assert r.json()["type"] == "error"
    assert r.headers["request-id"] == r.json()["request_id"]


def test_restricted_token_is_403_elsewhere(tmp_path):
    server = ServerProcess(tmp_path / "store.sqlite3", token="admin").start()
    try:
        with server.http() as admin:
            mine = admin.post("/v1/memory_stores", json={"name": "mine"}).json()["id"]
            theirs = admin.post("/v1/memory_stores", json={"name": "theirs"}).json()["id"]
        server.stop()
        token_file = tmp_path / "tokens"
        token_file.write_text(f"limited@{mine}\n")
        server.extra_args = ["--token-file", str(token_file)]
        server.start()
        limited = api_headers("limited")
        r = httpx.get(f"{server.url}/v1/memory_stores/{mine}", headers=limited)
        assert r.status_code == 200
        r = httpx.get(f"{server.url}/v1/memory_stores/{theirs}/memories", headers=limited)
        assert_error(r, 403, "permission_error")
        r = httpx.post(f"{server.url}/v1/memory_stores", headers=limited, json={"name": "x"})
        assert_error(r, 403, "permission_error")
        r = httpx.get(f"{server.url}/v1/memory_stores", headers=limited)
        assert [s["id"] for s in r.json()["data"]] == [mine]
    finally:
        server.stop()


def test_precondition_mismatch_is_409(http, store):
    mem = created(http, store, "/p", "one")
    url = f"/v1/memory_stores/{store}/memories/{mem['id']}"
    stale = {"type": "content_sha256", "content_sha256": sha("zero")}
    r = http.post(url, json={"content": "two", "precondition": stale})
    assert_error(r, 409, "memory_precondition_failed_error")
    assert http.get(url).json()["content"] == "one"
    good = {"type": "content_sha256", "content_sha256": sha("one")}
    r = http.post(url, json={"content": "two", "precondition": good})
    assert r.status_code == 200 and r.json()["content_sha256"] == sha("two")
    r = http.delete(url, params={"expected_content_sha256": sha("one")})
    assert_error(r, 409, "memory_precondition_failed_error")
    r = http.delete(url, params={"expected_content_sha256": ""})  # no sha is ""
    assert_error(r, 409, "memory_precondition_failed_error")
    r = http.delete(url, params={"expected_content_sha256": sha("two")})
    assert r.json() == {"id": mem["id"], "type": "memory_deleted"}


def test_update_that_already_matches_answers_200_despite_precondition(http, store):
    mem = created(http, store, "/same", "content")
    stale = {"type": "content_sha256", "content_sha256": sha("something else")}
    r = http.post(
        f"/v1/memory_stores/{store}/memories/{mem['id']}",
        json={"content": "content", "precondition": stale},
    )
    assert r.status_code == 200
    assert r.json()["memory_version_id"] == mem["memory_version_id"]


def test_path_conflicts_are_409_with_the_conflicting_memory(http, store):
    a = created(http, store, "/a")
    for path in ("/a", "/a/b", "/a/b/c"):
        err = assert_error(create(http, store, path), 409, "memory_path_conflict_error")
        assert err["conflicting_memory_id"] == a["id"]
        assert err["conflicting_path"] == "/a"
    deep = created(http, store, "/d/e/f")
    for path in ("/d", "/d/e"):
        err = assert_error(create(http, store, path), 409, "memory_path_conflict_error")
        assert (err["conflicting_memory_id"], err["conflicting_path"]) == (deep["id"], "/d/e/f")
    created(http, store, "/d/e2")
    created(http, store, "/a-b")
    created(http, store, "/ab/c")
    mover = created(http, store, "/mover")
    r = http.post(f"/v1/memory_stores/{store}/memories/{mover['id']}", json={"path": "/a/x"})
    err = assert_error(r, 409, "memory_path_conflict_error")
    assert err["conflicting_memory_id"] == a["id"]
    r = http.post(
        f"/v1/memory_stores/{store}/memories/{mover['id']}", json={"path": "/mover/inside"}
    )
    assert r.status_code == 200 and r.json()["path"] == "/mover/inside"


def refuse_in_sqlite(db_path, name: str, when: str) -> None:
    """Make the server's own SQLite file refuse some writes with a constraint
    failure, as a concurrent writer on the same file would: a trigger that
    raises ABORT on `when` (e.g. `BEFORE UPDATE ON memories WHEN ...`)."""
    with sqlite3.connect(db_path) as conn:
        conn.execute(f"CREATE TRIGGER {name} {when} BEGIN SELECT RAISE(ABORT, 'refused'); END")


def allow_in_sqlite(db_path, name: str) -> None:
    with sqlite3.connect(db_path) as conn:
        conn.execute(f"DROP TRIGGER {name}")


def test_a_write_sqlite_refuses_as_conflicting_is_409_conflict_error(memfs_server):
    sid = memfs_server.create_store("conflicts")["id"]
    with memfs_server.http() as http:
        mem = created(http, sid, "/kept.md", "before")
        url = f"/v1/memory_stores/{sid}/memories/{mem['id']}"
        refuse_in_sqlite(
            memfs_server.db_path,
            "refuse_update",
            "BEFORE UPDATE ON memories WHEN NEW.content = 'after'",
        )
        refuse_in_sqlite(
            memfs_server.db_path,
            "refuse_create",
            "BEFORE INSERT ON memories WHEN NEW.path = '/new.md'",
        )
        err = assert_error(http.post(url, json={"content": "after"}), 409, "conflict_error")
        assert mem["id"] in err["message"]
        err = assert_error(create(http, sid, "/new.md", "new"), 409, "conflict_error")
        assert "/new.md" in err["message"]
        assert http.get(url).json()["content"] == "before"
        assert [m["path"] for m in list_all(http, sid)] == ["/kept.md"]
        assert len(versions(http, sid)) == 1, "a refused change writes no version"
        allow_in_sqlite(memfs_server.db_path, "refuse_update")
        allow_in_sqlite(memfs_server.db_path, "refuse_create")
        assert http.post(url, json={"content": "after"}).status_code == 200, "a retry may succeed"
        assert create(http, sid, "/new.md", "new").status_code == 200
    assert "Traceback" not in memfs_server.stderr


def test_content_size_boundary_counts_utf8_bytes(http, store):
    exact = "é" * 51_200
    assert len(exact.encode()) == 102_400
    mem = created(http, store, "/big", exact)
    assert mem["content_size_bytes"] == 102_400
    r = create(http, store, "/bigger", exact + "a")
    assert_error(r, 413, "request_too_large")
    r = http.post(f"/v1/memory_stores/{store}/memories/{mem['id']}", json={"content": exact + "!"})
    assert_error(r, 413, "request_too_large")
    assert http.get(f"/v1/memory_stores/{store}/memories/{mem['id']}").json()["content"] == exact


def test_lone_surrogate_content_is_400(http, store):
    body = b'{"path": "/s", "content": "bad \\ud800 half"}'
    r = http.post(f"/v1/memory_stores/{store}/memories", content=body)
    assert "UTF-8" in assert_error(r, 400, "invalid_request_error")["message"]


def test_empty_content_is_allowed(http, store):
    mem = created(http, store, "/empty", "")
    assert mem["content_size_bytes"] == 0
    assert mem["content_sha256"] == sha("")


def test_every_response_has_a_request_id(shared_memfs_server, http, store):
    answers = [
        http.get("/v1/memory_stores"),
        http.get(f"/v1/memory_stores/{store}/memories"),
        http.get("/v1/memory_stores/memstore_missing"),
        http.get("/nowhere"),
        http.patch("/v1/memory_stores"),
        httpx.get(shared_memfs_server.url + "/v1/memory_stores"),
    ]
    ids = [r.headers.get("request-id") for r in answers]
    assert all(ids) and len(set(ids)) == len(ids)


# ---- hostile input: always a 400 envelope, never a 500 ---------------------------


def cursor_of(raw: bytes) -> str:
    """A `page` value that base64-decodes to these bytes, as the server's cursors do."""
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def list_urls(store: str) -> list[str]:
    return [
        "/v1/memory_stores",
        f"/v1/memory_stores/{store}/memories",
        f"/v1/memory_stores/{store}/memory_versions",
    ]


NESTED = b"[" * 100_000 + b"]" * 100_000


def test_deeply_nested_json_body_is_400(http, store):
    mem = created(http, store, "/target.md")
    targets = [
        "/v1/memory_stores",
        f"/v1/memory_stores/{store}",
        f"/v1/memory_stores/{store}/memories",
        f"/v1/memory_stores/{store}/memories/{mem['id']}",
    ]
    for url in targets:
        for body in (NESTED, b'{"name": "n", "path": "/n", "content": ' + NESTED + b"}"):
            r = http.post(url, content=body)
            assert "nested" in assert_error(r, 400, "invalid_request_error")["message"], url
    assert http.get(f"/v1/memory_stores/{store}/memories/{mem['id']}").json()["content"] == "x"


@pytest.mark.parametrize(
    "body",
    [
        b'{"name": "bad \\ud800 half"}',
        b'{"name": "ok", "description": "\\udfff"}',
        b'{"name": "ok", "metadata": {"\\ud800": "v"}}',
        b'{"name": "ok", "metadata": {"k": "\\udc00"}}',
        b'{"name": "ok", "ignored": ["\\ud800"]}',
    ],
    ids=["name", "description", "metadata-key", "metadata-value", "unknown-field"],
)
def test_lone_surrogate_anywhere_in_a_store_body_is_400(http, body):
    r = http.post("/v1/memory_stores", content=body)
    assert "UTF-8" in assert_error(r, 400, "invalid_request_error")["message"]


def test_lone_surrogate_in_a_precondition_is_400(http, store):
    mem = created(http, store, "/pre.md", "one")
    body = b'{"content": "two", "precondition": {"type": "content_sha256", "content_sha256": "\\ud800"}}'
    r = http.post(f"/v1/memory_stores/{store}/memories/{mem['id']}", content=body)
    assert "UTF-8" in assert_error(r, 400, "invalid_request_error")["message"]
    assert http.get(f"/v1/memory_stores/{store}/memories/{mem['id']}").json()["content"] == "one"


def test_surrogate_pairs_in_a_body_are_fine(http, store):
    r = http.post(
        f"/v1/memory_stores/{store}/memories",
        params={"view": "full"},
        content=b'{"path": "/emoji-\\ud83d\\ude00.md", "content": "\\ud83d\\ude00"}',
    )
    assert r.status_code == 200, r.text
    assert (r.json()["path"], r.json()["content"]) == ("/emoji-\U0001f600.md", "\U0001f600")


@pytest.mark.parametrize(
    "page",
    [
        pytest.param("%ED%A0%80", id="percent-encoded"),
        pytest.param(cursor_of(b'["\\ud800", 1]'), id="json-escape-str-int"),
        pytest.param(cursor_of(b'["\\ud800", false]'), id="json-escape-str-bool"),
        pytest.param(cursor_of(b'["\xed\xa0\x80", 1]'), id="raw-bytes-str-int"),
        pytest.param(cursor_of(b'["\xed\xa0\x80", false]'), id="raw-bytes-str-bool"),
    ],
)
def test_page_cursor_holding_a_lone_surrogate_is_400(http, store, page):
    for url in list_urls(store):
        r = http.get(f"{url}?page={page}")
        assert "page" in assert_error(r, 400, "invalid_request_error")["message"], url


@pytest.mark.parametrize("number", [2**63, -(2**63) - 1, 10**30, -1])
def test_page_cursor_holding_an_integer_sqlite_cannot_hold_is_400(http, store, number):
    created(http, store, "/one.md")
    page = cursor_of(json.dumps(["2026-01-01T00:00:00.000000Z", number]).encode())
    for url in list_urls(store):
        r = http.get(url, params={"page": page})
        assert_error(r, 400, "invalid_request_error")


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b"[" * 3000 + b"]" * 3000, id="nested"),
        pytest.param(b'["/a.md", false, 1]', id="too-long"),
        pytest.param(b"{}", id="object"),
        pytest.param(b'["x", NaN]', id="nan"),
        pytest.param(b"\xff\xfe", id="not-utf8"),
    ],
)
def test_malformed_page_cursor_is_400(http, store, raw):
    created(http, store, "/a.md")
    for url in list_urls(store):
        r = http.get(url, params={"page": cursor_of(raw)})
        assert "page" in assert_error(r, 400, "invalid_request_error")["message"], url


def test_page_cursor_with_a_bool_for_a_number_or_a_number_for_a_bool_is_400(http, store):
    created(http, store, "/a.md")
    memories, stores, versions_url = (
        f"/v1/memory_stores/{store}/memories",
        "/v1/memory_stores",
        f"/v1/memory_stores/{store}/memory_versions",
    )
    for url, raw in (
        (stores, b'["2026-01-01T00:00:00.000000Z", true]'),
        (versions_url, b'["2026-01-01T00:00:00.000000Z", false]'),
        (memories, b'["/a.md", 0]'),
        (memories, b'["/a.md", 1]'),
    ):
        r = http.get(url, params={"page": cursor_of(raw)})
        assert "page" in assert_error(r, 400, "invalid_request_error")["message"], (url, raw)


def test_overlong_page_cursor_is_400(http, store):
    page = cursor_of(json.dumps(["/" + "a" * 6000, False]).encode())
    for url in list_urls(store):
        assert_error(http.get(url, params={"page": page}), 400, "invalid_request_error")


@pytest.mark.parametrize(
    "limit",
    ["-1", "0", "101", "1e3", "abc", "", " 5", "+5", "1_0", "\u0663", "5.0", "9" * 30, "9" * 5000],
)
def test_malformed_limit_is_400(http, store, limit):
    for url in list_urls(store):
        r = http.get(url, params={"limit": limit})
        assert "limit" in assert_error(r, 400, "invalid_request_error")["message"], url


def test_a_timestamp_before_the_year_1000_filters_as_any_other(http, store):
    created(http, store, "/now")
    url = f"/v1/memory_stores/{store}/memory_versions"
    for stamp in ("0999-12-31T23:59:59Z", "1000-01-01T00:00:00Z"):
        assert len(http.get(url, params={"created_at[gte]": stamp}).json()["data"]) == 1, stamp
        assert http.get(url, params={"created_at[lte]": stamp}).json()["data"] == [], stamp


@pytest.mark.parametrize("stamp", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_timestamp_outside_what_utc_can_hold_is_400(http, store, stamp):
    for name in ("created_at[gte]", "created_at[lte]"):
        r = http.get(f"/v1/memory_stores/{store}/memory_versions", params={name: stamp})
        assert name in assert_error(r, 400, "invalid_request_error")["message"]


# ---- headers -----------------------------------------------------------------


def test_beta_headers(shared_memfs_server, store):
    url = f"{shared_memfs_server.url}/v1/memory_stores/{store}"
    assert httpx.get(url, headers=api_headers(beta=BETA)).status_code == 200
    assert httpx.get(url, headers=api_headers(beta=OLD_BETA)).status_code == 200
    assert httpx.get(url, headers=api_headers(beta=f"other-beta, {BETA}")).status_code == 200
    assert_error(httpx.get(url, headers=api_headers(beta=None)), 400, "invalid_request_error")
    assert_error(
        httpx.get(url, headers=api_headers(beta="other-beta")), 400, "invalid_request_error"
    )
    both = api_headers(beta=f"{BETA},{OLD_BETA}")
    assert_error(httpx.get(url, headers=both), 400, "invalid_request_error")
    twice = [(k, v) for k, v in api_headers(beta=BETA).items()] + [("anthropic-beta", OLD_BETA)]
    assert_error(httpx.get(url, headers=twice), 400, "invalid_request_error")
    wrong_version = {**api_headers(), "anthropic-version": "1999-01-01"}
    assert_error(httpx.get(url, headers=wrong_version), 400, "invalid_request_error")


@pytest.mark.parametrize(
    "version, status",
    [
        ("2023-06-01", 200),  # memfs's client
        ("2026-10-21", 200),  # the Python SDK 2.10 and later
        ("2026-10-22", 400),
        ("2026-10", 400),
        ("latest", 400),
        ("", 400),
    ],
)
def test_anthropic_version_of_memfs_and_of_the_sdk_are_accepted(
    shared_memfs_server, store, version, status
):
    for url in (
        f"{shared_memfs_server.url}/v1/memory_stores/{store}",
        f"{shared_memfs_server.url}/v1/memory_stores/{store}/memory_versions",
    ):
        r = httpx.get(url, headers={**api_headers(), "anthropic-version": version})
        if status == 200:
            assert r.status_code == 200, r.text
        else:
            assert "anthropic-version" in assert_error(r, 400, "invalid_request_error")["message"]


def test_beta_query_parameter_is_ignored(http, store):
    mem = created(http, store, "/q")
    r = http.get(f"/v1/memory_stores/{store}/memories/{mem['id']}?beta=true")
    assert r.status_code == 200 and r.json()["content"] == "x"
    r = http.post(
        f"/v1/memory_stores/{store}/memories?beta=true", json={"path": "/q2", "content": ""}
    )
    assert r.status_code == 200 and r.json()["path"] == "/q2"


# ---- paths ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "relative",
        "/",
        "",
        "/a//b",
        "/a/",
        "/./a",
        "/a/..",
        "/a\nb",
        "/a\x00b",
        "/a\x7fb",
        "/zero\u200bwidth",
        "/rtl\u202emark",
        "/" + "x" * 1024,
        "/s" * 21,
        "/line\u2028separator",
        "/paragraph\u2029separator",
    ],
)
def test_path_rules(http, store, path):
    assert_error(create(http, store, path), 400, "invalid_request_error")


def test_a_path_has_at_most_20_segments_moves_included(http, store):
    deepest = "/s" * 20
    mem = created(http, store, deepest)
    assert mem["path"] == deepest
    url = f"/v1/memory_stores/{store}/memories/{mem['id']}"
    message = assert_error(
        http.post(url, json={"path": "/t" + deepest}), 400, "invalid_request_error"
    )["message"]
    assert "21 segments" in message
    r = http.get(f"/v1/memory_stores/{store}/memories", params={"path_prefix": deepest + "/s/"})
    assert_error(r, 400, "invalid_request_error")


def test_path_of_exactly_1024_bytes_is_allowed(http, store):
    path = "/" + "é" * 511 + "x"
    assert len(path.encode()) == 1024
    assert created(http, store, path)["path"] == path
    assert_error(create(http, store, path + "y"), 400, "invalid_request_error")


def test_paths_are_stored_nfc_and_case_sensitive(http, store):
    mem = created(http, store, "/cafe\u0301.md")
    assert mem["path"] == "/caf\u00e9.md"
    err = assert_error(create(http, store, "/caf\u00e9.md"), 409, "memory_path_conflict_error")
    assert err["conflicting_memory_id"] == mem["id"]
    created(http, store, "/CAF\u00c9.md")
    listed = [m["path"] for m in list_all(http, store)]
    assert listed == ["/CAF\u00c9.md", "/caf\u00e9.md"]


# ---- listing -------------------------------------------------------------------


def test_depth_one_lists_children_and_folder_rollups(http, store):
    for path in ("/top.md", "/docs/a.md", "/docs/deep/b.md", "/docs-old.md", "/z/y/x.md"):
        created(http, store, path)
    root = list_all(http, store, depth=1)
    assert [(i["type"], i["path"]) for i in root] == [
        ("memory", "/docs-old.md"),
        ("memory_prefix", "/docs/"),
        ("memory", "/top.md"),
        ("memory_prefix", "/z/"),
    ]
    docs = list_all(http, store, depth=1, path_prefix="/docs/")
    assert [(i["type"], i["path"]) for i in docs] == [
        ("memory", "/docs/a.md"),
        ("memory_prefix", "/docs/deep/"),
    ]
    whole = list_all(http, store, path_prefix="/docs/")
    assert [i["path"] for i in whole] == ["/docs/a.md", "/docs/deep/b.md"]
    assert all(i["content"] is None for i in whole)
    r = http.get(f"/v1/memory_stores/{store}/memories", params={"path_prefix": "/docs"})
    assert_error(r, 400, "invalid_request_error")
    r = http.get(f"/v1/memory_stores/{store}/memories", params={"path_prefix": "/do/"})
    assert r.json()["data"] == []


def test_a_cursor_of_another_listing_stays_within_the_prefix(http, store):
    for path in ("/a.md", "/m.md", "/z/only.md"):
        created(http, store, path)
    url = f"/v1/memory_stores/{store}/memories"
    page = http.get(url, params={"limit": 1}).json()["next_page"]  # after /a.md
    r = http.get(url, params={"path_prefix": "/z/", "page": page})
    assert [i["path"] for i in r.json()["data"]] == ["/z/only.md"]


def test_depth_one_pages_across_folders(http, store):
    for i in range(7):
        created(http, store, f"/f{i}/inner/leaf.md")
        created(http, store, f"/f{i}.md")
    seen = []
    page = None
    while True:
        r = http.get(
            f"/v1/memory_stores/{store}/memories",
            params={"depth": 1, "limit": 3, **({"page": page} if page else {})},
        )
        data = r.json()["data"]
        assert len(data) <= 3
        seen += [i["path"] for i in data]
        page = r.json()["next_page"]
        if not page:
            break
    expected = sorted([f"/f{i}.md" for i in range(7)] + [f"/f{i}/" for i in range(7)])
    assert seen == expected


def test_pagination_is_stable_while_writes_happen(http, store):
    for i in range(0, 50, 2):
        created(http, store, f"/m{i:03d}")
    url = f"/v1/memory_stores/{store}/memories"
    first = http.get(url, params={"limit": 10}).json()
    assert [m["path"] for m in first["data"]] == [f"/m{i:03d}" for i in range(0, 20, 2)]
    created(http, store, "/m001")
    created(http, store, "/m041")
    doomed = http.get(url, params={"path_prefix": "/", "limit": 100}).json()["data"][-1]
    http.delete(f"{url}/{doomed['id']}")
    rest, page = [], first["next_page"]
    while page:
        r = http.get(url, params={"limit": 10, "page": page}).json()
        rest += [m["path"] for m in r["data"]]
        page = r["next_page"]
    expected = sorted({f"/m{i:03d}" for i in range(20, 48, 2)} | {"/m041"})
    assert rest == expected


def test_full_view_caps_the_page_at_20(http, store):
    for i in range(25):
        created(http, store, f"/n{i:02d}", f"content {i}")
    r = http.get(f"/v1/memory_stores/{store}/memories", params={"view": "full", "limit": 100})
    data = r.json()["data"]
    assert len(data) == 20 and data[0]["content"] == "content 0"
    assert r.json()["next_page"]
    basic = http.get(f"/v1/memory_stores/{store}/memories", params={"limit": 100}).json()
    assert len(basic["data"]) == 25 and basic["next_page"] is None
    default = http.get(f"/v1/memory_stores/{store}/memories").json()
    assert len(default["data"]) == 20


# ---- the cap and archived stores --------------------------------------------------


def test_store_cap_refuses_creates_but_keeps_edits(tmp_path):
    server = ServerProcess(tmp_path / "s.sqlite3", extra_args=["--max-memories", "3"]).start()
    try:
        sid = server.create_store("capped")["id"]
        with server.http() as http:
            mems = [created(http, sid, f"/m{i}") for i in range(3)]
            err = assert_error(create(http, sid, "/m3"), 400, "invalid_request_error")
            assert "3" in err["message"]
            url = f"/v1/memory_stores/{sid}/memories/{mems[0]['id']}"
            assert (
                http.post(url, json={"content": "still editable", "path": "/moved"}).status_code
                == 200
            )
            assert http.delete(url).status_code == 200
            created(http, sid, "/m3")
    finally:
        server.stop()


def test_archived_store_refuses_writes(http, store):
    mem = created(http, store, "/kept", "old")
    gone = created(http, store, "/gone", "bye")
    archived = http.post(f"/v1/memory_stores/{store}/archive").json()
    assert archived["archived_at"]
    memories = f"/v1/memory_stores/{store}/memories"
    assert_error(create(http, store, "/new"), 400, "invalid_request_error")
    r = http.post(f"{memories}/{mem['id']}", json={"content": "new"})
    assert_error(r, 400, "invalid_request_error")
    r = http.post(f"{memories}/{mem['id']}", json={"path": "/moved"})
    assert_error(r, 400, "invalid_request_error")
    r = http.post(f"/v1/memory_stores/{store}", json={"name": "renamed"})
    assert_error(r, 400, "invalid_request_error")
    assert http.get(f"{memories}/{mem['id']}").json()["content"] == "old"
    # Deleting its memories and redacting their versions stay allowed, as the SDK documents.
    assert http.delete(f"{memories}/{gone['id']}").json()["type"] == "memory_deleted"
    r = http.post(f"/v1/memory_stores/{store}/memory_versions/{gone['memory_version_id']}/redact")
    assert r.status_code == 200 and r.json()["redacted_at"], r.text
    listed = [s["id"] for s in list_all_stores(http)]
    assert store not in listed
    assert store in [s["id"] for s in list_all_stores(http, include_archived="true")]
    assert (
        http.post(f"/v1/memory_stores/{store}/archive").json()["archived_at"]
        == archived["archived_at"]
    )


def list_all_stores(http: httpx.Client, **params) -> list[dict]:
    items, page = [], None
    while True:
        r = http.get(
            "/v1/memory_stores", params={"limit": 100, **params, **({"page": page} if page else {})}
        )
        items += r.json()["data"]
        page = r.json()["next_page"]
        if not page:
            return items


# ---- stores ------------------------------------------------------------------------


def test_store_fields_and_metadata_patch(http):
    r = http.post(
        "/v1/memory_stores",
        json={"name": "Prefs", "description": "d", "metadata": {"a": "1", "b": "2"}},
    )
    s = r.json()
    assert s["type"] == "memory_store" and s["id"].startswith("memstore_")
    assert (s["name"], s["description"], s["metadata"], s["archived_at"]) == (
        "Prefs",
        "d",
        {"a": "1", "b": "2"},
        None,
    )
    assert s["created_at"].endswith("Z")
    r = http.post(f"/v1/memory_stores/{s['id']}", json={"metadata": {"a": None, "c": "3"}})
    assert r.json()["metadata"] == {"b": "2", "c": "3"}
    assert http.get(f"/v1/memory_stores/{s['id']}").json()["metadata"] == {"b": "2", "c": "3"}
    bare = http.post("/v1/memory_stores", json={"name": "bare"}).json()
    assert (bare["description"], bare["metadata"]) == ("", {})


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"name": ""},
        {"name": "x" * 256},
        {"name": "tab\tname"},
        {"name": 5},
        {"name": "ok", "description": "d" * 1025},
        {"name": "ok", "metadata": {f"k{i}": "v" for i in range(17)}},
        {"name": "ok", "metadata": {"k" * 65: "v"}},
        {"name": "ok", "metadata": {"k": "v" * 513}},
        {"name": "ok", "metadata": ["not", "an", "object"]},
    ],
)
def test_store_validation(http, body):
    assert_error(http.post("/v1/memory_stores", json=body), 400, "invalid_request_error")


def test_stores_list_in_creation_order_across_pages(http):
    ids = [
        http.post("/v1/memory_stores", json={"name": f"order {i}"}).json()["id"] for i in range(5)
    ]
    seen, page = [], None
    while True:
        r = http.get(
            "/v1/memory_stores", params={"limit": 2, **({"page": page} if page else {})}
        ).json()
        seen += [s["id"] for s in r["data"]]
        page = r["next_page"]
        if not page:
            break
    assert [i for i in seen if i in ids] == ids


def test_stores_filter_by_created_at(http):
    made = [http.post("/v1/memory_stores", json={"name": f"when {i}"}).json() for i in range(4)]
    first, second, third, _ = (s["created_at"] for s in made)
    between = list_all_stores(http, **{"created_at[gte]": second, "created_at[lte]": third})
    assert [s["id"] for s in between] == [made[1]["id"], made[2]["id"]]
    since = list_all_stores(http, **{"created_at[gte]": third})
    assert [s["id"] for s in since] == [made[2]["id"], made[3]["id"]]
    until = [s["id"] for s in list_all_stores(http, **{"created_at[lte]": first})]
    assert made[0]["id"] in until and made[1]["id"] not in until
    r = http.get("/v1/memory_stores", params={"created_at[gte]": second, "limit": 1})
    assert [s["id"] for s in r.json()["data"]] == [made[1]["id"]]
    r = http.get(
        "/v1/memory_stores",
        params={"created_at[gte]": second, "limit": 1, "page": r.json()["next_page"]},
    )
    assert [s["id"] for s in r.json()["data"]] == [made[2]["id"]]
    http.post(f"/v1/memory_stores/{made[1]['id']}/archive")
    window = {"created_at[gte]": second, "created_at[lte]": third}
    assert [s["id"] for s in list_all_stores(http, **window)] == [made[2]["id"]]
    assert len(list_all_stores(http, include_archived="true", **window)) == 2
    r = http.get("/v1/memory_stores", params={"created_at[lte]": "last week"})
    assert "created_at[lte]" in assert_error(r, 400, "invalid_request_error")["message"]


def test_delete_store_takes_memories_and_versions(http, store):
    mem = created(http, store, "/gone")
    version = mem["memory_version_id"]
    assert http.delete(f"/v1/memory_stores/{store}").json() == {
        "id": store,
        "type": "memory_store_deleted",
    }
    assert_error(http.get(f"/v1/memory_stores/{store}"), 404, "not_found_error")
    assert_error(
        http.get(f"/v1/memory_stores/{store}/memories/{mem['id']}"), 404, "not_found_error"
    )
    r = http.get(f"/v1/memory_stores/{store}/memory_versions/{version}")
    assert_error(r, 404, "not_found_error")


# ---- memories and versions ------------------------------------------------------------


def test_memory_object_and_views(http, store):
    mem = created(http, store, "/notes/today.md", "hello")
    assert mem["type"] == "memory" and mem["id"].startswith("mem_")
    assert mem["memory_store_id"] == store
    assert mem["content"] is None and mem["content_sha256"] == sha("hello")
    assert mem["content_size_bytes"] == 5 and mem["memory_version_id"].startswith("memver_")
    url = f"/v1/memory_stores/{store}/memories/{mem['id']}"
    assert http.get(url).json() == {**mem, "content": "hello"}
    assert http.get(url, params={"view": "basic"}).json() == mem


def test_create_and_update_answer_the_basic_view_unless_asked_for_full(http, store):
    memories = f"/v1/memory_stores/{store}/memories"
    basic = created(http, store, "/basic.md", "made")
    assert basic["content"] is None and basic["content_sha256"] == sha("made")
    r = http.post(memories, params={"view": "full"}, json={"path": "/full.md", "content": "made"})
    assert r.status_code == 200 and r.json()["content"] == "made"
    url = f"{memories}/{basic['id']}"
    changed = http.post(url, json={"content": "changed"}).json()
    assert changed["content"] is None and changed["content_sha256"] == sha("changed")
    moved = http.post(url, json={"path": "/moved.md"}).json()
    assert (moved["path"], moved["content"]) == ("/moved.md", None)
    unchanged = http.post(url, json={"path": "/moved.md"}).json()
    assert unchanged == moved, "a no-op answers the same basic view"
    r = http.post(url, params={"view": "full"}, json={"content": "again"})
    assert r.status_code == 200 and r.json()["content"] == "again"
    r = http.post(url, params={"view": "all"}, json={"content": "refused"})
    assert_error(r, 400, "invalid_request_error")


def test_noop_update_answers_200_and_writes_no_version(http, store):
    mem = created(http, store, "/same", "text")
    url = f"/v1/memory_stores/{store}/memories/{mem['id']}"
    for body in ({"content": "text"}, {"path": "/same"}, {"content": "text", "path": "/same"}):
        r = http.post(url, json=body)
        assert r.status_code == 200
        assert r.json()["memory_version_id"] == mem["memory_version_id"]
        assert r.json()["updated_at"] == mem["updated_at"]
    assert len(versions(http, store, memory_id=mem["id"])) == 1


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"content": None},
        {"path": None},
        {"content": None, "path": None},
        {"precondition": {"type": "content_sha256", "content_sha256": sha("text")}},
    ],
)
def test_update_without_content_or_path_is_400(http, store, body):
    mem = created(http, store, "/kept.md", "text")
    url = f"/v1/memory_stores/{store}/memories/{mem['id']}"
    err = assert_error(http.post(url, json=body), 400, "invalid_request_error")
    assert "content" in err["message"] and "path" in err["message"]
    r = http.post(url, content=b"")
    assert_error(r, 400, "invalid_request_error")
    assert len(versions(http, store, memory_id=mem["id"])) == 1


def test_one_version_per_change_with_the_state_after_it(http, store):
    mem = created(http, store, "/v.md", "one")
    url = f"/v1/memory_stores/{store}/memories/{mem['id']}"
    after_content = http.post(url, json={"content": "two"}).json()
    after_move = http.post(url, json={"path": "/w.md"}).json()
    after_both = http.post(url, json={"path": "/x.md", "content": "three"}).json()
    assert http.delete(url).status_code == 200
    feed = versions(http, store, memory_id=mem["id"], view="full")
    assert [v["operation"] for v in feed] == [
        "deleted",
        "modified",
        "modified",
        "modified",
        "created",
    ]
    assert [(v["path"], v["content"]) for v in feed] == [
        ("/x.md", None),
        ("/x.md", "three"),
        ("/w.md", "two"),
        ("/v.md", "two"),
        ("/v.md", "one"),
    ]
    assert [v["id"] for v in feed[1:]] == [
        after_both["memory_version_id"],
        after_move["memory_version_id"],
        after_content["memory_version_id"],
        mem["memory_version_id"],
    ]
    deleted, *changes = feed
    assert (deleted["content_sha256"], deleted["content_size_bytes"]) == (None, None)
    for v in feed:
        assert v["type"] == "memory_version" and v["memory_store_id"] == store
        assert v["created_by"]["type"] == "api_actor"
        assert v["created_by"]["api_key_id"] and "test-token" not in json.dumps(v)
    for v in changes:
        assert v["content_sha256"] == sha(v["content"])
        assert v["content_size_bytes"] == len(v["content"].encode())
    stamps = [v["created_at"] for v in feed]
    assert stamps == sorted(stamps, reverse=True) and len(set(stamps)) == len(stamps)
    assert all(v["content"] is None for v in versions(http, store, memory_id=mem["id"]))


def test_an_api_key_is_an_api_actor_in_either_header(shared_memfs_server, http, store):
    """SDK 2.x sends `api_key=` as `Authorization: Bearer`: a token of the
    server is an API key however it travels, one `api_key_id` for both."""
    bearer = {k: v for k, v in api_headers().items() if k != "x-api-key"}
    bearer["authorization"] = "Bearer test-token"
    r = httpx.post(
        f"{shared_memfs_server.url}/v1/memory_stores/{store}/memories",
        headers=bearer,
        json={"path": "/by-bearer", "content": ""},
    )
    assert r.status_code == 200, r.text
    created(http, store, "/by-x-api-key")
    actors = [v["created_by"] for v in versions(http, store)]
    assert [a["type"] for a in actors] == ["api_actor", "api_actor"]
    assert actors[0] == actors[1] and "test-token" not in json.dumps(actors)
    found = versions(http, store, api_key_id=actors[0]["api_key_id"])
    assert sorted(v["path"] for v in found) == ["/by-bearer", "/by-x-api-key"]


def bearer_headers(token: str) -> dict[str, str]:
    headers = {k: v for k, v in api_headers().items() if k != "x-api-key"}
    headers["authorization"] = f"Bearer {token}"
    return headers


def test_user_tokens_record_user_actor(tmp_path):
    (tmp_path / "tokens").write_text("# the people\nuser:alice:alice-secret\n")
    server = ServerProcess(
        tmp_path / "s.sqlite3", extra_args=["--token-file", str(tmp_path / "tokens")]
    ).start()
    try:
        sid = server.create_store("users")["id"]
        memories = f"{server.url}/v1/memory_stores/{sid}/memories"
        r = httpx.post(
            memories, headers=api_headers("alice-secret"), json={"path": "/k.md", "content": ""}
        )
        assert r.status_code == 200, r.text
        r = httpx.post(
            f"{memories}/{r.json()['id']}",
            headers=bearer_headers("alice-secret"),
            json={"content": "by bearer"},
        )
        assert r.status_code == 200, r.text
        r = httpx.get(memories, headers=api_headers("user:alice:alice-secret"))
        assert_error(r, 401, "authentication_error")
        with server.http() as http:
            feed = versions(http, sid)
            by_test_token = created(http, sid, "/t.md")
        assert [v["created_by"] for v in feed] == [
            {"type": "user_actor", "user_id": "user_alice"}
        ] * 2
        assert "alice-secret" not in json.dumps(feed)
        with server.http() as http:
            mine = http.get(
                f"/v1/memory_stores/{sid}/memory_versions/{by_test_token['memory_version_id']}"
            ).json()
        assert mine["created_by"]["type"] == "api_actor", "other tokens are as before"
    finally:
        server.stop()


def test_user_tokens_may_be_limited_and_come_from_the_environment(tmp_path):
    server = ServerProcess(tmp_path / "s.sqlite3", token="admin").start()
    try:
        mine = server.create_store("mine")["id"]
        theirs = server.create_store("theirs")["id"]
        server.stop()
        server.env = {
            "MEMFS_SERVE_TOKEN": f"user:bob.b-1:bob-secret@{mine},plain:token:with:colons"
        }
        server.start()
        r = httpx.post(
            f"{server.url}/v1/memory_stores/{mine}/memories",
            headers=bearer_headers("bob-secret"),
            json={"path": "/b.md", "content": "b"},
        )
        assert r.status_code == 200, r.text
        r = httpx.get(
            f"{server.url}/v1/memory_stores/{theirs}/memories", headers=api_headers("bob-secret")
        )
        assert_error(r, 403, "permission_error")
        plain = api_headers("plain:token:with:colons")
        v = httpx.get(f"{server.url}/v1/memory_stores/{mine}/memory_versions", headers=plain)
        assert [x["created_by"] for x in v.json()["data"]] == [
            {"type": "user_actor", "user_id": "user_bob.b-1"}
        ]
        r = httpx.post(
            f"{server.url}/v1/memory_stores/{mine}/memories",
            headers=plain,
            json={"path": "/p.md", "content": ""},
        )
        v = httpx.get(
            f"{server.url}/v1/memory_stores/{mine}/memory_versions/{r.json()['memory_version_id']}",
            headers=plain,
        )
        assert v.json()["created_by"]["type"] == "api_actor"
    finally:
        server.stop()


@pytest.mark.parametrize(
    "entry", ["user:", "user:alice", "user:alice:", "user:a b:secret", "user::x"]
)
def test_a_malformed_user_token_is_one_sentence(tmp_path, entry):
    (tmp_path / "tokens").write_text(entry + "\n")
    r = subprocess.run(
        [sys.executable, "-m", "memfs", "serve", "--port", "0"]
        + ["--token-file", str(tmp_path / "tokens"), "--db", str(tmp_path / "s.sqlite3")],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("memfs: ") and len(r.stderr.strip().splitlines()) == 1
    assert "user:NAME:TOKEN" in r.stderr and "Traceback" not in r.stderr


def test_version_filters(http, store):
    a = created(http, store, "/a", "1")
    b = created(http, store, "/b", "1")
    http.post(f"/v1/memory_stores/{store}/memories/{a['id']}", json={"content": "2"})
    http.delete(f"/v1/memory_stores/{store}/memories/{b['id']}")
    everything = versions(http, store)
    assert [v["operation"] for v in everything] == ["deleted", "modified", "created", "created"]
    assert [v["operation"] for v in versions(http, store, operation="created")] == ["created"] * 2
    assert {v["memory_id"] for v in versions(http, store, memory_id=b["id"])} == {b["id"]}
    middle = everything[1]["created_at"]
    since = versions(http, store, **{"created_at[gte]": middle})
    assert [v["id"] for v in since] == [v["id"] for v in everything[:2]]
    until = versions(http, store, **{"created_at[lte]": middle})
    assert [v["id"] for v in until] == [v["id"] for v in everything[1:]]
    r = http.get(
        f"/v1/memory_stores/{store}/memory_versions", params={"created_at[gte]": "yesterday"}
    )
    assert_error(r, 400, "invalid_request_error")
    r = http.get(f"/v1/memory_stores/{store}/memory_versions", params={"operation": "renamed"})
    assert_error(r, 400, "invalid_request_error")
    pages, page = [], None
    while True:
        r = http.get(
            f"/v1/memory_stores/{store}/memory_versions",
            params={"limit": 1, **({"page": page} if page else {})},
        ).json()
        pages += [v["id"] for v in r["data"]]
        page = r["next_page"]
        if not page:
            break
    assert pages == [v["id"] for v in everything]


def test_versions_filter_by_session_id_and_api_key_id(shared_memfs_server, http, store):
    by_key = created(http, store, "/by-key.md")
    session = shared_memfs_server.create_session(store)
    session_id = session["id"]
    bearer = {k: v for k, v in api_headers().items() if k != "x-api-key"}
    bearer["authorization"] = f"Bearer {session['sessions_token']}"
    with httpx.Client(base_url=shared_memfs_server.url, headers=bearer) as agent:
        r = agent.post(
            f"/v1/memory_stores/{store}/memories", json={"path": "/by-session.md", "content": ""}
        )
        by_session = r.json()
        agent.post(f"/v1/memory_stores/{store}/memories/{by_key['id']}", json={"content": "edited"})
    everything = versions(http, store)
    assert len(everything) == 3
    api_key_id = everything[-1]["created_by"]["api_key_id"]
    mine = versions(http, store, session_id=session_id)
    assert [(v["memory_id"], v["operation"]) for v in mine] == [
        (by_key["id"], "modified"),
        (by_session["id"], "created"),
    ]
    assert all(v["created_by"] == {"type": "session_actor", "session_id": session_id} for v in mine)
    keyed = versions(http, store, api_key_id=api_key_id)
    assert [v["id"] for v in keyed] == [by_key["memory_version_id"]]
    assert versions(http, store, session_id="sesn_nobody") == []
    assert versions(http, store, api_key_id=session_id) == []
    assert versions(http, store, session_id=session_id, api_key_id=api_key_id) == []
    assert versions(http, store, service_account_id="svac_nobody") == []
    one = versions(http, store, session_id=session_id, operation="created")
    assert [v["memory_id"] for v in one] == [by_session["id"]]
    pages, page = [], None
    while True:
        query = {"session_id": session_id, "limit": 1, **({"page": page} if page else {})}
        r = http.get(f"/v1/memory_stores/{store}/memory_versions", params=query).json()
        pages += [v["id"] for v in r["data"]]
        page = r["next_page"]
        if not page:
            break
    assert pages == [v["id"] for v in mine]


def test_service_account_tokens_record_and_filter_by_their_actor(tmp_path):
    entry = "service_account:indexer:svac-secret"
    with ServerProcess(tmp_path / "s.sqlite3", env={"MEMFS_SERVE_TOKEN": entry}) as server:
        sid = server.create_store("service accounts")["id"]
        with server.http() as http:
            created(http, sid, "/by-key.md")
            with httpx.Client(base_url=server.url, headers=bearer_headers("svac-secret")) as svc:
                assert create(svc, sid, "/by-indexer.md").status_code == 200
            everything = versions(http, sid)
            assert everything[0]["created_by"] == {
                "type": "service_account_actor",
                "service_account_id": "svac_indexer",
            }
            mine = versions(http, sid, service_account_id="svac_indexer")
            assert [v["path"] for v in mine] == ["/by-indexer.md"]
            assert versions(http, sid, service_account_id="svac_other") == []
            assert len(everything) == 2


def test_a_deleted_version_keeps_its_path_and_no_content(memfs_server):
    sid = memfs_server.create_store("deleted versions")["id"]
    with memfs_server.http() as http:
        mem = created(http, sid, "/gone.md", "private words")
        http.delete(f"/v1/memory_stores/{sid}/memories/{mem['id']}")
        deleted = versions(http, sid, operation="deleted", view="full")
        (one,) = deleted
        assert (one["path"], one["content"], one["content_sha256"], one["content_size_bytes"]) == (
            "/gone.md",
            None,
            None,
            None,
        )
        got = http.get(f"/v1/memory_stores/{sid}/memory_versions/{one['id']}").json()
        assert got == one
    db = sqlite3.connect(memfs_server.db_path)
    try:
        rows = db.execute(
            "SELECT content, content_sha256 FROM versions WHERE operation = 'deleted'"
        )
        assert list(rows) == [(None, None)]
    finally:
        db.close()


def test_redaction(http, store):
    mem = created(http, store, "/secret", "password=hunter2")
    url = f"/v1/memory_stores/{store}/memories/{mem['id']}"
    versions_url = f"/v1/memory_stores/{store}/memory_versions"
    r = http.post(f"{versions_url}/{mem['memory_version_id']}/redact", json={})
    assert "current" in assert_error(r, 400, "invalid_request_error")["message"]
    http.post(url, json={"content": "nothing to see"})
    r = http.post(f"{versions_url}/{mem['memory_version_id']}/redact", json={})
    assert r.status_code == 200
    red = r.json()
    assert (red["content"], red["path"], red["content_sha256"], red["content_size_bytes"]) == (
        None,
    ) * 4
    assert red["redacted_at"] and red["redacted_by"]["type"] == "api_actor"
    assert red["operation"] == "created" and red["memory_id"] == mem["id"]
    assert http.get(f"{versions_url}/{mem['memory_version_id']}").json() == red
    assert http.get(url).json()["content"] == "nothing to see"
    http.delete(url)
    last = versions(http, store, memory_id=mem["id"])
    assert last[0]["operation"] == "deleted"
    assert http.post(f"{versions_url}/{last[1]['id']}/redact", json={}).status_code == 200
    assert_error(http.post(f"{versions_url}/memver_nope/redact", json={}), 404, "not_found_error")


async def test_concurrent_clients_all_land(shared_memfs_server, store):
    async with httpx.AsyncClient(
        base_url=shared_memfs_server.url, headers=shared_memfs_server.headers()
    ) as client:
        results = {}

        async def put(i: int) -> None:
            r = await client.post(
                f"/v1/memory_stores/{store}/memories", json={"path": f"/c/{i}", "content": str(i)}
            )
            results[i] = r.status_code

        async with trio.open_nursery() as nursery:
            for i in range(30):
                nursery.start_soon(put, i)
    assert set(results.values()) == {200} and len(results) == 30
    with shared_memfs_server.http() as http:
        assert len(list_all(http, store, path_prefix="/c/")) == 30
        assert len(versions(http, store)) == 30


# ---- the process ---------------------------------------------------------------------


def test_data_survives_restart(memfs_server):
    sid = memfs_server.create_store("durable")["id"]
    with memfs_server.http() as http:
        mem = created(http, sid, "/keep.md", "kept")
        before = versions(http, sid)
    memfs_server.restart()
    with memfs_server.http() as http:
        got = http.get(f"/v1/memory_stores/{sid}/memories/{mem['id']}", params={"view": "basic"})
        assert got.json() == mem
        assert versions(http, sid) == before
        later = http.post(
            f"/v1/memory_stores/{sid}/memories/{mem['id']}", json={"content": "new"}
        ).json()
    assert later["updated_at"] > mem["updated_at"]


def test_timestamps_strictly_increase_across_restarts(memfs_server):
    """Even when the clock steps back while the server is down (here: the last
    version written stands an hour ahead of it), every version, memory and
    store written after the restart is stamped later than anything before."""
    sid = memfs_server.create_store("stamps")["id"]
    written = []  # version ids, in the order of the writes
    with memfs_server.http() as http:
        mem = created(http, sid, "/t.md", "0")
        written.append(mem["memory_version_id"])
        for i in range(1, 4):
            r = http.post(f"/v1/memory_stores/{sid}/memories/{mem['id']}", json={"content": str(i)})
            assert r.status_code == 200, r.text
            written.append(r.json()["memory_version_id"])
    memfs_server.stop()
    ahead = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    conn = sqlite3.connect(memfs_server.db_path)
    with conn:
        conn.execute("UPDATE versions SET created_at = ? WHERE id = ?", (ahead, written[-1]))
    conn.close()
    memfs_server.start()
    other = memfs_server.create_store("after the restart")
    assert other["created_at"] > ahead and other["updated_at"] > ahead
    with memfs_server.http() as http:
        r = http.post(f"/v1/memory_stores/{sid}/memories/{mem['id']}", json={"content": "later"})
        assert r.status_code == 200, r.text
        assert r.json()["updated_at"] > ahead
        written.append(r.json()["memory_version_id"])
        for i in range(3):
            new = created(http, sid, f"/new{i}.md", "after")
            assert new["created_at"] > ahead
            written.append(new["memory_version_id"])
        stamp = {v["id"]: v["created_at"] for v in versions(http, sid)}
    stamps = [stamp[version_id] for version_id in written]
    assert stamps[3] == ahead
    assert all(a < b for a, b in itertools.pairwise(stamps)), stamps


def test_a_killed_server_keeps_what_it_answered(memfs_server):
    sid = memfs_server.create_store("crash")["id"]
    with memfs_server.http() as http:
        mem = created(http, sid, "/acked", "answered before the crash")
    memfs_server.kill()
    memfs_server.start()
    with memfs_server.http() as http:
        got = http.get(f"/v1/memory_stores/{sid}/memories/{mem['id']}").json()
        assert (got["content"], got["memory_version_id"]) == (
            "answered before the crash",
            mem["memory_version_id"],
        )


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signals_shut_down_cleanly(memfs_server, signum):
    proc = memfs_server.proc
    proc.send_signal(signum)
    assert proc.wait(10) == 0
    assert "Traceback" not in memfs_server.stderr


def test_a_server_whose_output_pipe_was_closed_still_stops_on_sigterm(tmp_path):
    """`memfs serve 2>&1 | head -2`: the reader is gone when the signal comes."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "memfs", "serve", "--port", "0", "--db", str(tmp_path / "s.db")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "MEMFS_SERVE_TOKEN": "t" * 32},
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith(b"http://")
        assert b"listening on" in proc.stdout.readline()
        proc.stdout.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    finally:
        proc.kill()
        proc.wait()


class UmaskServer(ServerProcess):
    """`memfs serve` started under `sh -c 'umask MASK; exec ...'`."""

    def __init__(self, db_path, umask: int, stderr_path) -> None:
        super().__init__(db_path)
        self.umask = umask
        self.stderr_path = stderr_path

    def command(self) -> list[str]:
        return ["sh", "-c", f'umask {self.umask:03o}; exec "$@"', "sh", *super().command()]


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("umask", [0o000, 0o022], ids=["umask-000", "umask-022"])
def test_database_and_its_folders_are_private_whatever_the_umask(tmp_path, umask):
    tmp_path.chmod(0o755)
    db = tmp_path / "made" / "by" / "memfs" / "store.sqlite3"
    server = UmaskServer(db, umask, tmp_path / "stderr.log").start()
    try:
        server.create_store("private")
        files = [db, db.with_name("store.sqlite3-wal"), db.with_name("store.sqlite3-shm")]
        assert {f.name: oct(mode(f)) for f in files} == {f.name: "0o600" for f in files}
        folders = [tmp_path / "made", tmp_path / "made" / "by", db.parent]
        assert [oct(mode(d)) for d in folders] == ["0o700"] * 3
        assert mode(tmp_path) == 0o755, "a folder memfs did not create is left alone"
    finally:
        server.stop()
    server.start()
    try:
        with server.http() as http:
            assert [s["name"] for s in list_all_stores(http)] == ["private"]
        files = [db, db.with_name("store.sqlite3-wal"), db.with_name("store.sqlite3-shm")]
        assert [oct(mode(f)) for f in files] == ["0o600"] * 3, "the same after a restart"
    finally:
        server.stop()


def test_without_a_token_one_is_generated_and_printed(tmp_path):
    server = ServerProcess(tmp_path / "s.sqlite3", token="")
    server.start()
    try:
        line = [x for x in server.stderr.splitlines() if "generated token:" in x]
        assert len(line) == 1
        token = line[0].rsplit(":", 1)[1].strip()
        assert (
            httpx.get(server.url + "/v1/memory_stores", headers=api_headers(token)).status_code
            == 200
        )
        assert (
            httpx.get(server.url + "/v1/memory_stores", headers=api_headers("x")).status_code == 401
        )
    finally:
        server.stop()


def test_tokens_from_the_environment(tmp_path):
    server = ServerProcess(tmp_path / "s.sqlite3", token="", env={"MEMFS_SERVE_TOKEN": "one, two"})
    server.start()
    try:
        for token in ("one", "two"):
            r = httpx.get(server.url + "/v1/memory_stores", headers=api_headers(token))
            assert r.status_code == 200
        assert "generated token" not in server.stderr
    finally:
        server.stop()


def test_demo_store_is_created_once(tmp_path):
    server = ServerProcess(
        tmp_path / "s.sqlite3", extra_args=["--demo-store", "Demo Notes"]
    ).start()
    try:
        first = [x for x in server.stderr.splitlines() if "demo store Demo Notes:" in x][-1].rsplit(
            " ", 1
        )[1]
        server.restart()
        second = [x for x in server.stderr.splitlines() if "demo store Demo Notes:" in x][
            -1
        ].rsplit(" ", 1)[1]
        assert first == second and first.startswith("memstore_")
        with server.http() as http:
            paths = [m["path"] for m in list_all(http, first)]
        assert "/README.md" in paths
    finally:
        server.stop()


def test_port_in_use_is_one_sentence(memfs_server, tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "memfs",
            "serve",
            "--port",
            str(memfs_server.port),
            "--db",
            str(tmp_path / "other.sqlite3"),
        ],
        capture_output=True,
        text=True,
        timeout=20,
        env={**os.environ, "MEMFS_SERVE_TOKEN": "t"},
    )
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("memfs: cannot listen on 127.0.0.1")
    assert "Traceback" not in r.stderr


def test_help_shows_the_flags():
    r = subprocess.run(
        [sys.executable, "-m", "memfs", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert r.returncode == 0
    for flag in (
        "--db",
        "--host",
        "--port",
        "--max-memories",
        "--token-file",
        "--token",
        "--max-connections",
        "--client-timeout",
        "--demo-store",
    ):
        assert flag in r.stdout


# ---- faults from the proxy: the rest of the error table --------------------------------


async def test_fault_proxy_answers_429_500_529_and_passes_through(shared_memfs_server, store):
    async with (
        FaultProxy(shared_memfs_server.url) as proxy,
        httpx.AsyncClient(base_url=proxy.url, headers=shared_memfs_server.headers()) as client,
    ):
        r = await client.get(f"/v1/memory_stores/{store}")
        assert r.status_code == 200 and r.json()["id"] == store
        for status, error_type in (
            (429, "rate_limit_error"),
            (500, "api_error"),
            (529, "overloaded_error"),
        ):
            proxy.set(status=status, status_rate=1.0, retry_after=1.5)
            r = await client.get(f"/v1/memory_stores/{store}")
            assert_error(r, status, error_type)
            if status == 429:
                assert r.headers["retry-after"] == "1.5"
        proxy.set(status_rate=0.0)
        assert (await client.get(f"/v1/memory_stores/{store}")).status_code == 200
        assert proxy.requests_seen == 5


async def test_fault_proxy_drops_delays_outages_and_matches(shared_memfs_server, store):
    path = f"/v1/memory_stores/{store}"
    async with FaultProxy(shared_memfs_server.url, seed=1) as proxy:
        async with httpx.AsyncClient(
            base_url=proxy.url, headers=shared_memfs_server.headers()
        ) as client:
            proxy.set(drop_next=1)
            with pytest.raises(httpx.TransportError):
                await client.get(path)
            assert (await client.get(path)).status_code == 200
            proxy.set(delay=0.3)
            started = trio.current_time()
            assert (await client.get(path)).status_code == 200
            assert trio.current_time() - started >= 0.3
            proxy.set(delay=0.0, status=529, status_rate=1.0, match_method="POST")
            assert (await client.get(path)).status_code == 200
            assert (await client.post(path, json={})).status_code == 529
            proxy.set(status_rate=0.0, match_method=None, down=True)
        async with httpx.AsyncClient(
            base_url=proxy.url, headers=shared_memfs_server.headers()
        ) as client:
            with pytest.raises(httpx.TransportError):
                await client.get(path)
            proxy.set(down=False)
            assert (await client.get(path)).status_code == 200
        assert proxy.counters.drops_injected == 1 and proxy.counters.statuses_injected == 1


def test_fault_proxy_as_a_process(shared_memfs_server, store):
    with FaultProxyProcess(shared_memfs_server.url) as proxy:
        url = f"{proxy.url}/v1/memory_stores/{store}"
        headers = shared_memfs_server.headers()
        assert httpx.get(url, headers=headers).status_code == 200
        proxy.set(status=429, status_next=2, retry_after=1.5)
        first = httpx.get(url, headers=headers)
        assert_error(first, 429, "rate_limit_error")
        assert first.headers["retry-after"] == "1.5"
        assert httpx.get(url, headers=headers).status_code == 429
        assert httpx.get(url, headers=headers).status_code == 200
        state = proxy.state()
        assert state["counters"]["requests_seen"] == 4
        assert state["counters"]["statuses_injected"] == 2


def test_fault_proxy_process_refuses_a_bad_setting_in_one_sentence(shared_memfs_server):
    with FaultProxyProcess(shared_memfs_server.url) as proxy:
        with pytest.raises(TypeError, match="no fault setting 'stauts'"):
            proxy.set(stauts=529)
        with pytest.raises(ValueError, match="status_rate must be a share from 0 to 1, not 1.5"):
            proxy.set(status=529, status_rate=1.5)
        assert proxy.state()["settings"]["status"] == 500, "nothing changed"
        assert proxy.counters().requests_seen == 0


async def test_fault_proxy_can_lose_the_answer_of_an_applied_change(shared_memfs_server, store):
    async with (
        FaultProxy(shared_memfs_server.url) as proxy,
        httpx.AsyncClient(base_url=proxy.url, headers=shared_memfs_server.headers()) as client,
    ):
        proxy.set(lose_answer_next=1)
        with pytest.raises(httpx.TransportError):
            await client.post(
                f"/v1/memory_stores/{store}/memories", json={"path": "/applied", "content": "yes"}
            )
        r = await client.get(f"/v1/memory_stores/{store}/memories")
        assert [m["path"] for m in r.json()["data"]] == ["/applied"]
        assert proxy.counters.answers_lost == 1
