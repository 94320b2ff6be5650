"""The journal's promises at the cache's face: what a kill leaves opens
without loss, what `fsync` made durable comes back even when the content
file lost it, damage is refused with one sentence, and a full disk is
reported, never silently dropped.

A kill is `Journal.abandon` on a copy of the cache folder (nothing saved,
flushed or checkpointed); a power cut that lost a content file's page cache
is a content file cut or changed by hand after the kill.
"""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from memfs._exceptions import CacheCorrupt, CacheDiskFull
from memfs.api import content_sha256
from memfs.cache import ROOT_ID, StoreCache, StoredMemory
from tests.support.invariants import invariant_problems

STORE = "memstore_durable"


async def new_file(cache: StoreCache, name: str, content: bytes, parent: int = ROOT_ID):
    node = cache.create(parent, name, 0o644)
    await cache.open(node.id, writable=True)
    cache.write(node, 0, content)
    cache.release(node.id, writable=True)
    return node


def killed_copy(cache: StoreCache, where: Path) -> StoreCache:
    """The cache a SIGKILL would leave now, opened from a copy of its folder."""
    shutil.copytree(cache.dir, where / cache.store_id, ignore=shutil.ignore_patterns("*-shm"))
    cache.journal.abandon()
    return StoreCache(str(where), cache.store_id)


def contents(cache: StoreCache) -> dict[str, bytes]:
    return {n.path: cache.read_content(n) for n in cache.files()}


def content_file(cache_folder: Path, node_id: int) -> Path:
    return cache_folder / "files" / str(node_id)


# ---- a kill ---------------------------------------------------------------------


async def test_every_change_is_there_after_a_kill(tmp_path):
    """Folders, files, renames, deletes and writes, killed before anything was
    saved while idle: all of it is there, and new ids follow the old ones."""
    cache = StoreCache(str(tmp_path / "live"), STORE)
    docs = cache.mkdir(ROOT_ID, "docs", 0o755)
    a = await new_file(cache, "a.md", b"first", docs.id)
    await new_file(cache, "b.md", b"second")
    cache.rename(docs.id, "a.md", ROOT_ID, "moved.md")
    cache.unlink(ROOT_ID, "b.md")
    cache.mkdir(ROOT_ID, "gone", 0o755)
    cache.rmdir(ROOT_ID, "gone")

    again = killed_copy(cache, tmp_path / "after")
    assert contents(again) == {"/moved.md": b"first"}
    assert sorted(name for name, _ in again.list_dir(ROOT_ID)) == ["docs", "moved.md"]
    assert again.find("/moved.md").id == a.id
    assert [c.path for c in again.changes()] == ["/moved.md"]
    assert invariant_problems(again) == []
    assert (await new_file(again, "c.md", b"c")).id > a.id
    again.close()


async def test_a_kill_before_the_rows_of_writes_are_saved_keeps_sizes_and_times(tmp_path):
    """A file's size and time after its writes are saved while the filesystem
    is idle; killed before that, the content file says them."""
    cache = StoreCache(str(tmp_path / "live"), STORE)
    node = await new_file(cache, "a.md", b"short")
    await cache.open(node.id, writable=True)
    cache.write(node, 5, b", then longer")
    mtime = node.mtime_ns
    again = killed_copy(cache, tmp_path / "after")
    back = again.find("/a.md")
    assert again.read_content(back) == b"short, then longer"
    assert (back.size, back.mtime_ns) == (18, mtime)
    again.close()


# ---- fsync and the durable copy -------------------------------------------------


async def test_an_fsync_d_content_comes_back_when_its_content_file_lost_it(tmp_path):
    """After fsync, the content file cut short and changed by hand (what a power
    cut that lost its page cache leaves): the next open writes back the bytes
    fsync made durable, size and time included, and keeps no copy after."""
    cache = StoreCache(str(tmp_path / "live"), STORE)
    node = cache.create(ROOT_ID, "saved.md", 0o644)
    await cache.open(node.id, writable=True)
    cache.write(node, 0, b"made durable by fsync")
    cache.fsync(node)
    mtime = node.mtime_ns
    where = tmp_path / "after"
    shutil.copytree(cache.dir, where / STORE, ignore=shutil.ignore_patterns("*-shm"))
    cache.journal.abandon()
    lost = content_file(where / STORE, node.id)
    lost.write_bytes(b"made dur")
    again = StoreCache(str(where), STORE)
    back = again.find("/saved.md")
    assert again.read_content(back) == b"made durable by fsync"
    assert (back.size, back.mtime_ns) == (21, mtime)
    assert again.journal.db.execute("SELECT count(*) FROM durable").fetchone() == (0,)
    again.close()

    lost.unlink()  # the new file's name lost too
    shutil.rmtree(where)
    shutil.copytree(tmp_path / "live", where, ignore=shutil.ignore_patterns("*-shm"))
    content_file(where / STORE, node.id).unlink()
    again = StoreCache(str(where), STORE)
    assert contents(again) == {"/saved.md": b"made durable by fsync"}
    again.close()


