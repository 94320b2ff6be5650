"""Sessions in `memfs serve`, as a worker and the one who starts the session
see them: a real server on loopback, raw HTTP for the wire and the SDK's own
types for the shapes, and memfs's `StoreClient` for its session calls.

A session holds memory stores; the sessions token minted for it reaches
those stores only (read-only ones it cannot write), is taken as
`Authorization: Bearer`, records its changes as the session's
`session_actor`, and stops working when the session is deleted.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator

import httpx
import pytest
from anthropic.types.beta import BetaManagedAgentsDeletedSession, BetaManagedAgentsSession
from anthropic.types.beta.sessions import (
    BetaManagedAgentsDeleteSessionResource,
    BetaManagedAgentsMemoryStoreResource,
    BetaManagedAgentsSessionResource,
)

from memfs._exceptions import AuthenticationFailed, NotFound, PermissionDenied
from memfs.api import (
    ANTHROPIC_VERSION,
    BETA,
    SESSIONS_BETA,
    Resource,
    Session,
    SessionResource,
)
from memfs.client import StoreClient
from tests.support import ServerProcess
from tests.support.sdk import sdk_validate, sdk_validate_item

SESSION_HEADERS = {"anthropic-beta": SESSIONS_BETA}


@pytest.fixture
def http(shared_memfs_server: ServerProcess) -> Iterator[httpx.Client]:
    with shared_memfs_server.http() as client:
        yield client


def new_store(http: httpx.Client, name: str = "session store") -> str:
    r = http.post("/v1/memory_stores", json={"name": name})
    assert r.status_code == 200, r.text
    return r.json()["id"]


def memory_store(sid: str, access: str | None = None, **extra) -> dict:
    item = {"type": "memory_store", "memory_store_id": sid, **extra}
    if access is not None:
        item["access"] = access
    return item


def create_session(http: httpx.Client, *resources: dict, **fields) -> dict:
    r = http.post(
        "/v1/sessions", json={"resources": list(resources), **fields}, headers=SESSION_HEADERS
    )
    assert r.status_code == 200, r.text
    return r.json()


def as_session(server: ServerProcess, token: str, *, beta: str = BETA) -> httpx.Client:
    """A client sending a sessions token as `Authorization: Bearer`."""
    headers = {
        "authorization": f"Bearer {token}",
        "anthropic-version": ANTHROPIC_VERSION,
        "anthropic-beta": beta,
    }
    return httpx.Client(base_url=server.url, headers=headers, timeout=10.0)


def assert_error(r: httpx.Response, status: int, error_type: str) -> str:
    assert r.status_code == status, r.text
    assert r.json()["error"]["type"] == error_type, r.text
    return r.json()["error"]["message"]


# ---- the session object ------------------------------------------------------


def test_a_session_answer_carries_every_field_the_sdk_requires(http):
    prefs = http.post("/v1/memory_stores", json={"name": "User Preferences", "description": "d"})
    sid = prefs.json()["id"]
    docs = new_store(http, "Docs")
    created = create_session(
        http,
        memory_store(sid, instructions="read me first"),
        memory_store(docs, "read_only", mount_path="/mnt/memory/reference"),
        title="a test",
        metadata={"k": "v"},
        environment_id="env_test",
    )
    token = created.pop("sessions_token")
    assert token.startswith("memfs_sesstok_") and len(token) > 40

    for answer in (created, http.get(f"/v1/sessions/{created['id']}", headers=SESSION_HEADERS)):
        session = sdk_validate(BetaManagedAgentsSession, answer)
        assert session.type == "session" and session.id.startswith("sesn_")
        assert session.status == "idle"
        assert (session.title, session.metadata, session.environment_id) == (
            "a test",
            {"k": "v"},
            "env_test",
        )
        first, second = session.resources
        assert isinstance(first, BetaManagedAgentsMemoryStoreResource)
        assert (first.memory_store_id, first.access, first.name, first.description) == (
            sid,
            "read_write",
            "User Preferences",
            "d",
        )
        assert (first.instructions, first.mount_path) == (
            "read me first",
            "/mnt/memory/user-preferences",
        )
        assert (second.access, second.mount_path) == ("read_only", "/mnt/memory/reference")
    again = http.get(f"/v1/sessions/{created['id']}", headers=SESSION_HEADERS).json()
    assert "sessions_token" not in again and token not in str(again)


def set_status(http: httpx.Client, session_id: str, status) -> httpx.Response:
    """memfs serve's own `POST /v1/sessions/{id}/status`."""
    return http.post(
        f"/v1/sessions/{session_id}/status", json={"status": status}, headers=SESSION_HEADERS
    )


