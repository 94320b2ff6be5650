"""StoreClient's retries, through a FaultProxy in front of a real `memfs serve`:
what is retried, what never is, and what a caller gets in the end."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
import trio

from memfs._exceptions import (
    Conflict,
    InvalidRequest,
    NotFound,
    Overloaded,
    PathConflict,
    PreconditionFailed,
    RateLimited,
    RequestTooLarge,
    ServerError,
    TransportError,
)
from memfs.api import content_sha256
from memfs.client import StoreClient
from tests.support import ServerProcess
from tests.support.faults import FaultProxy

FAST = {"backoff_base": 0.01, "backoff_max": 0.05}


@pytest.fixture
async def proxy(shared_memfs_server: ServerProcess) -> AsyncIterator[FaultProxy]:
    async with FaultProxy(shared_memfs_server.url, seed=1) as p:
        yield p


@pytest.fixture
async def direct(shared_memfs_server: ServerProcess) -> AsyncIterator[StoreClient]:
    """A client that talks to the server without the proxy: another writer."""
    async with StoreClient(shared_memfs_server.url, shared_memfs_server.token) as c:
        yield c


@pytest.fixture
async def via_proxy(proxy: FaultProxy, shared_memfs_server: ServerProcess):
    async with StoreClient(proxy.url, shared_memfs_server.token, max_retries=4, **FAST) as c:
        yield c


@pytest.fixture
async def sid(direct: StoreClient) -> str:
    return (await direct.create_store("faults")).id


async def test_429_retry_after_is_honoured(shared_memfs_server, proxy: FaultProxy, sid: str):
    async with StoreClient(
        proxy.url, shared_memfs_server.token, backoff_base=0.01, backoff_max=1.0
    ) as client:
        proxy.set(status=429, status_next=2, retry_after=0.3)
        started = time.monotonic()
        store = await client.get_store(sid)
        elapsed = time.monotonic() - started
        assert store.id == sid
        assert elapsed >= 0.6, "two retry-after waits of 0.3 s, not the 0.01 s backoff"
        assert elapsed < 3
        assert (client.stats.requests, client.stats.retries) == (3, 2)
        assert (proxy.counters.statuses_injected, proxy.counters.forwarded) == (2, 1)


async def test_retry_after_is_capped(shared_memfs_server, proxy: FaultProxy, sid: str):
    async with StoreClient(
        proxy.url, shared_memfs_server.token, backoff_base=0.01, backoff_max=0.1
    ) as client:
        proxy.set(status=429, status_next=1, retry_after=3600)
        started = time.monotonic()
        store = await client.get_store(sid)
        assert time.monotonic() - started < 2, "retry-after is capped at 3 × backoff_max"
        assert store.id == sid
        assert (client.stats.requests, client.stats.retries) == (2, 1)
        assert (proxy.counters.statuses_injected, proxy.counters.forwarded) == (1, 1)


@pytest.mark.parametrize("status", [500, 502, 503, 504, 529])
async def test_server_faults_are_retried_then_succeed(
    via_proxy: StoreClient, proxy: FaultProxy, sid: str, status: int
):
    proxy.set(status=status, status_next=3)
    memory = await via_proxy.create_memory(sid, f"/after-{status}.md", "made it")
    assert memory.path == f"/after-{status}.md"
    assert via_proxy.stats.retries == 3
    assert via_proxy.stats.by_status[status] == 3
    assert proxy.counters.forwarded == 1


async def test_retries_run_out_with_the_last_answer(
    via_proxy: StoreClient, proxy: FaultProxy, sid: str
):
    proxy.set(status=529, status_rate=1.0)
    with pytest.raises(Overloaded) as caught:
        await via_proxy.get_store(sid)
    assert caught.value.status == 529 and caught.value.type == "overloaded_error"
    assert caught.value.request_id and caught.value.request_id.startswith("req_fault_")
    assert via_proxy.stats.requests == proxy.counters.requests_seen == 5
    proxy.set(status=429, status_rate=1.0, retry_after=0)
    with pytest.raises(RateLimited):
        await via_proxy.get_store(sid)


async def test_dropped_connections_are_retried(via_proxy: StoreClient, proxy: FaultProxy, sid: str):
    proxy.set(drop_next=3)
    memory = await via_proxy.create_memory(sid, "/dropped.md", "survived")
    assert memory.content_sha256 == content_sha256(b"survived")
    assert via_proxy.stats.retries == 3
    assert proxy.counters.drops_injected == 3


async def test_outage_is_a_transport_error_after_every_retry(
    via_proxy: StoreClient, proxy: FaultProxy, sid: str
):
    proxy.set(down=True)
    with pytest.raises(TransportError) as caught:
        await via_proxy.get_store(sid)
    assert str(caught.value).startswith(f"cannot reach {proxy.url}: ")
    assert "(after 5 attempts)" in str(caught.value)
    assert via_proxy.stats.requests == 5
    proxy.set(down=False)
    assert (await via_proxy.get_store(sid)).id == sid


async def test_slow_answers_time_out(shared_memfs_server, proxy: FaultProxy, sid: str):
    async with StoreClient(
        proxy.url, shared_memfs_server.token, timeout=0.3, max_retries=1, **FAST
    ) as client:
        proxy.set(delay=1.0)
        with pytest.raises(TransportError) as caught:
            await client.get_store(sid)
        assert str(caught.value) == (
            f"cannot reach {proxy.url}: no answer within 0.3 s (after 2 attempts)"
        )
        proxy.set(delay=0)
        assert (await client.get_store(sid)).id == sid


async def test_client_errors_are_never_retried(via_proxy: StoreClient, proxy: FaultProxy, sid: str):
    memory = await via_proxy.create_memory(sid, "/taken.md", "x")
    proxy.reset()
    via_proxy.stats.reset()
    with pytest.raises(InvalidRequest):
        await via_proxy.create_memory(sid, "bad", "x")
    with pytest.raises(NotFound):
        await via_proxy.get_memory(sid, "mem_missing")
    with pytest.raises(PathConflict):
        await via_proxy.create_memory(sid, "/taken.md", "y")
    with pytest.raises(PreconditionFailed):
        await via_proxy.update_memory(
            sid, memory.id, content="z", precondition_sha256=content_sha256(b"no")
        )
    with pytest.raises(RequestTooLarge):
        await via_proxy.create_memory(sid, "/huge.md", "x" * 102_401)
    assert via_proxy.stats.requests == 5
    assert via_proxy.stats.retries == 0
    assert proxy.counters.requests_seen == proxy.counters.forwarded == 5


def before_the_retry(proxy: FaultProxy, method: str, change) -> list:
    """The next `method` request is answered 429 (retry at once), and `change`
    (another writer's call) lands just before the retry reaches the store, as if
    the first attempt had been applied and its answer lost. Returns the list
    that receives what `change` returned."""
    landed: list = []

    async def hook(_method: str, _target: str) -> None:
        proxy.before_forward = None
        landed.append(await change())

    proxy.set(status=429, status_next=1, retry_after=0, match_method=method)
    proxy.before_forward = hook
    return landed


async def test_retried_create_that_meets_its_own_memory_succeeds(
    via_proxy: StoreClient, proxy: FaultProxy, direct: StoreClient, sid: str
):
    """The first attempt's answer is lost (here: a 429), and the memory appears
    meanwhile with the same path and content, as if that attempt had been
    applied: the retry's 409 is recognised as our own."""
    theirs = before_the_retry(
        proxy, "POST", lambda: direct.create_memory(sid, "/once.md", "same content")
    )
    memory = await via_proxy.create_memory(sid, "/once.md", "same content")
    assert proxy.counters.statuses("POST", "/memories") == [429, 409]
    assert memory.id == theirs[0].id
    assert memory.content_sha256 == content_sha256(b"same content")
    assert memory.content is None, "the basic view, as an answer without a retry"
    assert via_proxy.stats.by_status[409] == 1


async def test_retried_create_that_meets_other_content_conflicts(
    via_proxy: StoreClient, proxy: FaultProxy, direct: StoreClient, sid: str
):
    before_the_retry(
        proxy, "POST", lambda: direct.create_memory(sid, "/contested.md", "their content")
    )
    with pytest.raises(PathConflict) as caught:
        await via_proxy.create_memory(sid, "/contested.md", "our content")
    assert proxy.counters.statuses("POST", "/memories") == [429, 409]
    assert caught.value.conflicting_path == "/contested.md"


async def test_retried_delete_that_finds_nothing_is_done(
    via_proxy: StoreClient, proxy: FaultProxy, direct: StoreClient, sid: str
):
    memory = await direct.create_memory(sid, "/gone.md", "bye")
    before_the_retry(proxy, "DELETE", lambda: direct.delete_memory(sid, memory.id))
    await via_proxy.delete_memory(sid, memory.id)
    assert proxy.counters.statuses("DELETE", f"/memories/{memory.id}") == [429, 404]
    assert via_proxy.stats.by_status[404] == 1
    with pytest.raises(NotFound):
        await direct.get_memory(sid, memory.id)


async def test_retried_update_that_was_already_applied_succeeds(
    via_proxy: StoreClient, proxy: FaultProxy, direct: StoreClient, sid: str
):
    """The first attempt is applied and its answer lost; the retry's
    precondition (the old content) no longer holds and the store answers 409
    (memfs serve would call the repeat a no-op and answer 200, so the proxy
    answers as a store that checks the precondition first). The store holds
    exactly what was sent: the update is done."""
    memory = await direct.create_memory(sid, "/edit.md", "old")
    route = rf"/memories/{memory.id}(\?|$)"

    async def then_refuse_the_retry(_method: str, _target: str) -> None:
        proxy.before_forward = None
        proxy.set(status=409, error_type="memory_precondition_failed_error", status_next=1)

    proxy.set(lose_answer_next=1, match_method="POST", match_path=route)
    proxy.before_forward = then_refuse_the_retry
    updated = await via_proxy.update_memory(
        sid, memory.id, content="new", precondition_sha256=content_sha256(b"old")
    )
    assert proxy.counters.statuses("POST", route) == [0, 409]
    assert (proxy.counters.answers_lost, proxy.counters.statuses_injected) == (1, 1)
    assert via_proxy.stats.by_status[409] == 1
    assert (updated.content, updated.content_sha256) == (None, content_sha256(b"new"))
    assert (await direct.get_memory(sid, memory.id)).content == "new"


async def test_retried_update_that_meets_other_content_is_refused(
    via_proxy: StoreClient, proxy: FaultProxy, direct: StoreClient, sid: str
):
    memory = await direct.create_memory(sid, "/edit.md", "old")
    before_the_retry(proxy, "POST", lambda: direct.update_memory(sid, memory.id, content="theirs"))
    with pytest.raises(PreconditionFailed):
        await via_proxy.update_memory(
            sid, memory.id, content="ours", precondition_sha256=content_sha256(b"old")
        )
    assert proxy.counters.statuses("POST", f"/memories/{memory.id}") == [429, 409]
    assert (await direct.get_memory(sid, memory.id)).content == "theirs"


async def test_listing_through_flaky_network_loses_nothing(
    via_proxy: StoreClient, proxy: FaultProxy, direct: StoreClient, sid: str
):
    async with trio.open_nursery() as nursery:
        for i in range(150):
            nursery.start_soon(direct.create_memory, sid, f"/f/{i:03d}", str(i))
    proxy.set(status=529, status_rate=0.3, drop_rate=0.1, match_method="GET")
    paths = [m.path async for m in via_proxy.iter_memories(sid, limit=10)]
    assert paths == [f"/f/{i:03d}" for i in range(150)]
    assert via_proxy.stats.retries > 0


async def test_create_whose_answer_was_lost_returns_the_memory_it_made(
    via_proxy: StoreClient, proxy: FaultProxy, direct: StoreClient, sid: str
):
    proxy.set(lose_answer_next=1, match_method="POST")
    memory = await via_proxy.create_memory(sid, "/lost-answer.md", "applied once")
    assert via_proxy.stats.retries == 1
    assert via_proxy.stats.by_status[409] == 1
    listed = [m async for m in direct.iter_memories(sid)]
    assert [(m.id, m.path) for m in listed] == [(memory.id, "/lost-answer.md")]
    assert memory.content_sha256 == content_sha256(b"applied once")


async def test_delete_whose_answer_was_lost_is_done(
    via_proxy: StoreClient, proxy: FaultProxy, direct: StoreClient, sid: str
):
    memory = await direct.create_memory(sid, "/lost-delete.md", "x")
    proxy.set(lose_answer_next=1, match_method="DELETE")
    await via_proxy.delete_memory(sid, memory.id)
    assert via_proxy.stats.retries == 1
    assert via_proxy.stats.by_status[404] == 1
    assert [m async for m in direct.iter_memories(sid)] == []


# ----------------------------------------------- the SDKs' transport habits


async def test_every_request_carries_beta_true(via_proxy: StoreClient, proxy: FaultProxy, sid):
    memory = await via_proxy.create_memory(sid, "/beta.md", "x")
    await via_proxy.get_memory(sid, memory.id)
    await via_proxy.update_memory(sid, memory.id, content="y")
    _ = [m async for m in via_proxy.iter_memories(sid, path_prefix="/", depth=1)]
    _ = [v async for v in via_proxy.iter_versions(sid)]
    await via_proxy.delete_memory(sid, memory.id)
    await via_proxy.get_store(sid)
    targets = proxy.counters.targets
    assert len(targets) == 7
    for target in targets:
        query = parse_qs(urlsplit(target).query)
        assert query["beta"] == ["true"], target
    # The call's own parameters are still there.
    assert parse_qs(urlsplit(targets[3]).query)["depth"] == ["1"]


async def test_retry_after_ms_is_preferred_to_retry_after(
    shared_memfs_server, proxy: FaultProxy, sid: str
):
    async with StoreClient(
        proxy.url, shared_memfs_server.token, backoff_base=0.01, backoff_max=2.0
    ) as client:
        proxy.set(status=429, status_next=2, retry_after=5, headers={"retry-after-ms": "250"})
        started = time.monotonic()
        assert (await client.get_store(sid)).id == sid
        elapsed = time.monotonic() - started
        assert 0.5 <= elapsed < 2.5, "two waits of 250 ms, not of 5 s"
        assert client.stats.retries == 2


async def test_retry_after_ms_alone_on_a_server_fault(
    shared_memfs_server, proxy: FaultProxy, sid: str
):
    async with StoreClient(
        proxy.url, shared_memfs_server.token, backoff_base=0.001, backoff_max=2.0
    ) as client:
        proxy.set(status=503, status_next=1, headers={"retry-after-ms": "400"})
        started = time.monotonic()
        await client.get_store(sid)
        assert time.monotonic() - started >= 0.4


async def test_x_should_retry_true_retries_even_a_conflict(
    via_proxy: StoreClient, proxy: FaultProxy, sid: str
):
    proxy.set(status=409, status_next=2, headers={"x-should-retry": "true"})
    assert (await via_proxy.get_store(sid)).id == sid
    assert via_proxy.stats.retries == 2
    assert via_proxy.stats.by_status[409] == 2


async def test_x_should_retry_false_never_retries_even_a_server_fault(
    via_proxy: StoreClient, proxy: FaultProxy, sid: str
):
    proxy.set(status=503, status_next=1, headers={"x-should-retry": "false"})
    with pytest.raises(ServerError) as caught:
        await via_proxy.get_store(sid)
    assert caught.value.status == 503
    assert via_proxy.stats.requests == proxy.counters.requests_seen == 1


async def test_a_conflict_without_the_header_is_still_not_retried(
    via_proxy: StoreClient, proxy: FaultProxy, sid: str
):
    proxy.set(status=409, status_next=1)
    with pytest.raises(Conflict):
        await via_proxy.get_store(sid)
    assert via_proxy.stats.requests == 1


async def test_408_is_retried(via_proxy: StoreClient, proxy: FaultProxy, sid: str):
    proxy.set(status=408, status_next=2)
    assert (await via_proxy.get_store(sid)).id == sid
    assert via_proxy.stats.retries == 2
    assert via_proxy.stats.by_status[408] == 2


async def test_the_proxy_relays_a_chunked_body_and_keeps_the_connection(
    shared_memfs_server: ServerProcess, proxy: FaultProxy, sid: str
):
    """A request body sent in chunks (no content-length) reaches the store
    whole, and the next request on the same connection is answered too."""

    async def chunks() -> AsyncIterator[bytes]:
        for part in (b'{"path": "/chunked.md", ', b'"content": "in two parts"}'):
            yield part

    headers = {**shared_memfs_server.headers(), "content-type": "application/json"}
    async with httpx.AsyncClient(base_url=proxy.url, headers=headers) as http:
        created = await http.post(f"/v1/memory_stores/{sid}/memories", content=chunks())
        assert created.status_code == 200, created.text
        again = await http.get(f"/v1/memory_stores/{sid}/memories/{created.json()['id']}")
        assert again.json()["content"] == "in two parts"
    assert proxy.counters.forwarded == 2
