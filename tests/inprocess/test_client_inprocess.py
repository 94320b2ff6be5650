"""The client and the sync engine against `memfs serve`'s app in-process
(`tests.support.inprocess`): the contract's basics, the retry pipeline and
the recognition of a retried call's own earlier effect, and sync passes,
all without a server subprocess. The same app serves the tier-20 contract
tests over a socket."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from memfs._exceptions import (
    AuthenticationFailed,
    InvalidRequest,
    NotFound,
    Overloaded,
    PathConflict,
    PreconditionFailed,
    ServerError,
    SyncError,
    TransportError,
)
from memfs.api import content_sha256
from memfs.cache import StoreCache
from memfs.client import StoreClient
from memfs.sync import SyncEngine
from tests.support.inprocess import TOKEN, Answer, InProcessStore, LoseAnswer


@pytest.fixture
def store_app(tmp_path: Path):
    app = InProcessStore(tmp_path, tokens={TOKEN: None, "other-token": None})
    try:
        yield app
    finally:
        app.close()


@pytest.fixture
async def client(store_app: InProcessStore):
    async with store_app.client() as c:
        yield c


@pytest.fixture
async def sid(client: StoreClient, store_app: InProcessStore) -> str:
    store = await client.create_store("in process")
    client.stats.reset()
    store_app.transport.seen.clear()
    store_app.transport.reached_app.clear()
    return store.id


# ---- the contract's basics ---------------------------------------------------


async def test_memories_are_created_read_updated_and_deleted(client: StoreClient, sid: str):
    made = await client.create_memory(sid, "/notes/a.md", "one")
    assert made.content is None and made.content_sha256 == content_sha256(b"one")
    assert (await client.get_memory(sid, made.id)).content == "one"
    updated = await client.update_memory(
        sid, made.id, content="two", precondition_sha256=made.content_sha256, view="full"
    )
    assert (updated.id, updated.content) == (made.id, "two")
    with pytest.raises(PreconditionFailed):
        await client.update_memory(
            sid, made.id, content="3", precondition_sha256=made.content_sha256
        )
    with pytest.raises(PathConflict) as caught:
        await client.create_memory(sid, "/notes/a.md", "again")
    assert caught.value.conflicting_memory_id == made.id
    assert (await client.find_memory_by_path(sid, "/notes/a.md")).id == made.id
    await client.delete_memory(sid, made.id)
    with pytest.raises(NotFound):
        await client.get_memory(sid, made.id)
    assert client.stats.retries == 0
    assert client.stats.by_status[409] == 2 and client.stats.by_status[404] == 1


async def test_listings_follow_their_pages_to_the_end(client: StoreClient, sid: str):
    for i in range(5):
        await client.create_memory(sid, f"/m{i}.md", str(i))
    client.stats.reset()
    paths = [m.path async for m in client.iter_memories(sid, limit=2)]
    assert paths == [f"/m{i}.md" for i in range(5)]
    assert client.stats.by_operation["list_memories_page"] == 3
    versions = [v async for v in client.iter_versions(sid, limit=2)]
    assert [v.path for v in versions] == [f"/m{i}.md" for i in reversed(range(5))]


async def test_the_app_reads_the_token_from_either_header(store_app: InProcessStore, sid: str):
    for auth in ("bearer", "x-api-key"):
        async with store_app.client("other-token", auth=auth) as c:
            assert (await c.get_store(sid)).id == sid
    async with store_app.client("wrong-token") as c:
        with pytest.raises(AuthenticationFailed):
            await c.get_store(sid)
        assert c.stats.requests == 1, "a 401 is never retried"


async def test_a_request_the_contract_forbids_is_refused_once(client: StoreClient, sid: str):
    with pytest.raises(InvalidRequest):
        await client.create_memory(sid, "no-slash.md", "x")
    assert client.stats.requests == client.stats.by_status[400] == 1


# ---- the sending pipeline ----------------------------------------------------


async def test_retryable_answers_are_retried_until_the_app_answers(
    client: StoreClient, store_app: InProcessStore, sid: str
):
    store_app.transport.script(
        Answer(529, {"retry-after-ms": "1"}), Answer(503), Answer(429, {"retry-after": "0"})
    )
    assert (await client.get_store(sid)).id == sid
    assert (client.stats.requests, client.stats.retries) == (4, 3)
    assert client.stats.by_status == {529: 1, 503: 1, 429: 1, 200: 1}
    assert store_app.transport.reached_app == [("GET", f"/v1/memory_stores/{sid}")]


async def test_retries_run_out_with_the_last_answer(store_app: InProcessStore, sid: str):
    async with store_app.client(max_retries=2) as c:
        store_app.transport.script(*[Answer(529)] * 3)
        with pytest.raises(Overloaded) as caught:
            await c.get_store(sid)
        assert caught.value.request_id == "req_scripted"
        assert c.stats.requests == 3 and not store_app.transport.reached_app


async def test_x_should_retry_decides_over_the_status(
    client: StoreClient, store_app: InProcessStore, sid: str
):
    store_app.transport.script(Answer(503, {"x-should-retry": "false"}))
    with pytest.raises(ServerError):
        await client.get_store(sid)
    assert client.stats.requests == 1
    store_app.transport.script(Answer(400, {"x-should-retry": "true"}))
    assert (await client.get_store(sid)).id == sid
    assert client.stats.by_status[400] == 1 and client.stats.requests == 3


async def test_no_answer_after_every_retry_is_a_transport_error(
    store_app: InProcessStore, sid: str
):
    async with store_app.client(max_retries=1) as c:
        store_app.transport.script(LoseAnswer(), LoseAnswer())
        with pytest.raises(TransportError) as caught:
            await c.get_store(sid)
        assert str(caught.value) == (
            "cannot reach http://memfs.test: the connection closed before a whole answer came"
            " (after 2 attempts)"
        )
        assert c.stats.by_status[0] == 2


LOST = "the connection closed before a whole answer came"


async def test_at_a_mounts_start_each_attempt_without_an_answer_is_said(
    store_app: InProcessStore, sid: str
):
    """Until the first answer the start's attempts are said, and are not the
    call's retries; from the first answer on, the call retries as always."""
    said: list[str] = []
    async with store_app.client(max_retries=1, start_timeout=30, on_wait=said.append) as c:
        store_app.transport.script(LoseAnswer(), LoseAnswer(), Answer(529), Answer(529))
        with pytest.raises(Overloaded):
            await c.get_store(sid)
        assert said == [
            f"waiting for the API at http://memfs.test: {LOST} (attempt {n} of 6)" for n in (1, 2)
        ]
        assert c.stats.requests == 4
        store_app.transport.script(LoseAnswer())
        assert (await c.get_store(sid)).id == sid
        assert len(said) == 2