async def test_a_pulled_content_a_power_cut_took_is_fetched_again(tmp_path):
    """A pass placed the store's versions (a changed file, a new one), then a
    power cut kept the journal's rows, which say both are cached and agree with
    the store, but not the content files' pages: the next open finds that
    their bytes are not the base's and fetches them again, so a read shows the
    store's version, never the old bytes or none (an edit would push those over
    the store's version)."""
    cache = StoreCache(str(tmp_path / "live"), STORE)
    old, new = b"old", b"the store's newer version"
    cache.place_remote(StoredMemory("mem_1", "/a.md", content_sha256(old), 3), old)
    a = cache.find("/a.md")
    cache.place_remote(StoredMemory("mem_1", "/a.md", content_sha256(new), len(new)), new, node=a)
    cache.place_remote(StoredMemory("mem_2", "/b.md", content_sha256(new), len(new)), new)
    b = cache.find("/b.md")
    where = tmp_path / "after"
    shutil.copytree(cache.dir, where / STORE, ignore=shutil.ignore_patterns("*-shm"))
    cache.journal.abandon()
    content_file(where / STORE, a.id).write_bytes(old)
    content_file(where / STORE, b.id).write_bytes(b"")
    again = StoreCache(str(where), STORE)
    fetched: list[str] = []

    async def store(memory_id: str) -> tuple[bytes, str]:
        fetched.append(memory_id)
        return new, content_sha256(new)

    again.source = store
    for path in ("/a.md", "/b.md"):
        node = again.find(path)
        assert (node.cached, node.size) == (False, len(new))
        await again.open(node.id)
        assert again.read(node, 0, 100) == new
        again.release(node.id)
    assert fetched == ["mem_1", "mem_2"]
    again.close()


async def test_a_write_after_fsync_survives_a_kill_and_is_not_rolled_back(tmp_path):
    """A write after fsync, not fsync'd itself: the durable copy goes before its
    bytes are written, so a kill leaves the later write, not the fsync'd one,
    and the file's size too (the content is the truth for it)."""
    cache = StoreCache(str(tmp_path / "live"), STORE)
    node = cache.create(ROOT_ID, "notes.md", 0o644)
    await cache.open(node.id, writable=True)
    cache.write(node, 0, b"fsync'd")
    cache.fsync(node)
    cache.write(node, 7, b", then written")
    cache.truncate(node.id, 16)
    again = killed_copy(cache, tmp_path / "after")
    assert contents(again) == {"/notes.md": b"fsync'd, then wr"}
    back = again.find("/notes.md")
    assert back.size == 16 and back.edited
    again.close()


async def test_the_durable_copy_goes_while_idle_and_at_close(tmp_path):
    """The copies fsync made go once their content files are flushed (while
    idle, at close); a file removed leaves its copy to that pass, and a kill
    before it does not bring the file back."""
    cache = StoreCache(str(tmp_path / "live"), STORE)
    kept = await new_file(cache, "kept.md", b"kept")
    gone = await new_file(cache, "gone.md", b"gone")
    for node in (kept, gone):
        await cache.open(node.id)
        cache.fsync(node)
        cache.release(node.id)
    count = "SELECT count(*) FROM durable"
    assert cache.journal.db.execute(count).fetchone() == (2,)
    cache.unlink(ROOT_ID, "gone.md")
    killed = killed_copy(cache, tmp_path / "killed")
    assert contents(killed) == {"/kept.md": b"kept"}
    assert killed.journal.db.execute(count).fetchone() == (0,)
    killed.close()
    cache = StoreCache(str(tmp_path / "live"), STORE)
    kept = cache.find("/kept.md")
    cache.drop_contents()  # what housekeeping does while the filesystem is idle
    assert cache.journal.db.execute(count).fetchone() == (0,)
    await cache.open(kept.id)
    cache.fsync(kept)
    cache.release(kept.id)
    cache.close()
    again = StoreCache(str(tmp_path / "live"), STORE)
    assert again.journal.db.execute(count).fetchone() == (0,)
    assert contents(again) == {"/kept.md": b"kept"}
    again.close()


async def test_fsync_of_an_unchanged_file_commits_nothing_more(tmp_path):
    cache = StoreCache(str(tmp_path), STORE)
    node = await new_file(cache, "a.md", b"a")
    await cache.open(node.id)
    cache.fsync(node)
    committed = cache.journal.committed
    cache.fsync(node)
    assert cache.journal.committed == committed
    cache.release(node.id)
    cache.close()