def test_a_session_s_status_is_set_by_serve_s_extension_and_read_back(memfs_server):
    with memfs_server.http() as http:
        session = create_session(http, memory_store(new_store(http)))
        url = f"/v1/sessions/{session['id']}"
        assert http.get(url, headers=SESSION_HEADERS).json()["status"] == "idle"
        for status in ("running", "idle", "rescheduling", "terminated", "running"):
            answer = sdk_validate(BetaManagedAgentsSession, set_status(http, session["id"], status))
            assert answer.status == status
            read = sdk_validate(BetaManagedAgentsSession, http.get(url, headers=SESSION_HEADERS))
            assert read.status == status
    with as_session(memfs_server, session["sessions_token"]) as agent:
        assert agent.get(url, headers=SESSION_HEADERS).json()["status"] == "running"
        r = agent.post(url + "/status", json={"status": "idle"}, headers=SESSION_HEADERS)
        assert_error(r, 403, "permission_error")
    memfs_server.restart()
    with memfs_server.http() as http:
        assert http.get(url, headers=SESSION_HEADERS).json()["status"] == "running"


@pytest.mark.parametrize("status", ["asleep", "", None, 1, ["idle"]])
def test_a_status_that_is_not_a_session_s_is_refused(http, status):
    session = create_session(http)
    message = assert_error(set_status(http, session["id"], status), 400, "invalid_request_error")
    assert message.startswith("status must be one of rescheduling, running, idle, terminated")
    r = http.get(f"/v1/sessions/{session['id']}", headers=SESSION_HEADERS)
    assert r.json()["status"] == "idle"
    assert_error(set_status(http, "sesn_nosuchsession", "idle"), 404, "not_found_error")


def test_stores_of_one_name_get_mount_paths_of_their_own(http):
    a, b = new_store(http, "Notes"), new_store(http, "notes!")
    session = create_session(http, memory_store(a), memory_store(b))
    assert [r["mount_path"] for r in session["resources"]] == [
        "/mnt/memory/notes",
        "/mnt/memory/notes-2",
    ]


@pytest.mark.parametrize(
    "resources, status, words",
    [
        ([{"type": "file", "file_id": "file_x"}], 400, "memory stores only"),
        ([memory_store("STORE", "admin")], 400, "read_write or read_only"),
        ([memory_store("STORE"), memory_store("STORE")], 400, "attached to this session already"),
        ([memory_store("memstore_nothere")], 404, "no memory store"),
        ([memory_store("ARCHIVED")], 400, "is archived"),
        ([memory_store("STORE", mount_path="relative")], 400, "absolute path"),
        ([memory_store("STORE", mount_path="/mnt/../etc")], 400, "'..'"),
        ([{"type": "memory_store"}], 400, "memory_store_id is required"),
        ("not a list", 400, "array"),
    ],
)
def test_a_session_with_resources_it_cannot_hold_is_refused(http, resources, status, words):
    sid, archived = new_store(http), new_store(http)
    http.post(f"/v1/memory_stores/{archived}/archive").raise_for_status()
    if isinstance(resources, list):
        named = {"STORE": sid, "ARCHIVED": archived}
        resources = [{k: named.get(v, v) for k, v in item.items()} for item in resources]
    r = http.post("/v1/sessions", json={"resources": resources}, headers=SESSION_HEADERS)
    error_type = "not_found_error" if status == 404 else "invalid_request_error"
    assert words in assert_error(r, status, error_type)