async def test_a_mounts_start_gives_up_at_its_bound(store_app: InProcessStore, sid: str):
    said: list[str] = []
    async with store_app.client(max_retries=6, start_timeout=10, on_wait=said.append) as c:
        store_app.transport.script(LoseAnswer(), LoseAnswer(), LoseAnswer())
        with pytest.raises(TransportError) as caught:
            await c.get_store(sid)
        assert said == [f"waiting for the API at http://memfs.test: {LOST} (attempt 1 of 2)"]
        assert str(caught.value).startswith(
            f"cannot reach the API at http://memfs.test: {LOST}; gave up after 2 attempts in "
        )
        assert str(caught.value).endswith(" s (start-timeout 10 s)")
        # The start is over: the next call retries as always, and says nothing.
        assert (await c.get_store(sid)).id == sid
        assert c.stats.requests == 4 and len(said) == 1


# ---- a retried call meets its own earlier effect -----------------------------


async def test_a_create_whose_answer_was_lost_returns_the_memory_it_made(
    client: StoreClient, store_app: InProcessStore, sid: str
):
    store_app.transport.script(LoseAnswer())
    made = await client.create_memory(sid, "/lost.md", "applied once")
    assert made.path == "/lost.md" and made.content_sha256 == content_sha256(b"applied once")
    # The retry met the store's 409 about the memory the first attempt made.
    assert client.stats.by_status[0] == 1 and client.stats.by_status[409] == 1
    assert [m.id async for m in client.iter_memories(sid)] == [made.id]