async def test_fsync_of_no_file_makes_every_content_durable(tmp_path, monkeypatch):
    """`fsync(None)` flushes the content files changed and the WAL."""
    cache = StoreCache(str(tmp_path), STORE)
    node = await new_file(cache, "a.md", b"a")
    flushed: list[int] = []
    real = os.fdatasync

    def spy(fd):
        flushed.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", spy)
    cache.fsync(None)
    monkeypatch.undo()
    assert len(flushed) == 2  # the content file, then the WAL
    assert cache.read_content(node) == b"a"
    cache.close()


# ---- damage ---------------------------------------------------------------------


async def test_a_damaged_journal_is_refused_with_one_sentence(tmp_path):
    cache = StoreCache(str(tmp_path / "live"), STORE)
    await new_file(cache, "a.md", b"a")
    cache.close()
    journal = tmp_path / "live" / STORE / "journal.sqlite3"
    journal.write_bytes(b"not a database at all" * 300)
    with pytest.raises(CacheCorrupt) as caught:
        StoreCache(str(tmp_path / "live"), STORE)
    assert str(caught.value) == (
        f"cannot open the cache at {tmp_path / 'live' / STORE}: file is not a database"
    )


async def test_a_content_file_gone_reads_as_empty_and_one_left_over_goes(tmp_path):
    """A cached file whose content file went reads as empty; a content file no
    file owns is taken away at open."""
    cache = StoreCache(str(tmp_path), STORE)
    node = await new_file(cache, "a.md", b"content")
    cache.close()
    folder = Path(tmp_path) / STORE
    content_file(folder, node.id).unlink()
    content_file(folder, 9999).write_bytes(b"no file owns it")
    again = StoreCache(str(tmp_path), STORE)
    assert contents(again) == {"/a.md": b""}
    assert not content_file(folder, 9999).exists()
    assert invariant_problems(again) == []
    again.close()


# ---- a full disk ----------------------------------------------------------------


class _FullDisk:
    """The journal's connection, whose disk is full for the statements `full` picks."""

    def __init__(self, db, full):
        self._db, self._full = db, full

    def execute(self, sql, params=()):
        if self._full(sql):
            e = sqlite3.OperationalError("database or disk is full")
            e.sqlite_errorcode = sqlite3.SQLITE_FULL
            raise e
        return self._db.execute(sql, params)

    def __getattr__(self, name):
        return getattr(self._db, name)


async def test_a_batch_that_fills_the_disk_keeps_what_ran_and_says_so(
    tmp_path, monkeypatch, expect_log
):
    """The disk fills inside a batch (the pass before mounting): the change that
    met it is refused (CacheDiskFull), what ran before it is committed, the
    full disk is said once, and a kill after loses none of what was taken."""
    expect_log("memfs.cache", "is full: changes to the files are refused", count=1)
    cache = StoreCache(str(tmp_path / "live"), STORE)
    kept = await new_file(cache, "kept.md", b"before the batch")
    real = cache.journal.db
    monkeypatch.setattr(
        cache.journal, "db", _FullDisk(real, lambda sql: sql.startswith("INSERT INTO nodes"))
    )
    with pytest.raises(CacheDiskFull), cache.batch():
        cache.rename(ROOT_ID, "kept.md", ROOT_ID, "moved.md")
        cache.create(ROOT_ID, "a.md", 0o644)
    assert cache.disk_full
    assert {n.path for n in cache.files()} == {"/moved.md"}
    monkeypatch.setattr(cache.journal, "db", real)

    again = killed_copy(cache, tmp_path / "after")
    assert contents(again) == {"/moved.md": b"before the batch"}
    assert again.find("/moved.md").id == kept.id
    assert not again.disk_full
    again.close()


async def test_a_full_disk_is_refused_then_taken_again_once_there_is_room(
    tmp_path, monkeypatch, expect_log, caplog
):
    """A write whose content file meets a full disk is refused, the file keeps
    what it had, reads go on; once the disk has room the idle pass takes
    changes again, and says so."""
    expect_log("memfs.cache", "is full: changes to the files are refused", count=1)
    caplog.set_level(logging.INFO, "memfs.cache")
    cache = StoreCache(str(tmp_path), STORE)
    node = await new_file(cache, "a.md", b"kept")
    await cache.open(node.id, writable=True)

    def disk_full(fd, buffers, offset):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "pwritev", disk_full)
    with pytest.raises(CacheDiskFull):
        cache.write(node, 4, b" and lost")
    monkeypatch.undo()
    assert cache.disk_full and cache.read(node, 0, 100) == b"kept"
    assert cache.journal.content(node.id) == b"kept"
    assert not (Path(cache.dir) / "room").exists()  # given back to the sync
    cache.drop_contents()  # the idle pass finds room
    assert not cache.disk_full and (Path(cache.dir) / "room").exists()
    assert "has room again: changes are taken again" in caplog.text
    cache.write(node, 4, b", then more")
    cache.release(node.id, writable=True)
    assert contents(cache) == {"/a.md": b"kept, then more"}
    cache.close()