@pytest.mark.parametrize("other", ["//mnt/memory/x", "/mnt//memory/x", "/mnt/memory/x//"])
def test_two_stores_of_a_session_at_one_path_however_written_are_refused(http, other):
    a, b, c = new_store(http, "a"), new_store(http, "b"), new_store(http, "c")
    r = http.post(
        "/v1/sessions",
        json={
            "resources": [
                memory_store(a, mount_path="/mnt/memory/x"),
                memory_store(b, mount_path=other),
            ]
        },
        headers=SESSION_HEADERS,
    )
    assert "is the mount path of another store" in assert_error(r, 400, "invalid_request_error")
    session = create_session(http, memory_store(a, mount_path="/mnt/memory/x"))
    r = http.post(
        f"/v1/sessions/{session['id']}/resources",
        json=memory_store(c, mount_path=other),
        headers=SESSION_HEADERS,
    )
    assert "is the mount path of another store" in assert_error(r, 400, "invalid_request_error")


def test_a_session_holds_at_most_eight_stores(http):
    stores = [new_store(http, f"s{i}") for i in range(9)]
    r = http.post(
        "/v1/sessions",
        json={"resources": [memory_store(s) for s in stores]},
        headers=SESSION_HEADERS,
    )
    assert "at most 8" in assert_error(r, 400, "invalid_request_error")
    session = create_session(http, *(memory_store(s) for s in stores[:8]))
    r = http.post(
        f"/v1/sessions/{session['id']}/resources",
        json=memory_store(stores[8]),
        headers=SESSION_HEADERS,
    )
    assert "at most 8" in assert_error(r, 400, "invalid_request_error")


def test_session_endpoints_need_the_managed_agents_beta(http):
    sid = new_store(http)
    for beta in (BETA, None):
        headers = {"anthropic-beta": beta} if beta else {}
        client = httpx.Client(
            base_url=str(http.base_url),
            headers={k: v for k, v in http.headers.items() if k != "anthropic-beta"},
        )
        with client:
            r = client.post(
                "/v1/sessions", json={"resources": [memory_store(sid)]}, headers=headers
            )
        assert SESSIONS_BETA in assert_error(r, 400, "invalid_request_error")
    both = {"anthropic-beta": f"{SESSIONS_BETA},{BETA}"}
    r = http.post("/v1/sessions", json={"resources": [memory_store(sid)]}, headers=both)
    assert r.status_code == 200, r.text


# ---- resources ---------------------------------------------------------------


def test_resources_come_in_pages_of_limit_with_next_page(http):
    stores = [new_store(http, f"paged {i}") for i in range(3)]
    session = create_session(http, *(memory_store(s) for s in stores))
    url = f"/v1/sessions/{session['id']}/resources"
    everything = http.get(url, headers=SESSION_HEADERS).json()
    assert [r["memory_store_id"] for r in everything["data"]] == stores
    assert everything["next_page"] is None
    seen, page, pages = [], None, 0
    while True:
        params = {"limit": 1, **({"page": page} if page else {})}
        r = http.get(url, params=params, headers=SESSION_HEADERS)
        assert r.status_code == 200, r.text
        pages += 1
        for item in r.json()["data"]:
            resource = sdk_validate_item(BetaManagedAgentsSessionResource, item)
            seen.append(resource.memory_store_id)
        page = r.json()["next_page"]
        if not page:
            break
    assert (seen, pages) == (stores, 3)
    for bad in ("0", "1001", "x"):
        r = http.get(url, params={"limit": bad}, headers=SESSION_HEADERS)
        assert_error(r, 400, "invalid_request_error")
    r = http.get(url, params={"page": "not-ours"}, headers=SESSION_HEADERS)
    assert_error(r, 400, "invalid_request_error")


