"""The sync decision table, row by row, in-process: a real `memfs serve`, a real
StoreClient and a real StoreCache on disk, with local changes made through the
cache's own API (the calls the filesystem makes) and a clock the test moves.
Real mounts exercise the same engine in tests/system/test_sync.py."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import parse_qs

import pytest
import trio

from memfs._exceptions import SyncError
from memfs.api import content_sha256
from memfs.cache import ROOT_ID, StoreCache
from memfs.client import StoreClient
from memfs.sync import SyncEngine, delete_cap
from tests.support import conflict_files
from tests.support.faults import FaultProxy


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class Side:
    """One store seen from both sides: `remote` (the API) and `local` (the cache)."""

    def __init__(
        self,
        client: StoreClient,
        store_id: str,
        cache: StoreCache,
        engine: SyncEngine,
        clock: Clock,
    ):
        self.client, self.store_id, self.cache, self.engine, self.clock = (
            client,
            store_id,
            cache,
            engine,
            clock,
        )

    # local changes, as the filesystem makes them
    async def write(self, path: str, text: str) -> None:
        parent = ROOT_ID
        names = path.strip("/").split("/")
        for name in names[:-1]:
            kids = self.cache.children[parent]
            parent = kids[name] if name in kids else self.cache.mkdir(parent, name, 0o755).id
        kids = self.cache.children[parent]
        node_id = (
            kids[names[-1]] if names[-1] in kids else self.cache.create(parent, names[-1], 0o644).id
        )
        node = await self.cache.open(node_id, truncate=True)
        self.cache.write(node, 0, text.encode())
        self.cache.release(node_id)

    def unlink(self, path: str) -> None:
        node = self.cache.find(path)
        self.cache.unlink(node.parent, node.name)

    def rename(self, old: str, new: str) -> None:
        a, b = self.cache.find(old), self.cache.find(new.rsplit("/", 1)[0] or "/")
        self.cache.rename(a.parent, a.name, b.id, new.rsplit("/", 1)[1])

    async def read(self, path: str) -> str | None:
        node = self.cache.find(path)
        if node is None:
            return None
        node = await self.cache.open(node.id)
        try:
            return self.cache.read(node, 0, 1 << 20).decode()
        finally:
            self.cache.release(node.id)

    # the store
    async def remote(self) -> dict[str, str]:
        out = {}
        async for m in self.client.iter_memories(self.store_id, view="full", limit=20):
            out[m.path] = m.content
        return out

    async def remote_memory(self, path: str):
        return await self.client.find_memory_by_path(self.store_id, path)

    async def put_remote(self, path: str, text: str):
        m = await self.remote_memory(path)
        if m is None:
            return await self.client.create_memory(self.store_id, path, text)
        return await self.client.update_memory(self.store_id, m.id, content=text)

    async def sync(self, **kw):
        return await self.engine.run_pass(**kw)


@asynccontextmanager
async def _side(url: str, token: str, tmp_path: Path) -> AsyncIterator[Side]:
    async with StoreClient(
        url, token, backoff_base=0.01, backoff_max=0.05, max_retries=2
    ) as client:
        store = await client.create_store("sync engine")
        cache = StoreCache(str(tmp_path / "cache"), store.id)
        clock = Clock()
        engine = SyncEngine(client, cache, clock=clock)
        cache.source = engine.fetch_content  # the composition root's wiring
        s = Side(client, store.id, cache, engine, clock)
        await s.sync()
        try:
            yield s
        finally:
            cache.close()


@pytest.fixture
async def side(shared_memfs_server, tmp_path: Path):
    async with _side(shared_memfs_server.url, shared_memfs_server.token, tmp_path) as s:
        yield s


@pytest.fixture
async def proxy(shared_memfs_server) -> AsyncIterator[FaultProxy]:
    async with FaultProxy(shared_memfs_server.url) as p:
        yield p


@pytest.fixture
async def proxied_side(shared_memfs_server, proxy: FaultProxy, tmp_path: Path):
    """A Side whose client (the engine's) talks to the store through `proxy`."""
    async with _side(proxy.url, shared_memfs_server.token, tmp_path) as s:
        yield s


@pytest.fixture
async def direct(shared_memfs_server) -> AsyncIterator[StoreClient]:
    """Another writer of the store, past the proxy."""
    async with StoreClient(shared_memfs_server.url, shared_memfs_server.token) as c:
        yield c


async def test_local_change_is_pushed_with_the_base_as_precondition(
    proxied_side: Side, proxy: FaultProxy, direct: StoreClient, expect_log
):
    """The store's version is never overwritten by an edit made on an older base:
    here a remote edit lands after the pass read the feed, just before the
    push reaches the store; the update's precondition (the base) refuses it,
    and the next pass keeps the local edit as a conflict copy."""
    side = proxied_side
    await side.write("/a.md", "one")
    report = await side.sync()
    assert report.pushed == 1
    assert await side.remote() == {"/a.md": "one"}
    first = await side.remote_memory("/a.md")
    await side.write("/a.md", "two")
    await side.sync()
    second = await side.remote_memory("/a.md")
    assert second.id == first.id
    assert second.content_sha256 == content_sha256(b"two")
    assert side.cache.changes() == []

    update = rf"/memories/{first.id}(\?|$)"
    landed = []

    async def theirs_lands_first(method: str, target: str) -> None:
        landed.append(await direct.update_memory(side.store_id, first.id, content="theirs"))
        proxy.before_forward = None

    await side.write("/a.md", "three, on base two")
    proxy.reset()
    proxy.set(match_method="POST", match_path=update)
    proxy.before_forward = theirs_lands_first
    report = await side.sync()
    assert len(landed) == 1, "the remote edit did not land between the feed and the push"
    assert proxy.counters.statuses("POST", update) == [409]
    assert report.pushed == 0
    assert await side.remote() == {"/a.md": "theirs"}
    proxy.reset()

    expect_log("memfs.sync", "conflict on /a.md", count=1)
    await side.sync()
    assert await side.read("/a.md") == "theirs"
    assert [c.read_text() for c in conflict_files(side.cache.conflicts.dir)] == [
        "three, on base two"
    ]
    assert await side.remote() == {"/a.md": "theirs"}
    assert side.cache.changes() == []


async def test_idle_pass_costs_one_request_and_fetches_nothing(side: Side):
    await side.write("/a.md", "one")
    await side.sync()
    report = await side.sync()
    assert report.requests == 1
    assert (report.pushed, report.pulled) == (0, 0)


async def test_remote_change_is_pulled_and_only_what_changed_is_fetched(side: Side):
    for i in range(5):
        await side.write(f"/f{i}.md", f"v{i}")
    await side.sync()
    await side.put_remote("/f3.md", "changed remotely")
    side.client.stats.reset()
    report = await side.sync()
    assert report.pulled == 1
    # The feed (1 request) and the one content that changed (1 request).
    assert side.client.stats.requests == 2
    assert await side.read("/f3.md") == "changed remotely"
    assert await side.read("/f2.md") == "v2"


async def test_remote_new_memory_appears_without_fetching_content(side: Side):
    await side.put_remote("/deep/new.md", "fresh")
    side.client.stats.reset()
    report = await side.sync()
    assert report.pulled == 1 and side.client.stats.requests == 1
    node = side.cache.find("/deep/new.md")
    assert node is not None and not node.cached and node.size == 5
    assert await side.read("/deep/new.md") == "fresh"


async def test_both_changed_store_wins_and_local_is_kept_as_conflict_copy(
    side: Side, caplog, expect_log
):
    expect_log("memfs.sync", "conflict on /c.md", level=logging.WARNING, count=1)
    await side.write("/c.md", "base")
    await side.sync()
    await side.put_remote("/c.md", "theirs")
    await side.write("/c.md", "mine")
    with caplog.at_level(logging.WARNING, logger="memfs.sync"):
        report = await side.sync()
    assert report.conflicts == 1
    assert await side.read("/c.md") == "theirs"
    assert (await side.remote())["/c.md"] == "theirs"
    copies = conflict_files(side.cache.conflicts.dir)
    assert len(copies) == 1 and copies[0].read_text() == "mine"
    assert any(
        "conflict on /c.md" in r.message and str(copies[0]) in r.message for r in caplog.records
    )


async def test_remote_delete_of_clean_file_removes_it(side: Side):
    await side.write("/gone/x.md", "x")
    await side.sync()
    m = await side.remote_memory("/gone/x.md")
    await side.client.delete_memory(side.store_id, m.id)
    report = await side.sync()
    assert report.removed_local == 1
    assert side.cache.find("/gone/x.md") is None
    assert side.cache.find("/gone") is None  # a folder only the store implied goes with it


async def test_remote_delete_of_edited_file_recreates_it(side: Side, expect_log):
    expect_log("memfs.sync", "/e.md was deleted in the store but changed here", count=1)
    await side.write("/e.md", "v1")
    await side.sync()
    m = await side.remote_memory("/e.md")
    await side.client.delete_memory(side.store_id, m.id)
    await side.write("/e.md", "v2 local")
    await side.sync()
    assert await side.remote() == {"/e.md": "v2 local"}


async def test_local_delete_waits_for_the_window_then_deletes_with_expected_sha(side: Side):
    await side.write("/d.md", "doomed")
    await side.sync()
    side.unlink("/d.md")
    report = await side.sync()
    assert report.deleted_remote == 0 and "/d.md" in await side.remote()
    side.clock.now += 29
    await side.sync()
    assert "/d.md" in await side.remote()
    side.clock.now += 2
    report = await side.sync()
    assert report.deleted_remote == 1
    assert await side.remote() == {}
    assert side.cache.tombstones == {}


async def test_final_sync_waives_the_window(side: Side):
    await side.write("/d.md", "doomed")
    await side.sync()
    side.unlink("/d.md")
    report = await side.sync(final=True)
    assert report.deleted_remote == 1 and await side.remote() == {}


@pytest.mark.parametrize("mode", ["log_only", "disabled"])
async def test_deletion_modes_keep_the_memory(side: Side, mode: str, expect_log):
    """log_only says so once, across two passes; disabled says nothing."""
    if mode == "log_only":
        expect_log("memfs.sync", "/keep.md was deleted here; not deleted in the store", count=1)
        expect_log("memfs.sync", "(deletions: log_only)", count=1)
    side.engine.deletions = mode
    await side.write("/keep.md", "kept")
    await side.sync()
    side.unlink("/keep.md")
    side.clock.now += 60
    await side.sync(final=True)
    await side.sync(final=True)
    assert await side.remote() == {"/keep.md": "kept"}


async def test_deletes_per_pass_are_capped(side: Side):
    await side.write("/kept.md", "one file stays: deleting every file is a wipe")
    for i in range(40):
        await side.write(f"/n/{i:02}.md", "x")
    await side.sync()
    for i in range(40):
        side.unlink(f"/n/{i:02}.md")
    await side.sync()
    side.clock.now += 31
    report = await side.sync()
    assert delete_cap(41) == 10
    assert report.deleted_remote == 10
    assert len(await side.remote()) == 31
    await side.sync()
    assert len(await side.remote()) == 31 - delete_cap(31)  # n is what the store still holds


async def test_local_delete_of_remotely_changed_memory_restores_it(side: Side, expect_log):
    expect_log("memfs.sync", "/r.md was deleted here but changed in the store", count=1)
    await side.write("/r.md", "v1")
    await side.sync()
    side.unlink("/r.md")
    await side.put_remote("/r.md", "v2 remote")
    side.clock.now += 31
    await side.sync()
    assert await side.remote() == {"/r.md": "v2 remote"}
    assert await side.read("/r.md") == "v2 remote"


async def test_delete_rechecks_the_store_just_before_sending(
    proxied_side: Side, proxy: FaultProxy, direct: StoreClient, expect_log
):
    """A change that lands after the feed was read, just before the DELETE
    reaches the store, makes the DELETE fail its expected sha: the memory is
    restored, not lost."""
    side = proxied_side
    expect_log("memfs.sync", "/late.md was deleted here but changed in the store", count=1)
    await side.write("/late.md", "v1")
    await side.sync()
    memory = await side.remote_memory("/late.md")
    side.unlink("/late.md")
    await side.sync()
    side.clock.now += 31
    landed = []

    async def theirs_lands_first(method: str, target: str) -> None:
        landed.append(await direct.update_memory(side.store_id, memory.id, content="meanwhile"))
        proxy.before_forward = None

    proxy.set(match_method="DELETE")
    proxy.before_forward = theirs_lands_first
    await side.sync()
    assert len(landed) == 1, "no DELETE was sent"
    assert proxy.counters.statuses("DELETE", f"/memories/{memory.id}") == [409]
    assert await side.remote() == {"/late.md": "meanwhile"}
    assert await side.read("/late.md") == "meanwhile"


async def test_rename_is_a_move_of_the_same_memory(side: Side):
    await side.write("/old/name.md", "same")
    await side.sync()
    before = await side.remote_memory("/old/name.md")
    side.cache.mkdir(ROOT_ID, "new", 0o755)
    side.rename("/old/name.md", "/new/name.md")
    await side.sync()
    after = await side.remote_memory("/new/name.md")
    assert after is not None and after.id == before.id
    assert await side.remote() == {"/new/name.md": "same"}


async def test_a_rename_here_outlives_the_stores_edit_of_the_memory(side: Side):
    """Renamed here, edited in the store before the move was pushed: the
    store's bytes come to the new name, and the move is still pushed."""
    await side.write("/d.md", "first")
    await side.sync()
    before = await side.remote_memory("/d.md")
    side.rename("/d.md", "/d-renamed.md")
    await side.put_remote("/d.md", "edited in the store")
    await side.sync()
    assert side.cache.find("/d.md") is None
    assert await side.read("/d-renamed.md") == "edited in the store"
    await side.sync()
    assert await side.remote() == {"/d-renamed.md": "edited in the store"}
    assert (await side.remote_memory("/d-renamed.md")).id == before.id


async def move_remote(side: Side, old: str, new: str) -> None:
    memory = await side.remote_memory(old)
    await side.client.update_memory(side.store_id, memory.id, path=new)


async def test_a_swap_in_the_store_of_a_file_edited_here_leaves_no_name_missing(
    side: Side, expect_log
):
    """The store swapped p and q while p was edited here: p's move cannot be
    followed (q is still taken here), and q's memory moving onto the edited p
    overrules it. The next pass lists the whole store, so q is shown again."""
    expect_log("memfs.sync", "cannot follow the move of /p.md to /q.md", count=1)
    expect_log("memfs.sync", "conflict on /p.md", count=1)
    await side.write("/p.md", "p")
    await side.write("/q.md", "q")
    await side.sync()
    for old, new in (("/p.md", "/t.md"), ("/q.md", "/p.md"), ("/t.md", "/q.md")):
        await move_remote(side, old, new)
    await side.write("/p.md", "edited here")
    await side.sync()
    await side.sync()
    assert {p: await side.read(p) for p in ("/p.md", "/q.md")} == {"/p.md": "q", "/q.md": "p"}
    assert await side.remote() == {"/p.md": "q", "/q.md": "p"}
    [copy] = conflict_files(side.cache.conflicts.dir)
    assert copy.read_text() == "edited here"


async def test_an_edit_pushed_while_the_store_moved_the_file_follows_the_move(
    side: Side, expect_log
):
    """The store moved q to r, then p to q, and p was edited here: the edit
    reaches p's memory, and the file follows it to q; the store's moves are
    never undone."""
    expect_log("memfs.sync", "cannot follow the move of /p.md to /q.md", count=1)
    await side.write("/p.md", "p")
    await side.write("/q.md", "q")
    await side.sync()
    await move_remote(side, "/q.md", "/r.md")
    await move_remote(side, "/p.md", "/q.md")
    await side.write("/p.md", "edited here")
    await side.sync()
    await side.sync()
    assert await side.remote() == {"/q.md": "edited here", "/r.md": "q"}
    assert side.cache.find("/p.md") is None
    assert {p: await side.read(p) for p in ("/q.md", "/r.md")} == {
        "/q.md": "edited here",
        "/r.md": "q",
    }


async def test_a_move_here_onto_a_name_the_store_gave_another_memory_is_said(
    side: Side, expect_log
):
    """Moved here onto a name another sandbox took for a new memory first: the
    store's memory wins the name, the move is a conflict said and kept as a
    copy, and the moved memory is shown at its own name again."""
    expect_log("memfs.sync", "conflict on /new.md", count=1)
    await side.write("/old.md", "old")
    await side.sync()
    await side.put_remote("/new.md", "theirs")
    side.rename("/old.md", "/new.md")
    await side.sync()
    await side.sync()
    assert await side.remote() == {"/old.md": "old", "/new.md": "theirs"}
    assert {p: await side.read(p) for p in ("/old.md", "/new.md")} == {
        "/old.md": "old",
        "/new.md": "theirs",
    }
    [copy] = conflict_files(side.cache.conflicts.dir)
    assert copy.read_text() == "old"


async def test_a_swap_of_two_names_and_a_ring_of_three_are_moves_of_the_same_memories(
    side: Side,
):
    """Names swapped here between two passes (each memory going where another
    stands in the store) reach the store in one pass, as moves that keep
    every memory's id: one of them steps aside for a moment, and nothing is
    left at that path."""
    for name in "abc":
        await side.write(f"/{name}.md", name.upper())
    await side.sync()
    ids = {p: (await side.remote_memory(p)).id for p in ("/a.md", "/b.md", "/c.md")}
    side.rename("/a.md", "/t.md")
    side.rename("/b.md", "/a.md")
    side.rename("/t.md", "/b.md")
    await side.sync()
    assert await side.remote() == {"/a.md": "B", "/b.md": "A", "/c.md": "C"}
    assert (await side.remote_memory("/a.md")).id == ids["/b.md"]
    side.rename("/a.md", "/t.md")
    side.rename("/b.md", "/a.md")
    side.rename("/c.md", "/b.md")
    side.rename("/t.md", "/c.md")
    report = await side.sync()
    assert await side.remote() == {"/a.md": "A", "/b.md": "C", "/c.md": "B"}
    assert {(await side.remote_memory(p)).id for p in ("/a.md", "/b.md", "/c.md")} == set(
        ids.values()
    )
    assert report.pushed == 3 and side.cache.changes() == []
    versions = [v async for v in side.client.iter_versions(side.store_id)]
    assert {v.operation for v in versions} == {"created", "modified"}
    assert await side.sync() is not None and side.cache.changes() == []


async def test_a_swap_whose_other_memory_the_store_deleted_meanwhile_still_lands(
    proxied_side: Side, proxy: FaultProxy, direct: StoreClient, expect_log
):
    """While one move of a swap is pushed to clear the other's path, the store
    deletes its memory: that file is created again there (as a lone move's
    would be), the other memory moves, and the pass ends well."""
    side = proxied_side
    await side.write("/a.md", "A")
    await side.write("/b.md", "B")
    await side.sync()
    ma = (await side.remote_memory("/a.md")).id
    mb = (await side.remote_memory("/b.md")).id
    side.rename("/a.md", "/t.md")
    side.rename("/b.md", "/a.md")
    side.rename("/t.md", "/b.md")
    moves_of_b = []

    async def delete_b_while_it_clears_the_way(method: str, target: str) -> None:
        if method != "POST" or mb not in target:
            return
        moves_of_b.append(target)
        if len(moves_of_b) == 1:
            await trio.sleep(0.2)  # the push of a.md's memory meets b.md's first
        elif len(moves_of_b) == 2:
            await direct.delete_memory(side.store_id, mb)

    proxy.before_forward = delete_b_while_it_clears_the_way
    expect_log("memfs.sync", "/a.md was deleted in the store; it is created again", count=1)
    await side.sync()
    assert len(moves_of_b) == 2
    assert await side.remote() == {"/a.md": "B", "/b.md": "A"}
    assert (await side.remote_memory("/b.md")).id == ma
    assert (await side.remote_memory("/a.md")).id not in (ma, mb)
    assert side.cache.changes() == []


async def test_a_swap_whose_step_aside_the_store_refuses_is_held_with_nothing_in_flight(
    side: Side, expect_log
):
    """When the store refuses the path a memory would step aside to, the swap
    is held as any path conflict is: the store keeps both memories where they
    were, both files stay to push, and no upload is left counted as in flight
    (which would keep write-behind from trying them again)."""
    await side.write("/a.md", "A")
    await side.write("/b.md", "B")
    await side.sync()
    ids = [(await side.remote_memory(p)).id for p in ("/a.md", "/b.md")]
    for memory_id in ids:
        await side.put_remote(f"/.memfs-moving-{memory_id}", "taken")
    await side.sync()
    side.rename("/a.md", "/t.md")
    side.rename("/b.md", "/a.md")
    side.rename("/t.md", "/b.md")
    expect_log("memfs.sync", "is not uploaded", level=logging.WARNING)
    await side.sync()
    remote = await side.remote()
    assert (remote["/a.md"], remote["/b.md"]) == ("A", "B")
    assert {c.path for c in side.cache.changes()} == {"/a.md", "/b.md"}
    assert side.cache.uploads() == []


async def test_editor_save_is_one_update_of_the_target(side: Side):
    await side.write("/doc.md", "v1")
    await side.sync()
    target = await side.remote_memory("/doc.md")
    await side.write("/.doc.md.swp", "v2")
    side.rename("/.doc.md.swp", "/doc.md")
    await side.sync()
    assert await side.remote() == {"/doc.md": "v2"}
    versions = [v async for v in side.client.iter_versions(side.store_id)]
    assert [v.operation for v in versions] == ["modified", "created"]
    assert {v.memory_id for v in versions} == {target.id}


async def test_refused_content_is_reported_once_and_retried_after_a_change(side: Side, expect_log):
    expect_log(
        "memfs.sync",
        "/bin.md is not uploaded: its content is not UTF-8",
        level=logging.WARNING,
        count=1,
    )
    node = side.cache.create(ROOT_ID, "bin.md", 0o644)
    node = await side.cache.open(node.id)
    side.cache.write(node, 0, b"\xff\xfe not utf-8")
    side.cache.release(node.id)
    await side.write("/ok.md", "fine")
    first = await side.sync()
    second = await side.sync()
    assert (first.refused, second.refused) == (1, 1)  # still refused, said once
    assert side.engine.refused() == {"/bin.md": "its content is not UTF-8 text"}
    assert "/bin.md" not in side.engine.pending() and "/bin.md" not in side.engine.left_behind()
    assert await side.remote() == {"/ok.md": "fine"}
    await side.write("/bin.md", "now text")
    await side.sync()
    assert (await side.remote())["/bin.md"] == "now text"


async def test_remote_moves_are_followed(side: Side):
    await side.write("/a/x.md", "x")
    await side.sync()
    m = await side.remote_memory("/a/x.md")
    await side.client.update_memory(side.store_id, m.id, path="/b/x.md")
    await side.sync()
    assert side.cache.find("/a/x.md") is None
    assert await side.read("/b/x.md") == "x"


async def test_marker_path_in_the_store_is_skipped(side: Side, expect_log):
    expect_log("memfs.sync", "a memory at /.anthropic-memory-store, the marker's path", count=1)
    await side.client.create_memory(side.store_id, "/.anthropic-memory-store", "not a marker")
    await side.sync()
    assert side.cache.find("/.anthropic-memory-store") is None


async def test_unreachable_store_keeps_local_changes_and_catches_up(
    proxied_side: Side, proxy: FaultProxy, expect_log
):
    side = proxied_side
    expect_log("memfs.sync", "the store could not be reached", level=logging.ERROR, count=1)
    await side.write("/w.md", "written offline")
    proxy.set(down=True)
    with pytest.raises(SyncError):
        await side.sync()
    assert proxy.counters.refused_connections > 0
    assert [c.path for c in side.cache.changes()] == ["/w.md"]
    proxy.set(down=False)
    await side.sync()
    assert await side.remote() == {"/w.md": "written offline"}
    assert side.cache.changes() == []


async def test_a_file_created_here_and_in_the_store_keeps_the_local_one_as_a_copy(
    side: Side, expect_log
):
    expect_log("memfs.sync", "conflict on /both.md", count=1)
    await side.put_remote("/both.md", "theirs")
    await side.write("/both.md", "mine")
    report = await side.sync()
    assert report.conflicts == 1
    assert await side.read("/both.md") == "theirs"
    assert [c.read_text() for c in conflict_files(side.cache.conflicts.dir)] == ["mine"]
    assert await side.remote() == {"/both.md": "theirs"}


async def test_a_local_edit_survives_the_store_replacing_the_memory_at_its_path(
    side: Side, expect_log
):
    expect_log("memfs.sync", "conflict on /p.md", count=1)
    await side.write("/p.md", "v1")
    await side.sync()
    first = await side.remote_memory("/p.md")
    await side.client.delete_memory(side.store_id, first.id)
    await side.client.create_memory(side.store_id, "/p.md", "theirs")
    await side.write("/p.md", "mine")
    report = await side.sync()
    assert report.conflicts == 1
    assert await side.read("/p.md") == "theirs"
    assert [c.read_text() for c in conflict_files(side.cache.conflicts.dir)] == ["mine"]
    assert await side.remote() == {"/p.md": "theirs"}


async def test_the_download_places_page_after_page_and_caches_every_content(side):
    """With more missing contents than one full-view page holds, the download
    reads pages of 20, each in place (and its progress told) before the next."""
    for i in range(45):
        await side.put_remote(f"/many/m{i:02}.md", f"content {i}")
    await side.sync()
    assert sum(1 for n in side.cache.files() if not n.cached) == 45
    turns = []

    def progress(done: int, total: int) -> None:
        turns.append(sum(1 for n in side.cache.files() if n.cached))

    assert await side.engine.prefetch(progress=progress) == 45
    assert turns == [0, 20, 40, 45]  # at the start, then after each page, installed
    assert all(n.cached for n in side.cache.files())
    assert await side.read("/many/m44.md") == "content 44"


async def test_a_pass_with_nothing_changed_writes_nothing_to_the_cache(side: Side):
    """An idle mount leaves its disk alone: once a pass has taken the store's
    changes, a pass that finds none commits nothing to the journal (no record
    of the redo log, no flush), however many run."""
    await side.put_remote("/a.md", "one")
    await side.write("/b.md", "two")
    await side.sync()
    await side.sync()
    committed = side.cache.journal.committed
    for _ in range(3):
        report = await side.sync()
        assert (report.pushed, report.pulled) == (0, 0)
    assert side.cache.journal.committed == committed
    assert side.cache.get_meta("feed_ts") is not None


# ---- the listing by folder and the background download (issue 23) ---------------

CONTENT_GET = re.compile(r"^GET /v1/memory_stores/[^/]+/memories/[^/]+$")


def content_gets(proxy: FaultProxy) -> dict[str, int]:
    """The single-memory GETs the proxy saw: "GET /path" -> how many."""
    return {k: n for k, n in proxy.counters.requests_by_method_path.items() if CONTENT_GET.match(k)}


def listed_prefixes(proxy: FaultProxy, view: str) -> list[str]:
    """The path_prefix of each listing in `view` the proxy saw, in order ("" for none)."""
    out = []
    for target in proxy.counters.targets:
        path, _, query = target.partition("?")
        q = parse_qs(query)
        if path.endswith("/memories") and q.get("view", ["basic"]) == [view]:
            out.append(q.get("path_prefix", [""])[0])
    return out


async def fill(client: StoreClient, store_id: str, files: dict[str, str]) -> None:
    for path, content in files.items():
        await client.create_memory(store_id, path, content)


async def test_a_memory_moved_between_folders_while_the_store_is_listed_shows_at_its_new_path(
    proxied_side: Side, proxy: FaultProxy, direct: StoreClient
):
    """A large store is listed by top-level folder, both folders at once; a
    memory that moves from one to the other between their pages is on both:
    the store is asked which is true, and the file shows once, where it is now."""
    side = proxied_side
    files = {f"/{d}/m{i:02}.md": f"{d} {i}" for d in "ab" for i in range(60)}
    await fill(direct, side.store_id, files)
    moving = await direct.find_memory_by_path(side.store_id, "/a/m00.md")

    async def move_once_a_is_answered(method: str, target: str) -> None:
        if "path_prefix=%2Fb%2F" not in target:
            return
        proxy.before_forward = None
        while not any("path_prefix=%2Fa%2F" in t for t in proxy.counters.targets):
            await trio.sleep(0.01)
        await trio.sleep(0.2)  # the page of /a/ is answered, with /a/m00.md
        await direct.update_memory(side.store_id, moving.id, path="/b/moved.md")

    proxy.before_forward = move_once_a_is_answered
    await side.sync(full=True)
    assert {"/", "/a/", "/b/"} <= set(listed_prefixes(proxy, "basic"))
    expected = {p: c for p, c in files.items() if p != "/a/m00.md"} | {"/b/moved.md": "a 0"}
    shown = {n.path for n in side.cache.files()}
    assert shown == set(expected)
    assert await side.read("/b/moved.md") == "a 0"


async def read_during_the_download(side: Side, *readers: list[str]) -> list[list[str | None]]:
    """Run the download, and meanwhile one reader per list of paths, each
    starting at the download's first progress and reading its paths in turn;
    what each read."""
    started = trio.Event()
    got: list[list[str | None]] = [[] for _ in readers]

    async def reader(paths: list[str], into: list[str | None]) -> None:
        await started.wait()
        for path in paths:
            into.append(await side.read(path))

    async with trio.open_nursery() as nursery:
        for paths, into in zip(readers, got, strict=True):
            nursery.start_soon(reader, paths, into)
        await side.engine.prefetch(progress=lambda done, total: started.set())
    return got


async def test_a_reader_of_every_file_takes_them_from_the_download_s_pages(
    proxied_side: Side, proxy: FaultProxy, direct: StoreClient
):
    """Reading the whole tree while the download runs: every content comes on
    the listing pages the download reads anyway, none by a request of its own."""
    side = proxied_side
    files = {f"/f{d}/m{i:02}.md": f"{d} {i} " * 50 for d in range(4) for i in range(30)}
    await fill(direct, side.store_id, files)
    await side.sync(full=True)
    proxy.reset()
    proxy.set(delay=0.05)
    [read] = await read_during_the_download(side, sorted(files))
    assert dict(zip(sorted(files), read, strict=True)) == files
    assert content_gets(proxy) == {}
    assert sorted(listed_prefixes(proxy, "full")) == [f"/f{d}/" for d in range(4) for _ in (1, 2)]


async def test_a_file_a_reader_waits_for_jumps_the_download_s_queue(
    proxied_side: Side, proxy: FaultProxy, direct: StoreClient
):
    """Twelve folders, eight read at once: the reader of a file in the last one
    does not wait for the others; its folder is read at once, and its content
    comes on that folder's page."""
    side = proxied_side
    files = {f"/f{d:02}/m{i:02}.md": f"{d} {i}" for d in range(12) for i in range(25)}
    await fill(direct, side.store_id, files)
    await side.sync(full=True)
    proxy.reset()
    proxy.set(delay=0.1)
    assert await read_during_the_download(side, ["/f11/m03.md"]) == [["11 3"]]
    prefixes = listed_prefixes(proxy, "full")
    assert prefixes.index("/f11/") < prefixes.index("/f08/"), prefixes
    assert content_gets(proxy) == {}
    assert all(n.cached for n in side.cache.files())


async def test_readers_far_down_a_long_folder_send_one_request_for_the_file(
    proxied_side: Side, proxy: FaultProxy, direct: StoreClient
):
    """A file five pages down one folder is not waited for page by page: it is
    fetched by id, once however many readers wait for it, and the page that
    later carries it leaves it alone."""
    side = proxied_side
    files = {f"/big/m{i:03}.md": f"big {i}" for i in range(100)}
    await fill(direct, side.store_id, files)
    await side.sync(full=True)
    far = await direct.find_memory_by_path(side.store_id, "/big/m099.md")
    proxy.reset()
    proxy.set(delay=0.1)
    got = await read_during_the_download(side, *[["/big/m099.md"]] * 3)
    assert got == [["big 99"]] * 3
    assert content_gets(proxy) == {f"GET /v1/memory_stores/{side.store_id}/memories/{far.id}": 1}
    assert listed_prefixes(proxy, "full") == ["/big/"] * 5
    assert all(n.cached for n in side.cache.files())
    assert await side.read("/big/m098.md") == "big 98"


async def test_a_store_that_refuses_a_folder_s_listing_is_listed_page_after_page(
    proxied_side: Side, proxy: FaultProxy, direct: StoreClient
):
    """A folder's listing refused (a store that takes no `path_prefix` there):
    the pass lists the whole store page after page instead, and shows it all."""
    side = proxied_side
    files = {f"/{d}/m{i:02}.md": f"{d} {i}" for d in "ab" for i in range(60)}
    await fill(direct, side.store_id, files)
    proxy.set(status=400, status_next=1, match_path=r"path_prefix=%2Fb%2F")
    await side.sync(full=True)
    assert proxy.counters.statuses("GET", r"path_prefix=%2Fb%2F") == [400]
    assert {n.path for n in side.cache.files()} == set(files)
    assert await side.read("/b/m59.md") == "b 59"


async def test_a_folder_whose_content_pages_are_refused_is_fetched_one_by_one(
    proxied_side: Side, proxy: FaultProxy, direct: StoreClient
):
    """One folder's content pages refused: the download goes on with the others
    and fetches that folder's contents by id, each once."""
    side = proxied_side
    files = {f"/{d}/m{i:02}.md": f"{d} {i}" for d in "ab" for i in range(30)}
    await fill(direct, side.store_id, files)
    await side.sync(full=True)
    proxy.reset()
    proxy.set(status=400, status_next=1, match_path=r"path_prefix=%2Fb%2F.*view=full")
    assert await side.engine.prefetch() == 60
    assert all(n.cached for n in side.cache.files())
    assert sorted(content_gets(proxy).values()) == [1] * 30  # /b/'s, each once
    assert await side.read("/b/m29.md") == "b 29"


async def test_a_content_fetched_one_by_one_that_the_store_changed_waits_for_the_pass(
    proxied_side: Side, proxy: FaultProxy, direct: StoreClient
):
    """The download fetching one by one finds a file the store made longer since
    it was listed: it leaves it for the pass, so the size the kernel was told
    stays the cache's until the pass pulls the new content and tells the kernel."""
    side = proxied_side
    files = {f"/b/m{i:02}.md": f"b {i}" for i in range(3)}
    await fill(direct, side.store_id, files)
    await side.sync(full=True)
    await side.put_remote("/b/m01.md", "b 1, made longer in the store")
    proxy.set(status=400, status_next=1, match_path=r"path_prefix=%2Fb%2F.*view=full")
    assert await side.engine.prefetch() == 2
    changed = side.cache.find("/b/m01.md")
    assert (changed.cached, changed.size) == (False, len("b 1"))
    await side.sync()
    assert await side.read("/b/m01.md") == "b 1, made longer in the store"
    assert side.cache.find("/b/m01.md").size == len("b 1, made longer in the store")


async def test_a_file_moved_here_and_in_the_store_to_another_name_is_said(side: Side, expect_log):
    """Moved here and, meanwhile, to another name in the store: the store's name
    wins, as it does for a change made on both sides, and the pass says so
    rather than undo the move here without a word."""
    expect_log("memfs.sync", "conflict on /mine.md", count=1)
    await side.write("/notes.md", "notes")
    await side.sync()
    memory = await side.remote_memory("/notes.md")
    await side.client.update_memory(side.store_id, memory.id, path="/theirs.md")
    side.rename("/notes.md", "/mine.md")
    report = await side.sync()
    assert report.conflicts == 1
    assert await side.remote() == {"/theirs.md": "notes"}
    assert (side.cache.find("/mine.md"), await side.read("/theirs.md")) == (None, "notes")
