"""StoreClient against a real `memfs serve` on loopback: the contract of
store-api.md, row by row, as a caller of the client sees it."""

from __future__ import annotations

import logging
import random
import sqlite3

import pytest
import trio

from memfs._exceptions import (
    AuthenticationFailed,
    Conflict,
    InvalidRequest,
    NotFound,
    PathConflict,
    PermissionDenied,
    PreconditionFailed,
    RequestTooLarge,
    TransportError,
)
from memfs.api import MAX_CONTENT_BYTES, Memory, MemoryPrefix, Resource, content_sha256
from memfs.client import StoreClient
from tests.support import ServerProcess


def sha(text: str) -> str:
    return content_sha256(text.encode("utf-8"))


# ---- stores ----------------------------------------------------------------


async def test_store_lifecycle(store_client: StoreClient):
    store = await store_client.create_store(
        "Lifecycle", description="d", metadata={"team": "a", "tier": "1"}
    )
    assert store.id.startswith("memstore_")
    assert (store.name, store.description, store.archived_at) == ("Lifecycle", "d", None)
    assert (await store_client.get_store(store.id)).metadata == {"team": "a", "tier": "1"}

    patched = await store_client.update_store(
        store.id, name="Renamed", metadata={"tier": None, "new": "x"}
    )
    assert patched.name == "Renamed"
    assert patched.metadata == {"team": "a", "new": "x"}

    await store_client.create_memory(store.id, "/kept.md", "before archive")
    archived = await store_client.archive_store(store.id)
    assert archived.archived_at
    with pytest.raises(InvalidRequest):
        await store_client.create_memory(store.id, "/after.md", "no")
    listed = [s.id async for s in store_client.iter_stores()]
    assert store.id not in listed
    assert store.id in [s.id async for s in store_client.iter_stores(include_archived=True)]

    await store_client.delete_store(store.id)
    with pytest.raises(NotFound):
        await store_client.get_store(store.id)


async def test_store_listing_pages_in_creation_order(store_client: StoreClient):
    made = [(await store_client.create_store(f"paged {i}")).id for i in range(5)]
    first = await store_client.list_stores_page(limit=2)
    assert len(first.data) == 2 and first.next_page
    everything = [s.id async for s in store_client.iter_stores(limit=2)]
    assert len(everything) == len(set(everything))
    positions = [everything.index(sid) for sid in made]
    assert positions == sorted(positions)


async def test_store_listing_filters_by_creation_time(store_client: StoreClient):
    made = [await store_client.create_store(f"dated {i}") for i in range(3)]
    page = await store_client.list_stores_page(
        created_at_gte=made[1].created_at, created_at_lte=made[1].created_at
    )
    assert [s.id for s in page.data] == [made[1].id]
    since = [s.id async for s in store_client.iter_stores(created_at_gte=made[1].created_at)]
    assert since == [made[1].id, made[2].id]
    until = [s.id async for s in store_client.iter_stores(created_at_lte=made[0].created_at)]
    assert made[0].id in until and made[1].id not in until


# ---- the error table -------------------------------------------------------


async def test_400_invalid_request(store_client: StoreClient, store_id: str):
    with pytest.raises(InvalidRequest) as caught:
        await store_client.create_memory(store_id, "no-slash.md", "x")
    err = caught.value
    assert (err.status, err.type) == (400, "invalid_request_error")
    assert err.request_id and err.request_id in str(err)
    assert store_client.stats.requests == store_client.stats.by_operation["create_memory"] == 1


async def test_401_wrong_token_is_authentication_failed(shared_memfs_server: ServerProcess):
    async with StoreClient(shared_memfs_server.url, "wrong-token") as client:
        with pytest.raises(AuthenticationFailed) as caught:
            await client.list_stores_page()
        assert caught.value.status == 401
        assert caught.value.request_id
        assert client.stats.requests == 1, "a 401 is never retried"


async def test_403_token_limited_to_other_stores(memfs_server: ServerProcess):
    async with StoreClient(memfs_server.url, memfs_server.token) as admin:
        mine = await admin.create_store("mine")
        other = await admin.create_store("other")
        await admin.create_memory(other.id, "/secret.md", "s")
    token_file = memfs_server.db_path.with_name("limited-token")
    token_file.write_text(f"limited@{mine.id}\n")
    memfs_server.extra_args += ["--token-file", str(token_file)]
    memfs_server.restart()
    async with StoreClient(memfs_server.url, "limited") as limited:
        await limited.create_memory(mine.id, "/ok.md", "fine")
        with pytest.raises(PermissionDenied) as caught:
            await limited.list_memories_page(other.id)
        assert (caught.value.status, caught.value.type) == (403, "permission_error")
        assert limited.stats.by_status[403] == 1