def test_stores_attach_and_detach_while_the_session_runs(shared_memfs_server, http):
    first, late = new_store(http, "first"), new_store(http, "late")
    session = create_session(http, memory_store(first))
    url = f"/v1/sessions/{session['id']}/resources"
    with as_session(shared_memfs_server, session["sessions_token"]) as agent:
        assert_error(agent.get(f"/v1/memory_stores/{late}/memories"), 403, "permission_error")

        r = http.post(url, json=memory_store(late, "read_only"), headers=SESSION_HEADERS)
        attached = sdk_validate(BetaManagedAgentsMemoryStoreResource, r)
        assert (attached.memory_store_id, attached.access) == (late, "read_only")
        resource_id = r.json()["id"]
        assert resource_id.startswith("sesrsc_")
        assert agent.get(f"/v1/memory_stores/{late}/memories").status_code == 200
        got = http.get(f"{url}/{resource_id}", headers=SESSION_HEADERS)
        assert got.json() == r.json()
        listed = http.get(url, headers=SESSION_HEADERS).json()["data"]
        assert [x["memory_store_id"] for x in listed] == [first, late]
        assert_error(
            http.post(url, json=memory_store(late), headers=SESSION_HEADERS),
            400,
            "invalid_request_error",
        )

        r = http.delete(f"{url}/{resource_id}", headers=SESSION_HEADERS)
        deleted = sdk_validate(BetaManagedAgentsDeleteSessionResource, r)
        assert (deleted.id, deleted.type) == (resource_id, "session_resource_deleted")
        assert_error(agent.get(f"/v1/memory_stores/{late}/memories"), 403, "permission_error")
        assert_error(
            http.delete(f"{url}/{resource_id}", headers=SESSION_HEADERS), 404, "not_found_error"
        )

        # A store's id names its resource too.
        r = http.delete(f"{url}/{first}", headers=SESSION_HEADERS)
        assert r.status_code == 200 and r.json()["id"].startswith("sesrsc_")
        assert_error(agent.get(f"/v1/memory_stores/{first}/memories"), 403, "permission_error")
        assert http.get(url, headers=SESSION_HEADERS).json()["data"] == []


# ---- what a sessions token reaches -----------------------------------------


def test_a_sessions_token_reaches_only_its_sessions_stores(shared_memfs_server, http):
    mine, other = new_store(http, "mine"), new_store(http, "not mine")
    session = create_session(http, memory_store(mine))
    other_session = create_session(http, memory_store(other))
    with as_session(shared_memfs_server, session["sessions_token"]) as agent:
        r = agent.post(f"/v1/memory_stores/{mine}/memories", json={"path": "/a.md", "content": "a"})
        assert r.status_code == 200, r.text
        assert agent.get(f"/v1/memory_stores/{mine}").status_code == 200
        assert agent.get(f"/v1/memory_stores/{mine}/memory_versions").status_code == 200
        for method, url, body in [
            ("GET", f"/v1/memory_stores/{other}", None),
            ("GET", f"/v1/memory_stores/{other}/memories", None),
            ("POST", f"/v1/memory_stores/{other}/memories", {"path": "/x.md", "content": "x"}),
            ("GET", f"/v1/memory_stores/{other}/memory_versions", None),
            ("GET", "/v1/memory_stores", None),
            ("POST", "/v1/memory_stores", {"name": "made by a session"}),
            ("POST", f"/v1/memory_stores/{mine}", {"name": "renamed"}),
            ("POST", f"/v1/memory_stores/{mine}/archive", {}),
            ("DELETE", f"/v1/memory_stores/{mine}", None),
        ]:
            r = agent.request(method, url, json=body)
            assert_error(r, 403, "permission_error")
        with as_session(shared_memfs_server, session["sessions_token"], beta=SESSIONS_BETA) as s:
            own = s.get(f"/v1/sessions/{session['id']}")
            assert own.status_code == 200
            assert s.get(f"/v1/sessions/{session['id']}/resources").status_code == 200
            for method, url, body in [
                ("GET", f"/v1/sessions/{other_session['id']}", None),
                ("GET", f"/v1/sessions/{other_session['id']}/resources", None),
                ("POST", "/v1/sessions", {"resources": [memory_store(mine)]}),
                ("POST", f"/v1/sessions/{session['id']}/resources", memory_store(other)),
                ("DELETE", f"/v1/sessions/{session['id']}/resources/{mine}", None),
                ("DELETE", f"/v1/sessions/{session['id']}", None),
            ]:
                assert_error(s.request(method, url, json=body), 403, "permission_error")
    assert http.get(f"/v1/memory_stores/{mine}").json()["name"] == "mine"


