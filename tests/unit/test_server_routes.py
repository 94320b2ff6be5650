"""`memfs serve` finds every route of the API by its own method, with the
parameters its path carries; a path with an empty segment where an id
belongs names no route, and every answer, a 405 or a redirect included,
carries a `request-id`."""

from __future__ import annotations

import sqlite3

import pytest
from starlette.testclient import TestClient

from memfs.server import MemoryStoreApp
from memfs.server._db import Database

HEADERS = {"x-api-key": "token", "anthropic-beta": "agent-memory-2026-07-22"}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    db = Database(str(tmp_path_factory.mktemp("routes") / "s.sqlite3"))
    return TestClient(MemoryStoreApp(db, {"token": None}), headers=HEADERS)


def test_every_route_is_found_with_its_parameters(client):
    s = "/v1/memory_stores/memstore_1"
    assert client.get("/v1/memory_stores").json() == {"data": [], "next_page": None}
    for method, path in [
        ("POST", s + "/archive"),
        ("GET", s + "/memories/mem_1"),
        ("DELETE", s + "/memories/mem_1"),
        ("POST", s + "/memory_versions/memver_1/redact"),
    ]:
        r = client.request(method, path)
        assert r.status_code == 404, (method, path)
        assert "no memory store with id 'memstore_1'" in r.json()["error"]["message"]
    r = client.get("/v1/sessions/sesn_1/resources/sesrsc_1")
    assert r.status_code == 400 and "managed-agents" in r.json()["error"]["message"]
    r = client.get("/v1/memory_stores//memories")
    assert r.status_code == 404
    assert r.json()["error"]["message"] == "no route for GET /v1/memory_stores//memories"


def test_a_wrong_method_or_a_trailing_slash_answers_with_a_request_id(client):
    r = client.put("/v1/memory_stores/memstore_1")
    assert r.status_code == 405 and r.json()["type"] == "error"
    assert r.headers["allow"] == "DELETE, GET, HEAD, POST"
    assert r.headers["request-id"] == r.json()["request_id"]
    r = client.get("/v1/memory_stores/?limit=5", follow_redirects=False)
    assert r.status_code == 307
    assert r.headers["location"] == "http://testserver/v1/memory_stores?limit=5"
    assert r.headers["request-id"].startswith("req_")
    r = client.head("/v1/memory_stores")
    assert r.status_code == 200 and r.content == b""


def test_a_fault_answers_a_500_envelope_and_logs_its_route(tmp_path, expect_log):
    db = Database(str(tmp_path / "s.sqlite3"))
    app = MemoryStoreApp(db, {"token": None})
    client = TestClient(app, headers=HEADERS, raise_server_exceptions=False)
    sid = client.post("/v1/memory_stores", json={"name": "s"}).json()["id"]
    with sqlite3.connect(tmp_path / "s.sqlite3") as other:
        other.execute("DROP TABLE memories")
    expect_log("memfs.serve", f"internal error on GET /v1/memory_stores/{sid}/memories", count=1)
    r = client.get(f"/v1/memory_stores/{sid}/memories")
    assert r.status_code == 500
    assert r.json()["error"] == {"type": "api_error", "message": "internal server error"}
    assert r.headers["request-id"] == r.json()["request_id"]
