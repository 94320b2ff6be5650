"""StoreCache on its own: the tree, the contents (content files, an open
file's bytes in memory), the journal, the eviction of clean contents.

No FUSE and no server: contents the store "has" are placed with
`place_remote`, as the sync engine does after a listing.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from memfs._exceptions import (
    CacheInUse,
    ContentUnavailable,
    DirectoryNotEmpty,
    EntryExists,
    FileTooLarge,
    InvalidMove,
    InvalidPath,
    NameTooLong,
    NoSuchEntry,
)
from memfs.api import MAX_CONTENT_BYTES, content_sha256
from memfs.cache import ROOT_ID, StoreCache, StoredMemory
from tests.support.invariants import content_sizes

STORE = "memstore_unit"


def remote(cache: StoreCache, memory_id: str, path: str, content: bytes, *, cached: bool = True):
    """Show a memory the store holds, as the sync engine does after a listing."""
    stored = StoredMemory(memory_id, path, content_sha256(content), len(content))
    placed = cache.place_remote(stored, content if cached else None)
    return placed.node


async def write_file(cache: StoreCache, parent: int, name: str, content: bytes):
    node = cache.create(parent, name, 0o644)
    await cache.open(node.id)
    cache.write(node, 0, content)
    cache.release(node.id)
    return node


def on_disk(cache: StoreCache, node_id: int) -> bytes | None:
    """The content the journal has committed for this file (what a kill leaves)."""
    return cache.journal.content(node_id)


def killed(cache: StoreCache) -> None:
    """What a SIGKILL leaves: the journal's files close as they stand, SQLite and
    the content files alike, and nothing else happens (no close(), no flush,
    no checkpoint, no batch save, no fsync)."""
    cache.journal.abandon()


async def test_create_write_is_on_disk_before_close_and_listed_as_a_change(tmp_path):
    cache = StoreCache(str(tmp_path), STORE)
    docs = cache.mkdir(ROOT_ID, "docs", 0o755)
    node = cache.create(docs.id, "a.md", 0o644)
    await cache.open(node.id)
    assert cache.write(node, 0, b"hello") == 5
    assert on_disk(cache, node.id) == b"hello"
    cache.write(node, 10, b"!")
    assert on_disk(cache, node.id) == b"hello\0\0\0\0\0!"
    assert node.size == 11
    assert cache.read(node, 8, 100) == b"\0\0!"
    cache.release(node.id)
    [change] = cache.changes()
    assert (change.path, change.memory_id, change.edited) == ("/docs/a.md", None, True)
    assert cache.find("/docs/a.md") is node
    assert [name for name, _ in cache.list_dir(docs.id)] == ["a.md"]
    cache.close()


async def test_bad_names_and_sizes_are_refused_with_their_own_errors(tmp_path):
    cache = StoreCache(str(tmp_path), STORE)
    with pytest.raises(InvalidPath):
        cache.create(ROOT_ID, "tab\there", 0o644)
    with pytest.raises(InvalidPath):
        cache.create(ROOT_ID, "cafe\u0301", 0o644)  # not NFC
    with pytest.raises(NameTooLong):
        cache.create(ROOT_ID, "n" * 256, 0o644)
    deep = ROOT_ID
    for _ in range(4):
        deep = cache.mkdir(deep, "d" * 250, 0o755).id
    with pytest.raises(NameTooLong):  # 4 * 251 + 1 + 20 > 1024 bytes
        cache.create(deep, "f" * 20, 0o644)
    cache.create(deep, "f" * 19, 0o644)  # exactly 1,024 bytes
    with pytest.raises(NameTooLong):  # the file under the moved folder would pass 1,024
        cache.rename(ROOT_ID, "d" * 250, ROOT_ID, "e" * 251)
    cache.rename(ROOT_ID, "d" * 250, ROOT_ID, "e" * 250)
    with pytest.raises(EntryExists):
        cache.create(ROOT_ID, ".anthropic-memory-store", 0o644)
    node = await write_file(cache, ROOT_ID, "big", b"x" * MAX_CONTENT_BYTES)
    await cache.open(node.id)
    with pytest.raises(FileTooLarge):
        cache.write(node, MAX_CONTENT_BYTES, b"y")
    with pytest.raises(FileTooLarge):
        cache.truncate(node.id, MAX_CONTENT_BYTES + 1)
    assert node.size == MAX_CONTENT_BYTES
    cache.release(node.id)
    with pytest.raises(EntryExists):
        cache.create(ROOT_ID, "big", 0o644)
    with pytest.raises(NoSuchEntry):
        cache.lookup(ROOT_ID, "missing")
    cache.close()


async def test_paths_the_api_refuses_are_refused_by_the_cache(tmp_path):
    cache = StoreCache(str(tmp_path), STORE)
    for separator in ("\u2028", "\u2029"):
        with pytest.raises(InvalidPath):
            cache.create(ROOT_ID, f"line{separator}break.md", 0o644)
    deep = ROOT_ID
    for _ in range(19):
        deep = cache.mkdir(deep, "d", 0o755).id
    cache.create(deep, "twentieth.md", 0o644)  # 20 segments
    with pytest.raises(NameTooLong):  # a folder of 20 names could hold no memory
        cache.mkdir(deep, "d", 0o755)
    cache.mkdir(ROOT_ID, "e", 0o755)
    with pytest.raises(NameTooLong):  # the 20-segment file would be 21 deep under /e
        cache.rename(ROOT_ID, "d", cache.find("/e").id, "d")
    cache.rename(ROOT_ID, "d", ROOT_ID, "renamed")
    assert cache.find("/renamed" + "/d" * 18 + "/twentieth.md") is not None
    cache.close()


async def test_rename_over_a_stored_file_is_one_update_of_its_memory(tmp_path):
    cache = StoreCache(str(tmp_path), STORE)
    target = remote(cache, "mem_target", "/notes.md", b"old")
    await write_file(cache, ROOT_ID, ".notes.md.swp", b"new")
    moved = cache.rename(ROOT_ID, ".notes.md.swp", ROOT_ID, "notes.md")
    assert cache.find("/notes.md") is moved
    assert moved.id != target.id
    assert (moved.memory_id, moved.base_sha) == ("mem_target", content_sha256(b"old"))
    [change] = cache.changes()
    assert (change.path, change.memory_id, change.edited) == ("/notes.md", "mem_target", True)
    assert cache.tombstones == {}
    assert [name for name, _ in cache.list_dir(ROOT_ID)] == ["notes.md"]
    cache.close()


async def test_rename_of_a_stored_file_over_another_deletes_the_mover_memory(tmp_path):
    cache = StoreCache(str(tmp_path), STORE)
    remote(cache, "mem_a", "/a.md", b"a")
    remote(cache, "mem_b", "/b.md", b"b")
    moved = cache.rename(ROOT_ID, "a.md", ROOT_ID, "b.md")
    assert moved.memory_id == "mem_b"
    assert set(cache.tombstones) == {"mem_a"}
    assert cache.tombstones["mem_a"].path == "/a.md"
    cache.close()


async def test_folder_rename_moves_everything_under_it_and_refuses_bad_moves(tmp_path):
    cache = StoreCache(str(tmp_path), STORE)
    f = remote(cache, "mem_f", "/dir/sub/f.md", b"f")
    cache.mkdir(ROOT_ID, "other", 0o755)
    cache.rename(ROOT_ID, "dir", ROOT_ID, "moved")
    assert f.path == "/moved/sub/f.md"
    assert cache.find("/dir") is None
    assert [c.path for c in cache.changes()] == ["/moved/sub/f.md"]
    with pytest.raises(InvalidMove):
        cache.rename(ROOT_ID, "moved", cache.find("/moved/sub").id, "x")
    with pytest.raises(DirectoryNotEmpty):
        cache.rename(ROOT_ID, "other", ROOT_ID, "moved")
    with pytest.raises(EntryExists):
        cache.rename(ROOT_ID, "other", ROOT_ID, "moved", noreplace=True)
    with pytest.raises(DirectoryNotEmpty):
        cache.rmdir(ROOT_ID, "moved")
    cache.close()


async def test_unlink_leaves_a_tombstone_and_recreating_the_path_adopts_it(tmp_path):
    cache = StoreCache(str(tmp_path), STORE)
    node = remote(cache, "mem_1", "/keep.md", b"v1")
    assert on_disk(cache, node.id) == b"v1"
    cache.unlink(ROOT_ID, "keep.md")
    assert cache.find("/keep.md") is None
    cache.drop_contents()  # housekeeping does this while the filesystem is idle
    assert on_disk(cache, node.id) is None
    stone = cache.tombstones["mem_1"]
    assert (stone.path, stone.base_sha) == ("/keep.md", content_sha256(b"v1"))
    again = await write_file(cache, ROOT_ID, "keep.md", b"v2")
    assert cache.tombstones == {}
    assert (again.memory_id, again.base_sha) == ("mem_1", content_sha256(b"v1"))
    [change] = cache.changes()
    assert (change.memory_id, change.edited) == ("mem_1", True)
    cache.close()


async def test_an_unlinked_open_file_stays_readable_and_writable_until_released(tmp_path):
    cache = StoreCache(str(tmp_path), STORE)
    node = remote(cache, "mem_1", "/open.md", b"still here")
    await cache.open(node.id)
    cache.unlink(ROOT_ID, "open.md")
    assert cache.read(node, 0, 100) == b"still here"
    cache.write(node, 0, b"STILL")
    assert cache.read(node, 0, 100) == b"STILL here"
    assert cache.changes() == []
    assert "mem_1" in cache.tombstones
    cache.release(node.id)
    assert node.id not in cache.nodes
    cache.drop_contents()
    assert on_disk(cache, node.id) is None
    cache.close()


async def test_an_open_file_replaced_by_a_rename_keeps_showing_what_it_held(tmp_path):
    """An editor's save over a file another program holds open, unread: that
    program still reads the content it opened, as on a local disk."""
    cache = StoreCache(str(tmp_path), STORE)
    old = remote(cache, "mem_1", "/notes.md", b"the old notes")
    await cache.open(old.id)
    await write_file(cache, ROOT_ID, ".notes.md.swp", b"the new notes")
    cache.rename(ROOT_ID, ".notes.md.swp", ROOT_ID, "notes.md")
    cache.drop_contents()
    assert cache.read(old, 0, 100) == b"the old notes"
    new = cache.lookup(ROOT_ID, "notes.md")
    await cache.open(new.id)
    assert cache.read(new, 0, 100) == b"the new notes"
    cache.release(old.id)
    cache.release(new.id)
    cache.close()


async def test_eviction_drops_clean_contents_never_dirty_or_open_ones(tmp_path):
    cache = StoreCache(str(tmp_path), STORE, budget_bytes=3000)
    dirty = await write_file(cache, ROOT_ID, "dirty.md", b"d" * 1000)
    held = remote(cache, "mem_held", "/held.md", b"h" * 1000)
    await cache.open(held.id)
    for i in range(6):
        remote(cache, f"mem_{i}", f"/clean{i}.md", bytes([65 + i]) * 1000)
    assert on_disk(cache, dirty.id) == b"d" * 1000
    assert on_disk(cache, held.id) == b"h" * 1000
    clean = [cache.find(f"/clean{i}.md") for i in range(6)]
    assert [n.cached for n in clean] == [False] * 3 + [True] * 3
    assert all(on_disk(cache, n.id) is None for n in clean[:3])
    assert cache.cached_bytes() == 5000  # the budget bounds clean contents only
    cache.release(held.id)

    async def fetch(memory_id: str) -> tuple[bytes, str]:
        assert memory_id == "mem_0"
        return b"A" * 1000, content_sha256(b"A" * 1000)

    cache.source = fetch
    await cache.open(clean[0].id)
    assert cache.read(clean[0], 0, 5) == b"AAAAA"
    cache.release(clean[0].id)
    cache.source = None
    evicted = next(n for n in clean if not n.cached)
    with pytest.raises(ContentUnavailable):
        await cache.open(evicted.id)
    cache.close()


async def test_the_file_read_last_is_evicted_last(tmp_path):
    cache = StoreCache(str(tmp_path), STORE, budget_bytes=3000)
    for i in range(3):
        remote(cache, f"mem_{i}", f"/clean{i}.md", bytes([65 + i]) * 1000)
    first = cache.find("/clean0.md")
    await cache.open(first.id)
    assert cache.read(first, 0, 3) == b"AAA"
    cache.release(first.id)
    remote(cache, "mem_3", "/clean3.md", b"D" * 1000)
    cached = {p: cache.find(p).cached for p in ("/clean0.md", "/clean1.md", "/clean2.md")}
    assert cached == {"/clean0.md": True, "/clean1.md": False, "/clean2.md": True}
    assert on_disk(cache, cache.find("/clean1.md").id) is None
    cache.close()


async def test_a_content_larger_than_the_whole_budget_is_kept_until_the_next_one(tmp_path):
    cache = StoreCache(str(tmp_path), STORE, budget_bytes=1000)
    small = remote(cache, "mem_small", "/small.md", b"s" * 500)
    big = remote(cache, "mem_big", "/big.md", b"b" * 2000, cached=False)

    async def fetch(memory_id: str) -> tuple[bytes, str]:
        assert memory_id == "mem_big"
        return b"b" * 2000, content_sha256(b"b" * 2000)

    cache.source = fetch
    await cache.open(big.id)
    assert cache.read(big, 1990, 100) == b"b" * 10
    cache.release(big.id)
    assert (small.cached, big.cached) == (False, True)
    remote(cache, "mem_next", "/next.md", b"n" * 100)
    assert not big.cached
    assert on_disk(cache, big.id) is None
    cache.close()


async def test_a_closed_file_opened_again_shows_every_change_made_meanwhile(tmp_path):
    """The contents of the files closed last are kept in memory (`--cache-memory`,
    here 1,000 bytes): a truncate, the store's new bytes of the same size, an
    eviction and a rename over the file are what the next open reads, and a
    content larger than the bound is read from its file."""
    cache = StoreCache(str(tmp_path), STORE, budget_bytes=2000, memory_bytes=1000)

    async def shown(node) -> bytes:
        await cache.open(node.id)
        try:
            return cache.read(node, 0, MAX_CONTENT_BYTES)
        finally:
            cache.release(node.id)

    mine = await write_file(cache, ROOT_ID, "mine.md", b"written here")
    cache.truncate(mine.id, 7)
    assert await shown(mine) == b"written"
    theirs = remote(cache, "mem_t", "/theirs.md", b"store one")
    assert await shown(theirs) == b"store one"
    stored = StoredMemory("mem_t", "/theirs.md", content_sha256(b"store two"), 9)
    cache.place_remote(stored, b"store two", node=theirs)
    assert await shown(theirs) == b"store two"
    big = await write_file(cache, ROOT_ID, "big.md", b"b" * 1500)
    assert await shown(big) == b"b" * 1500
    remote(cache, "mem_x", "/x.md", b"x" * 1995)  # past the budget: the oldest goes
    assert not theirs.cached

    async def fetch(memory_id: str) -> tuple[bytes, str]:
        return b"store three", content_sha256(b"store three")

    cache.source = fetch
    assert await shown(theirs) == b"store three"
    swap = await write_file(cache, ROOT_ID, ".mine.md.swp", b"saved")
    cache.rename(ROOT_ID, ".mine.md.swp", ROOT_ID, "mine.md")
    assert await shown(cache.find("/mine.md")) == b"saved"
    assert cache.find("/mine.md") is swap
    cache.close()


async def test_journal_and_contents_survive_a_kill(tmp_path):
    cache = StoreCache(str(tmp_path), STORE)
    remote(cache, "mem_gone", "/gone.md", b"bye")
    remote(cache, "mem_base", "/base.md", b"base")
    cache.unlink(ROOT_ID, "gone.md")
    node = await write_file(cache, ROOT_ID, "new.md", b"unsent")
    base = cache.find("/base.md")
    await cache.open(base.id)
    cache.write(base, 4, b"+more")
    cache.chmod(node.id, 0o600)
    new_id, base_id = node.id, base.id
    killed(cache)

    again = StoreCache(str(tmp_path), STORE)
    assert again.find("/new.md").id == new_id
    assert again.find("/base.md").id == base_id
    assert again.find("/gone.md") is None
    assert set(again.tombstones) == {"mem_gone"}
    changes = {c.path: c for c in again.changes()}
    assert set(changes) == {"/new.md", "/base.md"}
    assert changes["/base.md"].memory_id == "mem_base"
    assert changes["/base.md"].base_sha == content_sha256(b"base")
    assert all(c.edited for c in changes.values())
    assert again.read_content(again.node(new_id)) == b"unsent"
    assert again.read_content(again.node(base_id)) == b"base+more"
    assert again.node(base_id).size == 9
    assert again.node(new_id).mode == 0o600
    fresh = again.create(ROOT_ID, "fresh.md", 0o644)
    assert fresh.id > max(new_id, base_id)  # ids are never reused
    again.close()


def test_the_id_of_a_deleted_newest_file_is_not_given_again_after_a_kill(tmp_path):
    cache = StoreCache(str(tmp_path), STORE)
    names = [f"f{i}.md" for i in range(1100)]
    with cache.batch():
        ids = [cache.create(ROOT_ID, name, 0o644).id for name in names]
    cache.unlink(ROOT_ID, names[-1])
    cache.journal.abandon()
    again = StoreCache(str(tmp_path), STORE)
    assert again.find("/" + names[-2]).id == ids[-2]
    assert again.create(ROOT_ID, "fresh.md", 0o644).id > ids[-1]
    again.close()


async def test_mark_pushed_cleans_only_what_was_not_written_meanwhile(tmp_path):
    cache = StoreCache(str(tmp_path), STORE)
    node = await write_file(cache, ROOT_ID, "a.md", b"one")
    [change] = cache.changes()
    await cache.open(node.id)
    cache.write(node, 3, b" two")
    cache.mark_pushed(change, memory_id="mem_a", sha=content_sha256(b"one"), path="/a.md")
    assert node.edited and node.memory_id == "mem_a"
    [change] = cache.changes()
    cache.mark_pushed(change, memory_id="mem_a", sha=content_sha256(b"one two"), path="/a.md")
    assert not node.edited and cache.changes() == []
    cache.release(node.id)
    cache.close()


def left_by_a_kill(cache: StoreCache, where: Path) -> StoreCache:
    """The cache a SIGKILL would leave now, opened from a copy of its folder: the
    files as they stand, without the checkpoint that closing the journal runs."""
    image = where / cache.store_id
    shutil.copytree(cache.dir, image, ignore=shutil.ignore_patterns("*-shm"))
    return StoreCache(str(where), cache.store_id)


def flushes_of(monkeypatch, call):
    """The files `call()` flushed (fsync or fdatasync), by path."""
    flushed: list[str] = []

    def spy(real):
        def flush(fd: int) -> None:
            flushed.append(os.readlink(f"/proc/self/fd/{fd}"))
            real(fd)

        return flush

    with monkeypatch.context() as m:
        m.setattr(os, "fsync", spy(os.fsync))
        m.setattr(os, "fdatasync", spy(os.fdatasync))
        call()
    return flushed


async def test_fsync_is_one_durable_commit_of_the_content(tmp_path, monkeypatch):
    """One flush per fsync: the content goes into the journal in one commit,
    and memfs flushes the WAL once, no content file or folder. What it made
    durable is all there after a kill, sizes and times included (the row's
    follow from the content)."""
    cache = StoreCache(str(tmp_path / "live"), STORE)
    node = remote(cache, "mem_1", "/a.md", b"a")
    await cache.open(node.id)
    cache.write(node, 1, b" and more")
    cache.write(node, 0, b"A")
    statements: list[str] = []
    cache.journal.db.set_trace_callback(statements.append)
    flushed = flushes_of(monkeypatch, lambda: cache.fsync(node))
    cache.journal.db.set_trace_callback(None)
    assert [os.path.basename(f) for f in flushed] == ["journal.sqlite3-wal"]
    assert len(statements) == 1 and statements[0].startswith("INSERT OR REPLACE INTO durable")
    durable = cache.journal.db.execute("SELECT node_id, content FROM durable").fetchall()
    assert durable == [(node.id, b"A and more")]
    assert flushes_of(monkeypatch, lambda: cache.fsync(node)) == []  # nothing new

    image = left_by_a_kill(cache, tmp_path / "image")
    back = image.find("/a.md")
    assert image.read_content(back) == b"A and more"
    assert (back.size, back.mtime_ns) == (node.size, node.mtime_ns)
    [change] = image.changes()
    assert (change.path, change.memory_id, change.edited) == ("/a.md", "mem_1", True)
    assert image.journal.db.execute("SELECT count(*) FROM durable").fetchone() == (0,)
    image.close()
    cache.release(node.id)
    cache.close()


def test_a_second_opener_of_the_same_cache_is_refused_until_the_first_closes(tmp_path):
    """The journal is locked exclusively: one process per store and cache.
    (Another process meets the same lock; tests/mount/test_cli_mount.py mounts twice.)"""
    cache = StoreCache(str(tmp_path), STORE)
    with pytest.raises(CacheInUse) as caught:
        StoreCache(str(tmp_path), STORE)
    assert str(caught.value) == (
        f"the cache at {tmp_path / STORE} is in use by another memfs process of store {STORE}"
    )
    cache.close()
    StoreCache(str(tmp_path), STORE).close()


async def test_reads_never_write_the_journal_and_writes_commit_only_their_content(tmp_path):
    cache = StoreCache(str(tmp_path), STORE)
    node = remote(cache, "mem_1", "/a.md", b"text")
    before = cache.journal.committed
    for _ in range(3):
        await cache.open(node.id)
        assert cache.read(node, 0, 10) == b"text"
        cache.release(node.id)
    assert cache.journal.committed == before
    await cache.open(node.id)
    for i in range(50):
        cache.write(node, i, b"w")
    # The writes' bytes go to the content file (the truth for size and times): the
    # one commit is the flip to edited, before the first one's bytes (a kill never
    # leaves changed bytes the journal calls clean).
    assert cache.journal.committed == before + 1
    cache.release(node.id)
    assert cache.journal.committed == before + 1  # closing saves nothing more
    cache.truncate(node.id, 3)
    mtime = node.mtime_ns
    killed(cache)

    again = StoreCache(str(tmp_path), STORE)
    assert (again.find("/a.md").size, again.find("/a.md").mtime_ns) == (3, mtime)
    again.close()


async def test_an_editor_s_save_leaves_one_content_behind(tmp_path):
    cache = StoreCache(str(tmp_path), STORE)
    old = await write_file(cache, ROOT_ID, "old.md", b"private words" * 50)
    saved = await write_file(cache, ROOT_ID, ".old.md.swp", b"saved")
    cache.rename(ROOT_ID, ".old.md.swp", ROOT_ID, "old.md")
    assert on_disk(cache, old.id) is None  # its file goes once that is applied, or at the next open
    killed(cache)
    again = StoreCache(str(tmp_path), STORE)
    assert content_sizes(again) == {saved.id: 5}
    assert again.read_content(again.find("/old.md")) == b"saved"
    again.close()


async def test_many_files_written_while_busy_hold_few_descriptors(tmp_path):
    """Content files written while the filesystem is busy stay changed, not
    open: the store process never runs out of descriptors, and the pass while
    idle makes every one of them durable."""
    from memfs.cache._files import MOST_OPEN

    cache = StoreCache(str(tmp_path), STORE)
    before = len(os.listdir("/proc/self/fd"))
    for i in range(3 * MOST_OPEN):
        await write_file(cache, ROOT_ID, f"f{i}.md", f"file {i}".encode())
    assert len(os.listdir("/proc/self/fd")) - before <= MOST_OPEN
    cache.drop_contents()
    killed(cache)
    again = StoreCache(str(tmp_path), STORE)
    assert {n.path: again.read_content(n) for n in again.files()} == {
        f"/f{i}.md": f"file {i}".encode() for i in range(3 * MOST_OPEN)
    }
    again.close()


async def test_a_delete_is_one_change_of_the_file_row_and_outlives_a_kill(tmp_path):
    """Deleting a stored file changes one row, the file's own, which becomes its
    pending delete: after a kill the file is gone and its delete still pending;
    once the delete is settled, the row goes."""
    cache = StoreCache(str(tmp_path / "live"), STORE)
    remote(cache, "mem_1", "/a.md", b"a")
    remote(cache, "mem_2", "/b.md", b"b")
    statements: list[str] = []
    cache.journal.db.set_trace_callback(statements.append)
    cache.unlink(ROOT_ID, "a.md")
    cache.journal.db.set_trace_callback(None)
    changes = [s for s in statements if s not in ("BEGIN", "COMMIT")]
    assert len(changes) == 1 and "INTO nodes" in changes[0]

    image = left_by_a_kill(cache, tmp_path / "image")
    assert [name for name, _ in image.list_dir(ROOT_ID)] == ["b.md"]
    stone = image.tombstones["mem_1"]
    assert (stone.path, stone.base_sha) == ("/a.md", content_sha256(b"a"))
    image.tombstone_done("mem_1")
    assert image.tombstones == {} and list(image.journal.tombstones()) == []
    assert image.journal.db.execute("SELECT count(*) FROM nodes").fetchone() == (2,)
    image.close()
    cache.close()