def test_a_read_only_store_refuses_the_sessions_token_writes(shared_memfs_server, http):
    sid = new_store(http, "reference")
    memory = http.post(f"/v1/memory_stores/{sid}/memories", json={"path": "/r.md", "content": "1"})
    mid = memory.json()["id"]
    http.post(f"/v1/memory_stores/{sid}/memories/{mid}", json={"content": "2"})
    old = http.get(f"/v1/memory_stores/{sid}/memory_versions").json()["data"][-1]["id"]
    reader = create_session(http, memory_store(sid, "read_only"))
    writer = create_session(http, memory_store(sid))
    with as_session(shared_memfs_server, reader["sessions_token"]) as agent:
        assert agent.get(f"/v1/memory_stores/{sid}/memories/{mid}").json()["content"] == "2"
        assert agent.get(f"/v1/memory_stores/{sid}/memories").status_code == 200
        for method, url, body in [
            ("POST", f"/v1/memory_stores/{sid}/memories", {"path": "/n.md", "content": "n"}),
            ("POST", f"/v1/memory_stores/{sid}/memories/{mid}", {"content": "3"}),
            ("DELETE", f"/v1/memory_stores/{sid}/memories/{mid}", None),
            ("POST", f"/v1/memory_stores/{sid}/memory_versions/{old}/redact", {}),
        ]:
            message = assert_error(agent.request(method, url, json=body), 403, "permission_error")
            assert "read-only" in message
    with as_session(shared_memfs_server, writer["sessions_token"]) as agent:
        r = agent.post(f"/v1/memory_stores/{sid}/memories/{mid}", json={"content": "3"})
        assert r.status_code == 200, r.text


def test_a_sessions_token_is_a_bearer_token_and_dies_with_its_session(shared_memfs_server, http):
    sid = new_store(http)
    session = create_session(http, memory_store(sid))
    token = session["sessions_token"]
    keyed = {"x-api-key": token, "anthropic-version": ANTHROPIC_VERSION, "anthropic-beta": BETA}
    r = httpx.get(f"{shared_memfs_server.url}/v1/memory_stores/{sid}/memories", headers=keyed)
    assert_error(r, 401, "authentication_error")
    with as_session(shared_memfs_server, token) as agent:
        assert agent.get(f"/v1/memory_stores/{sid}/memories").status_code == 200
        r = http.delete(f"/v1/sessions/{session['id']}", headers=SESSION_HEADERS)
        deleted = sdk_validate(BetaManagedAgentsDeletedSession, r)
        assert (deleted.id, deleted.type) == (session["id"], "session_deleted")
        assert_error(agent.get(f"/v1/memory_stores/{sid}/memories"), 401, "authentication_error")
    r = http.get(f"/v1/sessions/{session['id']}", headers=SESSION_HEADERS)
    assert_error(r, 404, "not_found_error")
    r = http.delete(f"/v1/sessions/{session['id']}", headers=SESSION_HEADERS)
    assert_error(r, 404, "not_found_error")
    assert http.get(f"/v1/memory_stores/{sid}").status_code == 200


def test_versions_written_with_a_sessions_token_record_its_session(shared_memfs_server, http):
    sid = new_store(http)
    session = create_session(http, memory_store(sid))
    with as_session(shared_memfs_server, session["sessions_token"]) as agent:
        m = agent.post(f"/v1/memory_stores/{sid}/memories", json={"path": "/s.md", "content": "1"})
        agent.post(f"/v1/memory_stores/{sid}/memories/{m.json()['id']}", json={"content": "2"})
        agent.delete(f"/v1/memory_stores/{sid}/memories/{m.json()['id']}")
    http.post(f"/v1/memory_stores/{sid}/memories", json={"path": "/k.md", "content": "k"})
    feed = http.get(f"/v1/memory_stores/{sid}/memory_versions").json()["data"]
    actor = {"type": "session_actor", "session_id": session["id"]}
    assert [v["created_by"] == actor for v in feed] == [False, True, True, True]
    mine = http.get(
        f"/v1/memory_stores/{sid}/memory_versions", params={"session_id": session["id"]}
    ).json()["data"]
    assert [v["operation"] for v in mine] == ["deleted", "modified", "created"]