async def test_404_not_found(store_client: StoreClient, store_id: str):
    with pytest.raises(NotFound) as caught:
        await store_client.get_memory(store_id, "mem_doesnotexist")
    assert (caught.value.status, caught.value.type) == (404, "not_found_error")
    assert caught.value.request_id
    with pytest.raises(NotFound):
        await store_client.get_store("memstore_doesnotexist")
    with pytest.raises(NotFound):
        await store_client.get_version(store_id, "memver_doesnotexist")
    assert store_client.stats.retries == 0


async def test_409_precondition_failed(store_client: StoreClient, store_id: str):
    memory = await store_client.create_memory(store_id, "/pre.md", "one")
    with pytest.raises(PreconditionFailed) as caught:
        await store_client.update_memory(
            store_id, memory.id, content="two", precondition_sha256=sha("not one")
        )
    assert (caught.value.status, caught.value.type) == (409, "memory_precondition_failed_error")
    with pytest.raises(PreconditionFailed):
        await store_client.delete_memory(store_id, memory.id, expected_content_sha256=sha("x"))
    assert (await store_client.get_memory(store_id, memory.id)).content == "one"
    updated = await store_client.update_memory(
        store_id, memory.id, content="two", precondition_sha256=sha("one")
    )
    assert (updated.content, updated.content_sha256) == (None, sha("two"))
    again = await store_client.update_memory(
        store_id, memory.id, content="two", precondition_sha256=sha("one")
    )
    assert again.memory_version_id == updated.memory_version_id, "a no-op answers 200"
    with pytest.raises(InvalidRequest):
        await store_client.update_memory(store_id, memory.id, precondition_sha256=sha("two"))
    assert store_client.stats.retries == 0


async def test_409_path_conflict_names_the_conflicting_memory(
    store_client: StoreClient, store_id: str
):
    a = await store_client.create_memory(store_id, "/a", "file a")
    with pytest.raises(PathConflict) as same:
        await store_client.create_memory(store_id, "/a", "other")
    assert (same.value.status, same.value.type) == (409, "memory_path_conflict_error")
    assert (same.value.conflicting_memory_id, same.value.conflicting_path) == (a.id, "/a")

    with pytest.raises(PathConflict) as under:
        await store_client.create_memory(store_id, "/a/b", "below a file")
    assert under.value.conflicting_path == "/a"

    deep = await store_client.create_memory(store_id, "/x/y/z.md", "deep")
    with pytest.raises(PathConflict) as over:
        await store_client.create_memory(store_id, "/x", "above a file")
    assert (over.value.conflicting_memory_id, over.value.conflicting_path) == (
        deep.id,
        "/x/y/z.md",
    )
    with pytest.raises(PathConflict):
        await store_client.update_memory(store_id, deep.id, path="/a")
    assert store_client.stats.retries == 0


async def test_409_conflict_error_for_a_change_the_database_refuses(memfs_server: ServerProcess):
    async with StoreClient(memfs_server.url, memfs_server.token, backoff_base=0.01) as client:
        store = await client.create_store("conflict")
        memory = await client.create_memory(store.id, "/c.md", "one")
        with sqlite3.connect(memfs_server.db_path) as conn:
            conn.execute(
                "CREATE TRIGGER refuse BEFORE UPDATE ON memories"
                " BEGIN SELECT RAISE(ABORT, 'refused'); END"
            )
        with pytest.raises(Conflict) as caught:
            await client.update_memory(store.id, memory.id, content="two")
        assert (caught.value.status, caught.value.type) == (409, "conflict_error")
        assert memory.id in caught.value.message and caught.value.request_id
        assert client.stats.retries == 0, "a 409 is never retried"
        assert (await client.get_memory(store.id, memory.id)).content == "one"


