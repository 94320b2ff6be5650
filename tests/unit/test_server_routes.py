"""`memfs serve` routes a request by its path's shape; for every path and
method it must pick what Starlette's router would: the same endpoint with
the same parameters, or nothing (then Starlette answers the request)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.routing import Match

from memfs.server import MemoryStoreApp
from memfs.server._db import Database

SEGMENTS = ["", "v1", "memory_stores", "memories", "memory_versions", "archive", "redact", "x"]


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> MemoryStoreApp:
    db = Database(str(tmp_path_factory.mktemp("routes") / "s.sqlite3"))
    return MemoryStoreApp(db, {"token": None})


def starlette_match(app: MemoryStoreApp, method: str, path: str):
    scope = {"type": "http", "method": method, "path": path, "root_path": ""}
    for route in app.app.routes:
        match, child = route.matches(scope)
        if match is Match.FULL:
            return route.endpoint, child["path_params"]
    return None


@given(
    method=st.sampled_from(["GET", "POST", "DELETE", "PUT"]),
    parts=st.lists(st.sampled_from(SEGMENTS), min_size=0, max_size=6),
)
def test_route_table_agrees_with_starlette(app, method, parts):
    path = "/" + "/".join(parts)
    assert app.routes.match(method, path) == starlette_match(app, method, path)


def test_every_route_is_found_with_its_parameters(app):
    s = "/v1/memory_stores/memstore_1"
    for method, path in [
        ("GET", "/v1/memory_stores"),
        ("POST", s + "/archive"),
        ("GET", s + "/memories/mem_1"),
        ("POST", s + "/memory_versions/memver_1/redact"),
    ]:
        found = app.routes.match(method, path)
        assert found is not None and found == starlette_match(app, method, path)
    assert app.routes.match("GET", s + "/memories/") is None
    assert app.routes.match("HEAD", s) is None