async def test_a_create_that_meets_someone_elses_memory_is_a_conflict(
    client: StoreClient, store_app: InProcessStore, sid: str
):
    theirs = await client.create_memory(sid, "/taken.md", "theirs")
    store_app.transport.script(Answer(503))
    with pytest.raises(PathConflict) as caught:
        await client.create_memory(sid, "/taken.md", "ours")
    assert caught.value.conflicting_memory_id == theirs.id
    assert client.stats.by_status[409] == 1


async def test_an_update_whose_answer_was_lost_returns_the_memory_it_changed(
    client: StoreClient, store_app: InProcessStore, sid: str
):
    """By the contract, an update whose result equals the stored state answers
    200 whatever its precondition, so `memfs serve` never sends the retry a
    409; the client still recognises one (a store that checks the
    precondition first). The retry is answered 409 here to reach that path."""
    made = await client.create_memory(sid, "/u.md", "before")
    refused = Answer(409, error_type="memory_precondition_failed_error")
    store_app.transport.script(LoseAnswer(), refused)
    updated = await client.update_memory(
        sid, made.id, content="after", precondition_sha256=made.content_sha256
    )
    assert updated.content_sha256 == content_sha256(b"after")
    assert client.stats.by_status[0] == 1 and client.stats.by_status[409] == 1
    assert client.stats.by_operation["get_memory"] == 1
    assert store_app.transport.reached_app[0][0] == "POST"  # the lost attempt was applied


async def test_an_update_that_meets_someone_elses_change_is_refused(
    client: StoreClient, store_app: InProcessStore, sid: str
):
    made = await client.create_memory(sid, "/u.md", "before")
    await client.update_memory(sid, made.id, content="someone else's")
    store_app.transport.script(Answer(503))
    with pytest.raises(PreconditionFailed):
        await client.update_memory(
            sid, made.id, content="ours", precondition_sha256=made.content_sha256
        )
    assert client.stats.by_status[409] == 1


async def test_a_delete_whose_answer_was_lost_counts_as_done(
    client: StoreClient, store_app: InProcessStore, sid: str
):
    made = await client.create_memory(sid, "/d.md", "x")
    store_app.transport.script(LoseAnswer())
    await client.delete_memory(sid, made.id)
    assert client.stats.by_status[0] == 1 and client.stats.by_status[404] == 1
    assert [m async for m in client.iter_memories(sid)] == []


# ---- the sync engine ---------------------------------------------------------


async def test_sync_passes_against_the_app_in_process(
    client: StoreClient, sid: str, tmp_path: Path
):
    first = await client.create_memory(sid, "/a.md", "alpha")
    await client.create_memory(sid, "/deep/b.md", "bravo")
    cache = StoreCache(str(tmp_path / "cache"), sid)
    try:
        engine = SyncEngine(client, cache)
        report = await engine.run_pass(full=True)
        assert (report.pulled, report.full_listing) == (2, True)
        idle = await engine.run_pass()
        assert (idle.pulled, idle.pushed, idle.requests) == (0, 0, 1)
        await client.update_memory(sid, first.id, content="changed remotely")
        changed = await engine.run_pass()
        assert changed.pulled == 1
        assert engine.pending() == []
    finally:
        cache.close()


async def test_a_sync_pass_the_app_refuses_is_a_sync_error(
    store_app: InProcessStore, sid: str, tmp_path: Path, expect_log
):
    expect_log("memfs.sync", "the store refused the token (401)", level=logging.ERROR, count=1)
    cache = StoreCache(str(tmp_path / "cache"), sid)
    try:
        async with store_app.client("wrong-token") as c:
            with pytest.raises(SyncError):
                await SyncEngine(c, cache).run_pass(full=True)
    finally:
        cache.close()