def test_a_token_limited_to_some_stores_starts_sessions_of_those_only(tmp_path):
    with ServerProcess(tmp_path / "s.sqlite3") as server:
        mine, other = server.create_store("mine")["id"], server.create_store("other")["id"]
        theirs = server.create_session(other)
        server.stop()
        server.env = {"MEMFS_SERVE_TOKEN": f"limited@{mine}"}  # beside the full token
        server.start()
        headers = {**server.headers(), "x-api-key": "limited", **SESSION_HEADERS}
        with httpx.Client(base_url=server.url, headers=headers) as client:
            r = client.post("/v1/sessions", json={"resources": [memory_store(other)]})
            assert_error(r, 403, "permission_error")
            assert_error(client.get(f"/v1/sessions/{theirs['id']}"), 403, "permission_error")
            r = client.post("/v1/sessions", json={"resources": [memory_store(mine)]})
            assert r.status_code == 200, r.text
            assert client.get(f"/v1/sessions/{r.json()['id']}").status_code == 200


def test_a_token_limited_to_some_stores_reaches_only_its_own_or_its_stores_sessions(tmp_path):
    """An empty session is no "session of its stores": a limited token reaches
    the sessions it created, and those holding only its stores and one at least."""
    with ServerProcess(tmp_path / "s.sqlite3") as server:
        mine = server.create_store("mine")["id"]
        someone_elses = server.create_session()["id"]
        of_mine = server.create_session(mine)["id"]
        server.stop()
        server.env = {"MEMFS_SERVE_TOKEN": f"limited@{mine},second@{mine}"}
        server.start()

        def client(token: str) -> httpx.Client:
            headers = {**server.headers(), "x-api-key": token, **SESSION_HEADERS}
            return httpx.Client(base_url=server.url, headers=headers, timeout=10.0)

        with client("limited") as limited, client("second") as second:
            base = f"/v1/sessions/{someone_elses}"
            for r in (
                limited.get(base),
                limited.get(base + "/resources"),
                limited.post(base + "/resources", json=memory_store(mine)),
                limited.delete(base),
            ):
                message = assert_error(r, 403, "permission_error")
                assert someone_elses in message
            with server.http() as admin:
                got = admin.get(base, headers=SESSION_HEADERS).json()
            assert got["resources"] == []

            assert limited.get(f"/v1/sessions/{of_mine}").status_code == 200

            r = limited.post("/v1/sessions", json={"resources": []})
            assert r.status_code == 200, r.text
            own = f"/v1/sessions/{r.json()['id']}"
            assert_error(second.get(own), 403, "permission_error")
            assert limited.get(own).status_code == 200
            r = limited.post(own + "/resources", json=memory_store(mine))
            assert r.status_code == 200, r.text
            assert second.get(own).status_code == 200
            assert limited.delete(own).status_code == 200


def test_deleting_a_store_detaches_it_from_its_sessions(shared_memfs_server, http):
    keep, drop = new_store(http, "keep"), new_store(http, "drop")
    session = create_session(http, memory_store(keep), memory_store(drop))
    assert http.delete(f"/v1/memory_stores/{drop}").status_code == 200
    got = http.get(f"/v1/sessions/{session['id']}", headers=SESSION_HEADERS).json()
    assert [r["memory_store_id"] for r in got["resources"]] == [keep]


# ---- persistence -------------------------------------------------------------


def test_sessions_and_their_tokens_survive_a_restart(memfs_server):
    sid = memfs_server.create_store("kept")["id"]
    session = memfs_server.create_session(read_only=(sid,))
    memfs_server.restart()
    with memfs_server.http() as http:
        got = http.get(f"/v1/sessions/{session['id']}", headers=SESSION_HEADERS).json()
    assert got["resources"] == session["resources"]
    with as_session(memfs_server, session["sessions_token"]) as agent:
        assert agent.get(f"/v1/memory_stores/{sid}/memories").status_code == 200
        r = agent.post(f"/v1/memory_stores/{sid}/memories", json={"path": "/a", "content": ""})
        assert_error(r, 403, "permission_error")
    db = sqlite3.connect(memfs_server.db_path)
    try:
        stored = [tuple(row) for row in db.execute("SELECT * FROM sessions")]
    finally:
        db.close()
    assert session["sessions_token"] not in repr(stored)


