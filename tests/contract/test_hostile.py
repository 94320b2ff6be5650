"""Hostile input at `memfs serve`: each request answers the error store-api.md
documents for it, and changes nothing (every store, memory and version is
as it was before).

Two stores, each with memories: a hostile request names store A, and store
B's memory is the one it tries to reach."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from tests.support import ServerProcess


@dataclass
class Stores:
    http: httpx.Client
    a: str
    b: str
    b_memory: str
    a_memory: str
    a_top: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def snapshot(self) -> dict[str, Any]:
        """Everything the server holds for both stores (and the list of stores)."""
        out: dict[str, Any] = {"stores": self._all("/v1/memory_stores", include_archived="true")}
        for sid in (self.a, self.b):
            base = f"/v1/memory_stores/{sid}"
            out[sid] = {
                "store": self.http.get(base).json(),
                "memories": self._all(base + "/memories", view="full", limit=20),
                "versions": self._all(base + "/memory_versions", view="full", limit=20),
            }
        return out

    def _all(self, url: str, **params: Any) -> list[dict]:
        items: list[dict] = []
        page = None
        while True:
            r = self.http.get(url, params={**params, **({"page": page} if page else {})})
            assert r.status_code == 200, r.text
            body = r.json()
            items += body["data"]
            page = body["next_page"]
            if not page:
                return items


@pytest.fixture
def stores(shared_memfs_server: ServerProcess) -> Iterator[Stores]:
    with shared_memfs_server.http() as http:
        a = http.post("/v1/memory_stores", json={"name": "hostile a"}).json()["id"]
        b = http.post("/v1/memory_stores", json={"name": "hostile b"}).json()["id"]
        made = []
        for sid, path in ((a, "/notes/a.md"), (a, "/top.md"), (b, "/secret.md")):
            r = http.post(f"/v1/memory_stores/{sid}/memories", json={"path": path, "content": path})
            assert r.status_code == 200, r.text
            made.append(r.json())
        yield Stores(
            http, a, b, b_memory=made[2]["id"], a_memory=made[0]["id"], a_top=made[1]["id"]
        )


def cursor(obj: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


# (name, method, url template, json body or raw bytes, params, status, error type)
# {a}: store A; {b}: store B; {bm}: B's memory; {am}: A's /notes/a.md; {tm}: A's /top.md.
M = "/v1/memory_stores/{a}/memories"
HOSTILE = [
    ("dot-dot segment", "POST", M, {"path": "/notes/../top.md", "content": "x"}, {}, 400, "invalid_request_error"),
    ("dot segment", "POST", M, {"path": "/notes/./x.md", "content": "x"}, {}, 400, "invalid_request_error"),
    ("empty segment", "POST", M, {"path": "/notes//x.md", "content": "x"}, {}, 400, "invalid_request_error"),
    ("no leading slash", "POST", M, {"path": "notes/x.md", "content": "x"}, {}, 400, "invalid_request_error"),
    ("root only", "POST", M, {"path": "/", "content": "x"}, {}, 400, "invalid_request_error"),
    ("control character", "POST", M, {"path": "/a\x01b.md", "content": "x"}, {}, 400, "invalid_request_error"),
    ("newline", "POST", M, {"path": "/a\nb.md", "content": "x"}, {}, 400, "invalid_request_error"),
    ("zero-width space", "POST", M, {"path": "/a\u200bb.md", "content": "x"}, {}, 400, "invalid_request_error"),
    ("bidi override", "POST", M, {"path": "/a\u202eb.md", "content": "x"}, {}, 400, "invalid_request_error"),
    ("path over 1,024 bytes", "POST", M, {"path": "/" + "/".join(["d" * 200] * 6), "content": "x"}, {}, 400, "invalid_request_error"),
    ("move to a dot-dot path", "POST", M + "/{am}", {"path": "/../../etc/passwd"}, {}, 400, "invalid_request_error"),
    ("move onto another's folder", "POST", M + "/{tm}", {"path": "/notes"}, {}, 409, "memory_path_conflict_error"),
    ("bad JSON", "POST", M, b'{"path": "/x.md", "content": ', {}, 400, "invalid_request_error"),
    ("JSON not an object", "POST", M, [{"path": "/x.md", "content": "x"}], {}, 400, "invalid_request_error"),
    ("path of a wrong type", "POST", M, {"path": 5, "content": "x"}, {}, 400, "invalid_request_error"),
    ("content of a wrong type", "POST", M, {"path": "/x.md", "content": ["x"]}, {}, 400, "invalid_request_error"),
    ("content null", "POST", M, {"path": "/x.md", "content": None}, {}, 400, "invalid_request_error"),
    ("precondition of a wrong type", "POST", M + "/{am}", {"content": "y", "precondition": "abc"}, {}, 400, "invalid_request_error"),
    ("unknown precondition", "POST", M + "/{am}", {"content": "y", "precondition": {"type": "nope"}}, {}, 400, "invalid_request_error"),
    ("content over the limit", "POST", M, {"path": "/x.md", "content": "x" * 102_401}, {}, 413, "request_too_large"),
    ("a 20 MB body", "POST", M, b'{"path": "/x.md", "content": "' + b"x" * 20_000_000 + b'"}', {}, 413, "request_too_large"),
    ("limit 0", "GET", M, None, {"limit": "0"}, 400, "invalid_request_error"),
    ("limit 101", "GET", M, None, {"limit": "101"}, 400, "invalid_request_error"),
    ("limit huge", "GET", M, None, {"limit": "1" + "0" * 40}, 400, "invalid_request_error"),
    ("limit not a number", "GET", M, None, {"limit": "ten"}, 400, "invalid_request_error"),
    ("page not a cursor", "GET", M, None, {"page": "not-a-cursor!"}, 400, "invalid_request_error"),
    ("page forged", "GET", M, None, {"page": cursor({"after": "/", "store": "{b}"})}, 400, "invalid_request_error"),
    ("page of base64 garbage", "GET", M, None, {"page": base64.b64encode(b"\xff\xfe\x00garbage").decode()}, 400, "invalid_request_error"),
    ("depth negative", "GET", M, None, {"depth": "-1"}, 400, "invalid_request_error"),
    ("path_prefix not a folder", "GET", M, None, {"path_prefix": "/notes"}, 400, "invalid_request_error"),
    ("view unknown", "GET", M, None, {"view": "everything"}, 400, "invalid_request_error"),
    ("encoded separator in a store id", "GET", "/v1/memory_stores/{a}%2Fmemories", None, {}, 404, "not_found_error"),
    ("encoded separator in a memory id", "DELETE", M + "/{am}%2F..", None, {}, 404, "not_found_error"),
    ("encoded dot-dot to another store", "GET", M + "/..%2F..%2F{b}%2Fmemories%2F{bm}", None, {}, 404, "not_found_error"),
    ("another store's memory: get", "GET", M + "/{bm}", None, {}, 404, "not_found_error"),
    ("another store's memory: update", "POST", M + "/{bm}", {"content": "hijacked"}, {}, 404, "not_found_error"),
    ("another store's memory: move", "POST", M + "/{bm}", {"path": "/stolen.md"}, {}, 404, "not_found_error"),
    ("another store's memory: delete", "DELETE", M + "/{bm}", None, {}, 404, "not_found_error"),
    ("another store's memory: its versions", "GET", "/v1/memory_stores/{a}/memory_versions", None, {"memory_id": "{bm}"}, 200, None),
]  # fmt: skip


@pytest.mark.parametrize(
    "name,method,url,body,params,status,error_type", HOSTILE, ids=[h[0] for h in HOSTILE]
)
def test_hostile_requests_answer_their_error_and_change_nothing(
    stores, name, method, url, body, params, status, error_type
):
    ids = {"a": stores.a, "b": stores.b, "bm": stores.b_memory, "am": stores.a_memory,
           "tm": stores.a_top}  # fmt: skip
    url = url.format(**ids)
    params = {k: v.format(**ids) for k, v in params.items()}
    if isinstance(body, dict | list):
        body = json.dumps(body).replace("{b}", stores.b).encode()
    headers = {"content-type": "application/json"} if body is not None else {}
    before = stores.snapshot()

    r = stores.http.request(method, url, content=body, params=params, headers=headers)

    assert r.status_code == status, r.text[:300]
    if error_type is None:
        assert r.json()["data"] == []  # store B's memory's versions are not A's to read
    else:
        answer = r.json()
        assert answer["type"] == "error" and answer["error"]["type"] == error_type, answer
        assert answer["error"]["message"]
        assert answer["request_id"] == r.headers["request-id"]
    assert stores.snapshot() == before


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"authorization": "Bearer wrong"},
        {"x-api-key": "wrong"},
        {"authorization": "Basic eDp5"},
    ],
    ids=["no token", "wrong bearer", "wrong api key", "basic auth"],
)
def test_missing_or_wrong_tokens_answer_401_and_change_nothing(
    stores, shared_memfs_server, headers
):
    before = stores.snapshot()
    url = shared_memfs_server.url
    for method, path, body in (
        ("POST", f"/v1/memory_stores/{stores.a}/memories", {"path": "/x.md", "content": "x"}),
        ("DELETE", f"/v1/memory_stores/{stores.a}/memories/{stores.a_memory}", None),
        ("POST", f"/v1/memory_stores/{stores.a}/archive", {}),
        ("DELETE", f"/v1/memory_stores/{stores.b}", None),
        ("GET", f"/v1/memory_stores/{stores.b}/memories/{stores.b_memory}", None),
    ):
        r = httpx.request(method, url + path, json=body, headers=headers)
        assert r.status_code == 401, r.text
        assert r.json()["error"]["type"] == "authentication_error"
        assert "secret" not in r.text  # the answer holds no content
    assert stores.snapshot() == before


def test_an_nfd_name_is_stored_as_its_nfc_form_and_cannot_be_had_twice(stores):
    url = f"/v1/memory_stores/{stores.a}/memories"
    r = stores.http.post(url, json={"path": "/cafe\u0301.md", "content": "nfd"})
    assert r.status_code == 200, r.text
    assert r.json()["path"] == "/caf\u00e9.md"
    before = stores.snapshot()
    r = stores.http.post(url, json={"path": "/caf\u00e9.md", "content": "nfc"})
    assert r.status_code == 409 and r.json()["error"]["type"] == "memory_path_conflict_error"
    assert stores.snapshot() == before
