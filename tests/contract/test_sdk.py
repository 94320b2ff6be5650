"""`memfs serve` driven by the Python SDK's own client (PyPI `anthropic`,
2.10 and later), as a person who runs a real worker would point it at the
local server: `base_url` the server's URL, `api_key` (which SDK 2.x sends as
`Authorization: Bearer`) or `auth_token`, and no header of ours: the SDK
sends its own `anthropic-version` (2026-10-21) and betas.

Every answer is read twice: by the SDK, which must parse it, and by its
types with `strict=True` (`tests/support/sdk.py`), so a required field left
out, or a value outside what the SDK allows, fails here. Lists are walked
page by page through `next_page`, each page checked.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import pytest
from anthropic.types.beta import (
    BetaManagedAgentsDeletedMemoryStore,
    BetaManagedAgentsDeletedSession,
    BetaManagedAgentsMemoryStore,
    BetaManagedAgentsSession,
)
from anthropic.types.beta.memory_stores import (
    BetaManagedAgentsDeletedMemory,
    BetaManagedAgentsMemory,
    BetaManagedAgentsMemoryListItem,
    BetaManagedAgentsMemoryPrefix,
    BetaManagedAgentsMemoryVersion,
)
from anthropic.types.beta.sessions import (
    BetaManagedAgentsDeleteSessionResource,
    BetaManagedAgentsMemoryStoreResource,
    BetaManagedAgentsSessionResource,
)

from tests.support import ServerProcess
from tests.support.sdk import sdk_validate, sdk_validate_item

AGENT = "agent_sdk_test"


@pytest.fixture
def sdk(shared_memfs_server: ServerProcess) -> Iterator[anthropic.Anthropic]:
    """The SDK's client with the server's token as `api_key=`."""
    client = anthropic.Anthropic(
        base_url=shared_memfs_server.url, api_key=shared_memfs_server.token, max_retries=0
    )
    with client:
        yield client


def checked(model: type, raw: Any) -> Any:
    """A `with_raw_response` call's answer: validated strictly against
    `model`, then as the SDK parses it (which must give that type)."""
    sdk_validate(model, raw.http_response.text)
    parsed = raw.parse()
    assert isinstance(parsed, model), type(parsed)
    assert raw.http_request.headers["anthropic-version"] == "2026-10-21"
    return parsed


def every_page(item: Any, fetch: Callable[[str | None], Any]) -> list[Any]:
    """Every item of a listing, page after page of `fetch(page)` (a
    `with_raw_response` list call), each item checked against `item`."""
    items, page = [], None
    while True:
        raw = fetch(page)
        body = json.loads(raw.http_response.text)
        assert set(body) >= {"data", "next_page"}
        items += [sdk_validate_item(item, x) for x in body["data"]]
        assert [type(x) for x in raw.parse().data] == [type(x) for x in items[-len(body["data"]) :]]
        page = body["next_page"]
        if not page:
            return items


def test_the_sdk_creates_reads_lists_archives_and_deletes_stores(sdk):
    stores = sdk.beta.memory_stores.with_raw_response
    made = [
        checked(
            BetaManagedAgentsMemoryStore, stores.create(name=f"sdk {i}", metadata={"i": str(i)})
        )
        for i in range(3)
    ]
    first = made[0]
    assert (first.name, first.description, first.metadata, first.archived_at) == (
        "sdk 0",
        "",
        {"i": "0"},
        None,
    )
    got = checked(BetaManagedAgentsMemoryStore, stores.retrieve(first.id))
    assert got.id == first.id and got.created_at == first.created_at
    changed = checked(
        BetaManagedAgentsMemoryStore,
        stores.update(first.id, description="described", metadata={"i": None, "j": "1"}),
    )
    assert (changed.description, changed.metadata) == ("described", {"j": "1"})
    listed = every_page(
        BetaManagedAgentsMemoryStore,
        lambda page: stores.list(limit=2, **({"page": page} if page else {})),
    )
    ids = [s.id for s in listed]
    assert ids.index(made[0].id) < ids.index(made[1].id) < ids.index(made[2].id)
    assert {s.id for s in sdk.beta.memory_stores.list(limit=1)} >= {s.id for s in made}

    archived = checked(BetaManagedAgentsMemoryStore, stores.archive(made[1].id))
    assert archived.archived_at is not None
    assert made[1].id not in {s.id for s in sdk.beta.memory_stores.list()}
    assert made[1].id in {s.id for s in sdk.beta.memory_stores.list(include_archived=True)}
    deleted = checked(BetaManagedAgentsDeletedMemoryStore, stores.delete(made[2].id))
    assert (deleted.id, deleted.type) == (made[2].id, "memory_store_deleted")
    with pytest.raises(anthropic.NotFoundError):
        sdk.beta.memory_stores.retrieve(made[2].id)


def test_the_sdk_creates_reads_lists_changes_and_deletes_memories(sdk):
    sid = sdk.beta.memory_stores.create(name="sdk memories").id
    memories = sdk.beta.memory_stores.memories.with_raw_response
    a = checked(BetaManagedAgentsMemory, memories.create(sid, path="/notes/a.md", content="alpha"))
    assert (a.path, a.content, a.content_size_bytes) == ("/notes/a.md", None, 5)
    checked(BetaManagedAgentsMemory, memories.create(sid, path="/notes/b.md", content=""))
    checked(BetaManagedAgentsMemory, memories.create(sid, path="/top.md", content="t"))
    full = checked(BetaManagedAgentsMemory, memories.retrieve(a.id, memory_store_id=sid))
    assert full.content == "alpha" and full.content_sha256 == a.content_sha256

    precondition = {"type": "content_sha256", "content_sha256": a.content_sha256}
    moved = checked(
        BetaManagedAgentsMemory,
        memories.update(
            a.id,
            memory_store_id=sid,
            path="/notes/moved.md",
            content="beta",
            precondition=precondition,
            view="full",
        ),
    )
    assert (moved.id, moved.path, moved.content) == (a.id, "/notes/moved.md", "beta")
    with pytest.raises(anthropic.ConflictError) as stale:
        sdk.beta.memory_stores.memories.update(
            a.id, memory_store_id=sid, content="gamma", precondition=precondition
        )
    assert stale.value.body["error"]["type"] == "memory_precondition_failed_error"

    def listing(**params: Any) -> list[Any]:
        return every_page(
            BetaManagedAgentsMemoryListItem,
            lambda page: memories.list(sid, **params, **({"page": page} if page else {})),
        )

    assert [m.path for m in listing(limit=1)] == ["/notes/b.md", "/notes/moved.md", "/top.md"]
    top = listing(depth=1, limit=1)
    assert [(type(m), m.path) for m in top] == [
        (BetaManagedAgentsMemoryPrefix, "/notes/"),
        (BetaManagedAgentsMemory, "/top.md"),
    ]
    inside = listing(path_prefix="/notes/", view="full")
    assert [(m.path, m.content) for m in inside] == [
        ("/notes/b.md", ""),
        ("/notes/moved.md", "beta"),
    ]
    assert [m.path for m in sdk.beta.memory_stores.memories.list(sid, limit=1)] == [
        "/notes/b.md",
        "/notes/moved.md",
        "/top.md",
    ]

    gone = checked(BetaManagedAgentsDeletedMemory, memories.delete(a.id, memory_store_id=sid))
    assert (gone.id, gone.type) == (a.id, "memory_deleted")
    with pytest.raises(anthropic.NotFoundError):
        sdk.beta.memory_stores.memories.retrieve(a.id, memory_store_id=sid)
    with pytest.raises(anthropic.ConflictError) as taken:
        sdk.beta.memory_stores.memories.create(sid, path="/top.md", content="again")
    assert taken.value.body["error"]["conflicting_path"] == "/top.md"


@pytest.mark.parametrize(
    "path",
    ["/d" * 21, "/line\u2028separator.md", "/paragraph\u2029separator.md", "/a/../b", "/a\x07"],
)
def test_paths_the_sdk_calls_invalid_are_refused(sdk, path):
    sid = sdk.beta.memory_stores.create(name="sdk paths").id
    with pytest.raises(anthropic.BadRequestError) as refused:
        sdk.beta.memory_stores.memories.create(sid, path=path, content="")
    assert refused.value.body["error"]["type"] == "invalid_request_error"
    assert list(sdk.beta.memory_stores.memories.list(sid)) == []
    deepest = sdk.beta.memory_stores.memories.create(sid, path="/d" * 20, content="")
    assert deepest.path == "/d" * 20


def test_the_sdk_reads_filters_and_redacts_versions(sdk, shared_memfs_server):
    sid = sdk.beta.memory_stores.create(name="sdk versions").id
    m = sdk.beta.memory_stores.memories.create(sid, path="/v.md", content="one")
    sdk.beta.memory_stores.memories.update(m.id, memory_store_id=sid, content="two")
    session = sdk.beta.sessions.create(
        agent=AGENT,
        environment_id="env_sdk",
        resources=[{"type": "memory_store", "memory_store_id": sid}],
    )
    token = session.model_extra["sessions_token"]
    with anthropic.Anthropic(
        base_url=shared_memfs_server.url, auth_token=token, max_retries=0
    ) as worker:
        worker.beta.memory_stores.memories.update(m.id, memory_store_id=sid, content="three")
    sdk.beta.memory_stores.memories.delete(m.id, memory_store_id=sid)

    versions = sdk.beta.memory_stores.memory_versions.with_raw_response

    def feed(**params: Any) -> list[BetaManagedAgentsMemoryVersion]:
        return every_page(
            BetaManagedAgentsMemoryVersion,
            lambda page: versions.list(sid, limit=1, **params, **({"page": page} if page else {})),
        )

    everything = feed(view="full")
    assert [v.operation for v in everything] == ["deleted", "modified", "modified", "created"]
    deleted = everything[0]
    assert (deleted.path, deleted.content, deleted.content_sha256, deleted.content_size_bytes) == (
        "/v.md",
        None,
        None,
        None,
    )
    assert [v.content for v in everything[1:]] == ["three", "two", "one"]
    actors = [v.created_by for v in everything]
    assert [a.type for a in actors] == ["api_actor", "session_actor", "api_actor", "api_actor"]
    key_id = actors[0].api_key_id
    assert key_id.startswith("apikey_") and shared_memfs_server.token not in key_id
    assert actors[1].session_id == session.id
    assert [v.operation for v in feed(api_key_id=key_id)] == ["deleted", "modified", "created"]
    assert [v.operation for v in feed(session_id=session.id)] == ["modified"]
    assert feed(service_account_id="svac_nobody") == []
    assert [v.operation for v in feed(memory_id=m.id, operation="created")] == ["created"]

    oldest = everything[-1]
    got = checked(BetaManagedAgentsMemoryVersion, versions.retrieve(oldest.id, memory_store_id=sid))
    assert got.content == "one"
    redacted = checked(
        BetaManagedAgentsMemoryVersion, versions.redact(oldest.id, memory_store_id=sid)
    )
    assert (redacted.content, redacted.path, redacted.redacted_at is not None) == (None, None, True)
    assert redacted.redacted_by.type == "api_actor"


def test_an_archived_store_lets_the_sdk_delete_and_redact_but_not_write(sdk):
    sid = sdk.beta.memory_stores.create(name="sdk archived").id
    keep = sdk.beta.memory_stores.memories.create(sid, path="/keep.md", content="k")
    drop = sdk.beta.memory_stores.memories.create(sid, path="/drop.md", content="d")
    sdk.beta.memory_stores.memories.update(keep.id, memory_store_id=sid, content="k2")
    sdk.beta.memory_stores.archive(sid)
    with pytest.raises(anthropic.BadRequestError):
        sdk.beta.memory_stores.memories.create(sid, path="/new.md", content="n")
    with pytest.raises(anthropic.BadRequestError):
        sdk.beta.memory_stores.memories.update(keep.id, memory_store_id=sid, content="k3")
    sdk.beta.memory_stores.memories.delete(drop.id, memory_store_id=sid)
    redacted = sdk.beta.memory_stores.memory_versions.redact(
        keep.memory_version_id, memory_store_id=sid
    )
    assert redacted.redacted_at is not None
    assert [m.path for m in sdk.beta.memory_stores.memories.list(sid)] == ["/keep.md"]


def test_the_sdk_creates_reads_and_deletes_sessions_and_their_resources(sdk):
    notes = sdk.beta.memory_stores.create(name="SDK Notes", description="team notes").id
    docs = sdk.beta.memory_stores.create(name="SDK Docs").id
    sessions = sdk.beta.sessions.with_raw_response
    session = checked(
        BetaManagedAgentsSession,
        sessions.create(
            agent=AGENT,
            environment_id="env_sdk",
            title="driven by the SDK",
            metadata={"k": "v"},
            resources=[
                {"type": "memory_store", "memory_store_id": notes, "instructions": "notes"},
                {"type": "memory_store", "memory_store_id": docs, "access": "read_only"},
            ],
        ),
    )
    assert (session.agent.id, session.environment_id, session.title) == (
        AGENT,
        "env_sdk",
        "driven by the SDK",
    )
    got = checked(BetaManagedAgentsSession, sessions.retrieve(session.id))
    assert [(r.memory_store_id, r.access, r.mount_path) for r in got.resources] == [
        (notes, "read_write", "/mnt/memory/sdk-notes"),
        (docs, "read_only", "/mnt/memory/sdk-docs"),
    ]
    assert (got.resources[0].name, got.resources[0].description) == ("SDK Notes", "team notes")

    resources = sdk.beta.sessions.resources.with_raw_response
    listed = every_page(
        BetaManagedAgentsSessionResource,
        lambda page: resources.list(session.id, limit=1, **({"page": page} if page else {})),
    )
    assert [r.memory_store_id for r in listed] == [notes, docs]
    assert [r.memory_store_id for r in sdk.beta.sessions.resources.list(session.id)] == [
        notes,
        docs,
    ]
    one = resources.retrieve(docs, session_id=session.id)
    assert isinstance(
        sdk_validate(BetaManagedAgentsMemoryStoreResource, one.http_response.text),
        BetaManagedAgentsMemoryStoreResource,
    )
    assert one.parse().memory_store_id == docs
    detached = checked(
        BetaManagedAgentsDeleteSessionResource, resources.delete(docs, session_id=session.id)
    )
    assert detached.type == "session_resource_deleted"
    assert [r.memory_store_id for r in sdk.beta.sessions.retrieve(session.id).resources] == [notes]

    deleted = checked(BetaManagedAgentsDeletedSession, sessions.delete(session.id))
    assert (deleted.id, deleted.type) == (session.id, "session_deleted")
    with pytest.raises(anthropic.NotFoundError):
        sdk.beta.sessions.retrieve(session.id)


async def test_a_worker_on_the_async_sdk_with_its_sessions_token(shared_memfs_server):
    url = shared_memfs_server.url
    async with anthropic.AsyncAnthropic(
        base_url=url, api_key=shared_memfs_server.token, max_retries=0
    ) as admin:
        mine = (await admin.beta.memory_stores.create(name="worker's")).id
        other = (await admin.beta.memory_stores.create(name="someone else's")).id
        reference = (await admin.beta.memory_stores.create(name="reference")).id
        session = await admin.beta.sessions.create(
            agent=AGENT,
            environment_id="env_worker",
            resources=[
                {"type": "memory_store", "memory_store_id": mine},
                {"type": "memory_store", "memory_store_id": reference, "access": "read_only"},
            ],
        )
        token = session.model_extra["sessions_token"]
        async with anthropic.AsyncAnthropic(
            base_url=url, auth_token=token, max_retries=0
        ) as worker:
            seen = await worker.beta.sessions.retrieve(session.id)
            assert [r.memory_store_id for r in seen.resources] == [mine, reference]
            made = await worker.beta.memory_stores.memories.create(
                mine, path="/from-the-worker.md", content="hello"
            )
            assert [m.path async for m in worker.beta.memory_stores.memories.list(mine)] == [
                "/from-the-worker.md"
            ]
            with pytest.raises(anthropic.PermissionDeniedError):
                await worker.beta.memory_stores.memories.create(reference, path="/x", content="")
            with pytest.raises(anthropic.PermissionDeniedError):
                await worker.beta.memory_stores.memories.list(other)
            with pytest.raises(anthropic.PermissionDeniedError):
                await worker.beta.memory_stores.list()
            (version,) = [v async for v in admin.beta.memory_stores.memory_versions.list(mine)]
            assert version.created_by.type == "session_actor"
            assert version.created_by.session_id == session.id
            assert version.memory_id == made.id

            await admin.beta.sessions.delete(session.id)
            with pytest.raises(anthropic.AuthenticationError):
                await worker.beta.memory_stores.memories.list(mine)
