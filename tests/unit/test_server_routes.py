"""`memfs serve` routes through Starlette's router: every route of the API
is found, by its own method, with the parameters its path carries; a path
with an empty segment where an id belongs names no route."""

from __future__ import annotations

import pytest
from starlette.routing import Match

from memfs.server import MemoryStoreApp
from memfs.server._db import Database


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


def test_every_route_is_found_with_its_parameters(app):
    s = "/v1/memory_stores/memstore_1"
    endpoints = set()
    for method, path, params in [
        ("GET", "/v1/memory_stores", {}),
        ("POST", s + "/archive", {"sid": "memstore_1"}),
        ("GET", s + "/memories/mem_1", {"sid": "memstore_1", "mid": "mem_1"}),
        ("DELETE", s + "/memories/mem_1", {"sid": "memstore_1", "mid": "mem_1"}),
        (
            "POST",
            s + "/memory_versions/memver_1/redact",
            {"sid": "memstore_1", "vid": "memver_1"},
        ),
    ]:
        found = starlette_match(app, method, path)
        assert found is not None and found[1] == params, (method, path)
        endpoints.add(found[0])
    assert len(endpoints) == 5
    assert starlette_match(app, "GET", s + "/memories/") is None
    assert starlette_match(app, "PUT", s) is None