async def test_413_request_too_large(store_client: StoreClient, store_id: str):
    biggest = await store_client.create_memory(store_id, "/max.txt", "x" * MAX_CONTENT_BYTES)
    assert biggest.content_size_bytes == MAX_CONTENT_BYTES
    with pytest.raises(RequestTooLarge) as caught:
        await store_client.create_memory(store_id, "/over.txt", "x" * (MAX_CONTENT_BYTES + 1))
    assert (caught.value.status, caught.value.type) == (413, "request_too_large")
    with pytest.raises(RequestTooLarge):
        await store_client.update_memory(store_id, biggest.id, content="é" * 51_201)
    assert store_client.stats.retries == 0


async def test_full_store_refuses_creates_but_keeps_edits(tmp_path):
    server = ServerProcess(tmp_path / "small.sqlite3", extra_args=["--max-memories", "2"]).start()
    try:
        async with StoreClient(server.url, server.token) as client:
            store = await client.create_store("small")
            first = await client.create_memory(store.id, "/1", "a")
            await client.create_memory(store.id, "/2", "b")
            with pytest.raises(InvalidRequest):
                await client.create_memory(store.id, "/3", "c")
            edited = await client.update_memory(store.id, first.id, content="edited")
            assert edited.content_sha256 == sha("edited")
    finally:
        server.stop()


# ---- path rules ------------------------------------------------------------


@pytest.mark.parametrize(
    "bad_path",
    [
        pytest.param("relative.md", id="no-leading-slash"),
        pytest.param("/", id="no-segment"),
        pytest.param("/a//b", id="empty-segment"),
        pytest.param("/a/./b", id="dot-segment"),
        pytest.param("/a/../b", id="dotdot-segment"),
        pytest.param("/bell\x07.md", id="control-char"),
        pytest.param("/zero\u200bwidth.md", id="format-char"),
        pytest.param("/" + "p" * 1024, id="over-1024-bytes"),
        pytest.param("/trailing/", id="trailing-slash"),
        pytest.param("/d" * 21, id="over-20-segments"),
        pytest.param("/line\u2028separator.md", id="line-separator"),
        pytest.param("/paragraph\u2029separator.md", id="paragraph-separator"),
    ],
)
async def test_path_rules_refuse(store_client: StoreClient, store_id: str, bad_path: str):
    with pytest.raises(InvalidRequest):
        await store_client.create_memory(store_id, bad_path, "x")
    assert [m async for m in store_client.iter_memories(store_id)] == []


async def test_path_rules_accept(store_client: StoreClient, store_id: str):
    longest = "/" + "é" * 511 + "p"
    assert len(longest.encode()) == 1024
    made = await store_client.create_memory(store_id, longest, "")
    assert made.path == longest and made.content_size_bytes == 0
    assert made.content_sha256 == sha("")

    nfd = await store_client.create_memory(store_id, "/cafe\u0301.md", "coffee")
    assert nfd.path == "/caf\u00e9.md", "paths are stored NFC-normalised"
    with pytest.raises(PathConflict):
        await store_client.create_memory(store_id, "/caf\u00e9.md", "same path in NFC")

    upper = await store_client.create_memory(store_id, "/Notes.md", "N")
    lower = await store_client.create_memory(store_id, "/notes.md", "n")
    assert upper.id != lower.id, "paths are case-sensitive"
    found = await store_client.find_memory_by_path(store_id, "/Notes.md")
    assert found is not None and found.id == upper.id


async def test_prefix_and_depth(store_client: StoreClient, store_id: str):
    for path in ["/top.md", "/dir/a.md", "/dir/sub/b.md", "/dirt.md", "/other/c.md"]:
        await store_client.create_memory(store_id, path, path)
    subtree = [m.path async for m in store_client.iter_memories(store_id, path_prefix="/dir/")]
    assert subtree == ["/dir/a.md", "/dir/sub/b.md"], "whole segments, ordered by path"
    children = [m async for m in store_client.iter_memories(store_id, path_prefix="/", depth=1)]
    files = sorted(m.path for m in children if isinstance(m, Memory))
    folders = sorted(m.path for m in children if isinstance(m, MemoryPrefix))
    assert files == ["/dirt.md", "/top.md"]
    assert folders == ["/dir/", "/other/"]
    with pytest.raises(InvalidRequest):
        await store_client.list_memories_page(store_id, path_prefix="/dir")


# ---- memories --------------------------------------------------------------