@pytest.mark.parametrize(
    "older",
    [
        "DROP TABLE sessions; DROP TABLE session_resources; PRAGMA user_version = 0;",
        "PRAGMA user_version = 1;",
        "ALTER TABLE sessions DROP COLUMN created_by_token; PRAGMA user_version = 2;",
        "ALTER TABLE sessions DROP COLUMN status; PRAGMA user_version = 3;",
    ],
)
def test_a_database_of_an_older_layout_is_refused_in_one_sentence(memfs_server, older):
    """Layouts before this one were never released: such a file is moved
    aside, not migrated, and a fresh file gets the one schema."""
    memfs_server.create_store("from before")
    memfs_server.stop()
    db = sqlite3.connect(memfs_server.db_path)
    db.executescript(older)
    db.close()
    with pytest.raises(RuntimeError):
        memfs_server.start(timeout=10)
    sentence = memfs_server.stderr.strip().splitlines()[-1]
    assert "Traceback" not in memfs_server.stderr
    assert sentence.startswith(f"memfs: cannot open the database {memfs_server.db_path}: ")
    assert "older layout" in sentence and "move the file aside" in sentence
    os.rename(memfs_server.db_path, str(memfs_server.db_path) + ".old")
    memfs_server.start()
    assert memfs_server.create_store("fresh")["name"] == "fresh"


def test_a_database_of_a_newer_schema_is_refused_in_one_sentence(memfs_server):
    memfs_server.stop()
    db = sqlite3.connect(memfs_server.db_path)
    db.execute("PRAGMA user_version = 999")
    db.close()
    with pytest.raises(RuntimeError):
        memfs_server.start(timeout=10)
    assert "schema is version 999" in memfs_server.stderr
    assert "Traceback" not in memfs_server.stderr


# ---- memfs's client ------------------------------------------------------------


async def test_store_client_session_calls(shared_memfs_server: ServerProcess):
    url, key = shared_memfs_server.url, shared_memfs_server.token
    async with StoreClient(url, key, auth="x-api-key") as admin:
        stores = [(await admin.create_store(f"client {i}")).id for i in range(3)]
        created = await admin.create_session(
            [Resource(stores[0]), Resource(stores[1], access="read_only", mount_path="/mnt/x")],
            environment_id="env_client",
            title="client test",
        )
        assert created.sessions_token not in repr(created)
        session = created.session
        assert isinstance(session, Session)
        assert (session.environment_id, session.title, session.status) == (
            "env_client",
            "client test",
            "idle",
        )
        shown = [(r.memory_store_id, r.access, r.name, r.mount_path) for r in session.memory_stores]
        assert shown == [
            (stores[0], "read_write", "client 0", "/mnt/memory/client-0"),
            (stores[1], "read_only", "client 1", "/mnt/x"),
        ]
        added = await admin.add_session_resource(session.id, Resource(stores[2]))
        assert isinstance(added, SessionResource) and added.memory_store_id == stores[2]

        async with StoreClient(url, created.sessions_token, auth="bearer") as worker:
            got = await worker.get_session(session.id)
            assert [r.memory_store_id for r in got.resources] == stores
            paged = [r async for r in worker.iter_session_resources(session.id, limit=1)]
            assert [r.memory_store_id for r in paged] == stores
            assert worker.stats.by_operation["list_session_resources_page"] == 3
            assert await worker.list_session_resources(session.id) == got.resources
            with pytest.raises(PermissionDenied):
                await worker.delete_session(session.id)

            await admin.delete_session_resource(session.id, added.id or "")
            assert [
                r.memory_store_id for r in await worker.list_session_resources(session.id)
            ] == stores[:2]
            with pytest.raises(PermissionDenied):
                await worker.list_memories_page(stores[2])

            await admin.delete_session(session.id)
            with pytest.raises(AuthenticationFailed):
                await worker.get_session(session.id)
        with pytest.raises(NotFound):
            await admin.get_session(session.id)