async def test_memory_views_moves_and_deletes(store_client: StoreClient, store_id: str):
    made = await store_client.create_memory(store_id, "/m.md", "hello", view="basic")
    assert made.content is None and made.content_sha256 == sha("hello")
    full = await store_client.get_memory(store_id, made.id)
    assert full.content == "hello" and full.memory_version_id == made.memory_version_id
    basic = await store_client.get_memory(store_id, made.id, view="basic")
    assert basic.content is None

    moved = await store_client.update_memory(store_id, made.id, path="/moved/m.md", view="full")
    assert (moved.id, moved.path, moved.content) == (made.id, "/moved/m.md", "hello")
    renamed = await store_client.update_memory(store_id, made.id, path="/moved/n.md")
    assert (renamed.path, renamed.content) == ("/moved/n.md", None), "basic by default"
    assert (await store_client.create_memory(store_id, "/c.md", "c")).content is None
    made_full = await store_client.create_memory(store_id, "/f.md", "f", view="full")
    assert made_full.content == "f"
    assert await store_client.find_memory_by_path(store_id, "/m.md") is None

    await store_client.delete_memory(store_id, made.id, expected_content_sha256=sha("hello"))
    with pytest.raises(NotFound):
        await store_client.get_memory(store_id, made.id)
    with pytest.raises(NotFound):
        await store_client.delete_memory(store_id, made.id)


async def test_find_memory_by_path_reads_every_page(store_client: StoreClient, store_id: str):
    async with trio.open_nursery() as nursery:
        for i in range(130):
            nursery.start_soon(store_client.create_memory, store_id, f"/many/{i:03d}.md", str(i))
    found = await store_client.find_memory_by_path(store_id, "/many/129.md")
    assert found is not None and found.content_sha256 == sha("129")
    assert store_client.stats.by_operation["list_memories_page"] == 2
    assert await store_client.find_memory_by_path(store_id, "/many/130.md") is None
    assert await store_client.find_memory_by_path(store_id, "/nowhere/x.md") is None


async def test_pagination_with_writes_between_pages(store_client: StoreClient, store_id: str):
    """Items that exist for the whole listing appear exactly once, whatever is
    written between pages (creates before and after the cursor, edits)."""
    rng = random.Random(7)
    original: dict[str, str] = {}
    async with trio.open_nursery() as nursery:

        async def make(i: int) -> None:
            m = await store_client.create_memory(store_id, f"/p/{i:04d}.md", f"v0 {i}")
            original[m.id] = m.path

        for i in range(0, 240, 2):
            nursery.start_soon(make, i)

    seen: list[str] = []
    page = None
    written = 0
    while True:
        result = await store_client.list_memories_page(
            store_id, path_prefix="/p/", limit=9, page=page
        )
        seen += [m.id for m in result.data]
        for _ in range(3):
            written += 1
            await store_client.create_memory(
                store_id, f"/p/{rng.randrange(1, 240, 2):04d}-{written}.md", "new"
            )
        some_id = rng.choice(list(original))
        await store_client.update_memory(store_id, some_id, content=f"edit {written}")
        if not result.next_page:
            break
        page = result.next_page
    assert len(seen) == len(set(seen)), "no item repeated"
    assert set(original) <= set(seen), "no item lost"


# ---- versions --------------------------------------------------------------


async def test_versions_and_redaction(store_client: StoreClient, store_id: str):
    m = await store_client.create_memory(store_id, "/v.md", "one")
    await store_client.update_memory(store_id, m.id, content="two")
    await store_client.update_memory(store_id, m.id, content="two")  # no-op: no version
    await store_client.update_memory(store_id, m.id, content="three")
    other = await store_client.create_memory(store_id, "/other.md", "x")

    mine = [v async for v in store_client.iter_versions(store_id, memory_id=m.id, limit=2)]
    assert [v.operation for v in mine] == ["modified", "modified", "created"]
    assert [v.content_sha256 for v in mine] == [sha("three"), sha("two"), sha("one")]
    assert mine[0].id == (await store_client.get_memory(store_id, m.id)).memory_version_id

    everything = [v async for v in store_client.iter_versions(store_id)]
    assert everything[0].memory_id == other.id, "newest first"
    created = [v async for v in store_client.iter_versions(store_id, operation="created")]
    assert {v.memory_id for v in created} == {m.id, other.id}
    since = [
        v async for v in store_client.iter_versions(store_id, created_at_gte=mine[0].created_at)
    ]
    assert {v.id for v in since} >= {mine[0].id, everything[0].id}
    assert mine[2].id not in {v.id for v in since}
    until = [
        v async for v in store_client.iter_versions(store_id, created_at_lte=mine[2].created_at)
    ]
    assert [v.id for v in until] == [mine[2].id]

    first = await store_client.get_version(store_id, mine[2].id, view="full")
    assert (first.content, first.path, first.operation) == ("one", "/v.md", "created")

    redacted = await store_client.redact_version(store_id, mine[2].id)
    assert redacted.redacted_at
    assert (redacted.content, redacted.path, redacted.content_sha256) == (None, None, None)
    assert redacted.content_size_bytes is None
    again = await store_client.get_version(store_id, mine[2].id, view="full")
    assert again.content is None and again.redacted_at

    with pytest.raises(InvalidRequest):
        await store_client.redact_version(store_id, mine[0].id)

    await store_client.delete_memory(store_id, m.id)
    latest = [v async for v in store_client.iter_versions(store_id, memory_id=m.id)]
    assert latest[0].operation == "deleted"
    await store_client.redact_version(store_id, mine[0].id)


async def test_versions_filter_by_who_made_them(shared_memfs_server: ServerProcess):
    url, token = shared_memfs_server.url, shared_memfs_server.token
    async with StoreClient(url, token, auth="x-api-key") as keyed:
        store = await keyed.create_store("who")
        created = await keyed.create_session([Resource(store.id)])
        async with StoreClient(url, created.sessions_token, auth="bearer") as session:
            a = await keyed.create_memory(store.id, "/a.md", "by key")
            b = await session.create_memory(store.id, "/b.md", "by session")
            await session.update_memory(store.id, a.id, content="edited in a session")
        feed = [v async for v in keyed.iter_versions(store.id)]
        session_id = feed[0].created_by["session_id"]
        assert session_id == created.session.id
        api_key_id = feed[-1].created_by["api_key_id"]
        by_session = [
            v async for v in keyed.iter_versions(store.id, session_id=session_id, limit=1)
        ]
        assert [(v.memory_id, v.operation) for v in by_session] == [
            (a.id, "modified"),
            (b.id, "created"),
        ]
        page = await keyed.list_versions_page(store.id, api_key_id=api_key_id)
        assert [v.id for v in page.data] == [a.memory_version_id]
        assert [v async for v in keyed.iter_versions(store.id, session_id="sesn_other")] == []
        assert [v async for v in keyed.iter_versions(store.id, service_account_id="svac_x")] == []


# ---- auth, persistence, secrecy ------------------------------------------


@pytest.mark.parametrize("auth", ["bearer", "x-api-key"])
async def test_both_auth_headers_work(shared_memfs_server: ServerProcess, auth: str):
    async with StoreClient(shared_memfs_server.url, shared_memfs_server.token, auth=auth) as c:
        store = await c.create_store(f"auth {auth}")
        assert (await c.get_store(store.id)).name == f"auth {auth}"


async def test_data_survives_a_restart(memfs_server: ServerProcess):
    async with StoreClient(
        memfs_server.url, memfs_server.token, backoff_base=0.05, backoff_max=0.2
    ) as client:
        store = await client.create_store("durable")
        memory = await client.create_memory(store.id, "/keep.md", "still here")
        await client.update_memory(store.id, memory.id, content="still here, edited")
        memfs_server.restart()
        back = await client.get_memory(store.id, memory.id)
        assert back.content == "still here, edited"
        versions = [v async for v in client.iter_versions(store.id)]
        assert [v.operation for v in versions] == ["modified", "created"]
        assert (await client.get_store(store.id)).name == "durable"


async def test_token_never_in_repr_errors_or_logs(
    shared_memfs_server: ServerProcess, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.DEBUG)
    secret = "sk-never-show-me-0123456789abcdef"
    for auth in ("bearer", "x-api-key"):
        client = StoreClient(shared_memfs_server.url, secret, auth=auth)  # type: ignore[arg-type]
        async with client:
            assert secret not in repr(client)
            with pytest.raises(AuthenticationFailed) as caught:
                await client.list_stores_page()
            assert secret not in str(caught.value)
            assert secret not in repr(caught.value)
    async with StoreClient("http://127.0.0.1:9", secret, max_retries=1, backoff_base=0) as dead:
        with pytest.raises(TransportError) as unreachable:
            await dead.get_store("memstore_x")
        assert secret not in str(unreachable.value)
        assert secret not in repr(unreachable.value)
    assert caplog.records, "the client logs its requests at debug level"
    assert secret not in caplog.text
