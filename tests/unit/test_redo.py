"""The journal's redo log: what a kill leaves in it is read back, and nothing else.

First the log on its own (records, torn ones, foreign and stale ones), then a
store's cache over it, killed (`Journal.abandon`: no apply, flush or checkpoint)
at the moments that matter: records not applied yet, an apply that did not
commit, an apply that committed before the log started again, a log that filled
up inside a request.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from memfs.cache import ROOT_ID, StoreCache, _journal, invariant_problems
from memfs.cache._records import APPLY, CONTENT_OPS, Op
from memfs.cache._redo import HEADER, RedoLog
from tests.support.redo import record_with

STORE = "memstore_redo"
LOG_ID = b"\x01" * 8


def log_at(tmp_path: Path, log_id: bytes = LOG_ID) -> RedoLog:
    return RedoLog(str(tmp_path / "log"), log_id)


def append(log: RedoLog, seq: int, ops: list, contents: list[bytes]) -> None:
    return log.append(seq, ops, contents, sum(map(len, contents)))


def test_records_read_back_in_order_with_their_contents(tmp_path):
    log = log_at(tmp_path)
    append(log, 1, [("m", "k", "v"), ("c", 20, 5)], [b"hello"])
    append(log, 2, [("d", 20), ("c", 21, 0), ("P", 22, 1, 4, 3)], [b"", b"abc"])
    log.close()

    again = log_at(tmp_path)
    assert list(again.records(0)) == [
        (1, [("m", "k", "v"), ("c", 20, b"hello")]),
        (2, [("d", 20), ("c", 21, b""), ("P", 22, 1, 4, b"abc")]),
    ]
    # A log whose first record is applied already has nothing left to apply: an
    # apply takes every record there is.
    assert list(again.records(1)) == []
    again.close()


def test_a_torn_record_ends_the_log(tmp_path):
    log = log_at(tmp_path)
    append(log, 1, [("c", 20, 5)], [b"whole"])
    torn_at = log.offset
    append(log, 2, [("c", 21, 4)], [b"torn"])
    append(log, 3, [("c", 22, 5)], [b"after"])
    os.pwrite(log.fd, b"\xff", torn_at + HEADER.size + 2)  # a byte the kill never wrote
    assert [seq for seq, _ in log.records(0)] == [1]
    log.close()


def test_records_of_another_log_or_out_of_sequence_are_not_read(tmp_path):
    log = log_at(tmp_path)
    append(log, 1, [("d", 20)], [])
    append(log, 3, [("d", 21)], [])
    assert [seq for seq, _ in log.records(0)] == [1]
    log.close()
    other = log_at(tmp_path, b"\x02" * 8)
    assert list(other.records(0)) == []
    other.close()


def test_after_a_restart_the_old_records_are_never_read_again(tmp_path):
    log = log_at(tmp_path)
    for seq in (1, 2, 3):
        append(log, seq, [("c", 20 + seq, 100)], [bytes(100)])
    log.restart()
    append(log, 4, [("d", 9)], [])  # shorter: the old records' bytes follow it
    assert list(log.records(3)) == [(4, [("d", 9)])]
    assert list(log.records(4)) == []
    log.close()


def test_a_record_holds_its_operations_as_json_after_its_format_number(tmp_path):
    """The documented format 2 (memfs/cache/_records.py): the operations part is
    one byte, 2, then compact JSON, a content operation holding the length of
    the content that follows; never `marshal`."""
    log = log_at(tmp_path)
    ops = [("m", "k", "v\u00e9"), ("t", "mem_1", "/a.md", "sha", 1.25), ("c", 20, 5), ("X", [3, 4])]
    append(log, 1, ops, [b"hello"])
    head = os.pread(log.fd, HEADER.size, 0)
    _, seq, ops_size, contents_size, _ = HEADER.unpack(head)
    part = os.pread(log.fd, ops_size + contents_size, HEADER.size)
    assert (seq, part[0], part[ops_size:]) == (1, 2, b"hello")
    text = part[1:ops_size].decode("ascii")
    assert json.loads(text) == [list(op) for op in ops[:3]] + [["X", [3, 4]]]
    assert " " not in text
    log.close()


def test_each_operation_has_one_statement_and_an_unknown_one_is_no_record(tmp_path):
    """The log's operations are one enum with one apply table: every code but
    those of the content files has its statement, and a record holding a
    code memfs does not know is not read back (nothing would apply it)."""
    assert set(APPLY) == set(Op) - set(CONTENT_OPS)
    assert len({op.value for op in Op}) == len(Op)
    log = log_at(tmp_path)
    append(log, 1, [("m", "k", "v")], [])
    append(log, 2, [("m", "k", "w"), ("Z", 1)], [])
    assert list(log.records(0)) == [(1, [(Op.SET_META, "k", "v")])]
    log.close()


# ---- a cache over the log, killed ---------------------------------------------


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


async def test_a_write_s_record_holds_only_the_bytes_it_wrote(tmp_path):
    """Appending 1 KiB to a file of 100 KB logs that KiB, not the file: a write
    costs what it writes (issue 29), and a kill still loses none of it."""
    cache = StoreCache(str(tmp_path / "live"), STORE)
    node = await new_file(cache, "notes.md", b"x" * 100_000)
    await cache.open(node.id, writable=True)
    line = b"y" * 1023 + b"\n"
    cache.write(node, 100_000, line)
    record = record_with(Path(cache.dir), line)
    assert record is not None and record.contents == line
    again = killed_copy(cache, tmp_path / "after")
    assert contents(again) == {"/notes.md": b"x" * 100_000 + line}
    again.close()


async def test_changes_not_applied_yet_are_there_after_a_kill(tmp_path):
    cache = StoreCache(str(tmp_path / "live"), STORE)
    docs = cache.mkdir(ROOT_ID, "docs", 0o755)
    a = await new_file(cache, "a.md", b"first", docs.id)
    await new_file(cache, "b.md", b"second")
    cache.rename(docs.id, "a.md", ROOT_ID, "moved.md")
    cache.unlink(ROOT_ID, "b.md")
    assert cache.journal.db.execute("SELECT count(*) FROM nodes").fetchone() == (1,)  # the root

    again = killed_copy(cache, tmp_path / "after")
    assert contents(again) == {"/moved.md": b"first"}
    assert again.find("/moved.md").id == a.id
    assert [c.path for c in again.changes()] == ["/moved.md"]
    assert invariant_problems(again) == []
    # New ids follow the ones the log gave out, even those SQLite never saw.
    assert (await new_file(again, "c.md", b"c")).id > a.id + 1
    again.close()


async def test_an_apply_that_did_not_commit_is_applied_at_the_next_open(tmp_path, monkeypatch):
    cache = StoreCache(str(tmp_path / "live"), STORE)
    for i in range(5):
        await new_file(cache, f"f{i}.md", f"content {i}".encode())
    done = 0
    real_run = cache.journal._database.run

    def dies_halfway(op):
        nonlocal done
        if done == 4:
            raise KeyboardInterrupt  # the kill, in the middle of the transaction
        done += 1
        real_run(op)

    monkeypatch.setattr(cache.journal._database, "run", dies_halfway)
    with pytest.raises(KeyboardInterrupt):
        cache.journal.apply_log()
    monkeypatch.undo()

    again = killed_copy(cache, tmp_path / "after")
    assert contents(again) == {f"/f{i}.md": f"content {i}".encode() for i in range(5)}
    assert invariant_problems(again) == []
    again.close()


async def test_an_applied_log_is_never_applied_twice(tmp_path):
    """Killed after an apply committed: the records still in the log are skipped
    (an insert applied twice would fail), and the changes after it are there."""
    cache = StoreCache(str(tmp_path / "live"), STORE)
    await new_file(cache, "applied.md", b"in SQLite")
    cache.journal.apply_log()
    await new_file(cache, "logged.md", b"in the log only")

    again = killed_copy(cache, tmp_path / "after")
    assert contents(again) == {"/applied.md": b"in SQLite", "/logged.md": b"in the log only"}
    again.close()
    # And once more: reopened and killed again before anything new was written.
    once_more = StoreCache(str(tmp_path / "after"), STORE)
    twice = killed_copy(once_more, tmp_path / "twice")
    assert contents(twice) == {"/applied.md": b"in SQLite", "/logged.md": b"in the log only"}
    twice.close()


async def test_a_full_log_is_applied_inside_the_request_and_starts_again(tmp_path, monkeypatch):
    monkeypatch.setattr(_journal, "CAPACITY", 64 * 1024)
    cache = StoreCache(str(tmp_path / "live"), STORE)
    written = {}
    for i in range(40):
        content = bytes([65 + i % 26]) * 3000
        await new_file(cache, f"f{i:02}.md", content)
        written[f"/f{i:02}.md"] = content
    assert cache.journal.db.execute("SELECT count(*) FROM nodes").fetchone()[0] > 1
    assert cache.journal._log.offset < 64 * 1024
    assert contents(cache) == written

    again = killed_copy(cache, tmp_path / "after")
    assert contents(again) == written
    assert invariant_problems(again) == []
    again.close()


async def test_a_journal_made_again_beside_an_old_log_ignores_it(tmp_path):
    cache = StoreCache(str(tmp_path), STORE)
    await new_file(cache, "old.md", b"of the journal that was removed")
    cache.journal.abandon()
    folder = Path(cache.dir)
    for name in ("journal.sqlite3", "journal.sqlite3-wal"):
        (folder / name).unlink(missing_ok=True)

    fresh = StoreCache(str(tmp_path), STORE)
    assert contents(fresh) == {}
    await new_file(fresh, "new.md", b"new")
    fresh.close()
    reopened = StoreCache(str(tmp_path), STORE)
    assert contents(reopened) == {"/new.md": b"new"}
    reopened.close()


async def test_fsync_after_an_apply_flushes_nothing_more(tmp_path, monkeypatch):
    """What an apply wrote to SQLite is flushed before the log starts again, so
    an fsync right after finds nothing left to flush."""
    cache = StoreCache(str(tmp_path), STORE)
    node = await new_file(cache, "a.md", b"a")
    cache.journal.apply_log()
    flushed: list[int] = []
    monkeypatch.setattr(os, "fdatasync", flushed.append)
    cache.fsync(node)
    assert flushed == []
    monkeypatch.undo()
    cache.close()


# ---- damage: told from the end a kill leaves ------------------------------------


def record_of(cache_dir: str, content: bytes) -> tuple[int, int]:
    record = record_with(Path(cache_dir), content)
    assert record is not None, f"no record carries {content!r}"
    return record.at, record.length


async def three_files_killed(tmp_path: Path) -> Path:
    """A cache whose log holds the creation and the content of three files, as a
    SIGKILL left it (a copy of its folder; the live one is abandoned)."""
    cache = StoreCache(str(tmp_path / "live"), STORE)
    await new_file(cache, "kept.md", b"applied before the kill")
    cache.journal.apply_log()
    for name in ("a.md", "b.md", "c.md"):
        await new_file(cache, name, f"content of {name}".encode())
    where = tmp_path / "killed"
    shutil.copytree(cache.dir, where / STORE)
    cache.journal.abandon()
    return where


async def test_a_record_that_fails_its_check_with_later_ones_after_it_is_damage(
    tmp_path, expect_log
):
    where = await three_files_killed(tmp_path)
    folder = str(where / STORE)
    at, length = record_of(folder, b"content of b.md")
    with open(os.path.join(folder, "journal.sqlite3-redo"), "r+b") as f:
        f.seek(at + length - 3)
        f.write(b"XYZ")
    expect_log("memfs.cache", "is damaged (record", count=1)
    again = StoreCache(str(where), STORE)
    assert again.journal.lost_paths == ["/b.md", "/c.md"]
    assert "the changes it held to /b.md, /c.md are lost" in (again.journal.damage or "")
    assert contents(again) == {
        "/kept.md": b"applied before the kill",
        "/a.md": b"content of a.md",
        "/b.md": b"",
    }
    assert invariant_problems(again) == []
    await new_file(again, "d.md", b"after the damage")
    killed = killed_copy(again, tmp_path / "after")
    # The log starts again under a new id: what is left of the old one is never read.
    assert killed.journal.damage is None
    assert contents(killed)["/d.md"] == b"after the damage"
    killed.close()


async def test_a_log_cut_short_in_a_record_is_damage(tmp_path, expect_log):
    cache = StoreCache(str(tmp_path / "live"), STORE)
    cache.journal._log._filler.join()
    cache.journal.note_log_filled()
    await new_file(cache, "kept.md", b"applied before the kill")
    cache.journal.apply_log()
    for name in ("a.md", "b.md"):
        await new_file(cache, name, f"content of {name}".encode())
    where = tmp_path / "killed"
    shutil.copytree(cache.dir, where / STORE)
    cache.journal.abandon()
    folder = str(where / STORE)
    at, length = record_of(folder, b"content of b.md")
    os.truncate(os.path.join(folder, "journal.sqlite3-redo"), at + length - 4)
    expect_log("memfs.cache", "is damaged (the file is cut short", count=1)
    again = StoreCache(str(where), STORE)
    assert again.journal.lost_paths == ["/b.md"]
    assert contents(again) == {
        "/kept.md": b"applied before the kill",
        "/a.md": b"content of a.md",
        "/b.md": b"",
    }
    again.close()


async def test_a_missing_log_is_damage(tmp_path, expect_log):
    where = await three_files_killed(tmp_path)
    os.unlink(where / STORE / "journal.sqlite3-redo")
    expect_log("memfs.cache", "is damaged (the file is missing)", count=1)
    again = StoreCache(str(where), STORE)
    assert "may be lost" in (again.journal.damage or "")
    assert contents(again) == {"/kept.md": b"applied before the kill"}
    again.close()


@pytest.mark.parametrize("torn_at", [1, HEADER.size - 1, HEADER.size + 3, -1])
async def test_the_record_a_kill_interrupted_is_no_damage(tmp_path, torn_at):
    """A kill in the middle of a record's write leaves its first bytes (and what
    was there before after them): the end of the log, without a word (this tier
    fails on any warning)."""
    where = await three_files_killed(tmp_path)
    folder = str(where / STORE)
    at, length = record_of(folder, b"content of c.md")
    with open(os.path.join(folder, "journal.sqlite3-redo"), "r+b") as f:
        f.seek(at + (torn_at if torn_at > 0 else length - 1))
        f.write(bytes(length))  # zeros, as the preallocated space held
    again = StoreCache(str(where), STORE)
    assert again.journal.damage is None
    assert set(contents(again)) == {"/kept.md", "/a.md", "/b.md", "/c.md"}
    again.close()


# ---- a full disk: what SQLite cannot take stays in the log ---------------------------


class _FullDisk:
    """The journal's connection, whose disk is full for the statements `full` picks."""

    def __init__(self, db, full):
        self._db, self._full = db, full

    def execute(self, sql, params=()):
        if self._full(sql):
            import sqlite3

            e = sqlite3.OperationalError("database or disk is full")
            e.sqlite_errorcode = sqlite3.SQLITE_FULL
            raise e
        return self._db.execute(sql, params)

    def __getattr__(self, name):
        return getattr(self._db, name)


async def test_a_batch_that_fills_the_disk_goes_on_in_the_log(tmp_path, monkeypatch, expect_log):
    """The disk fills inside a batch (the pass before mounting): what SQLite
    took goes back, and the whole batch is one record of the log, read back
    after a kill like any other."""
    expect_log("memfs.cache", "is full: changes to the files are refused", count=1)
    cache = StoreCache(str(tmp_path / "live"), STORE)
    kept = await new_file(cache, "kept.md", b"before the batch")
    database = cache.journal._database
    monkeypatch.setattr(
        database, "db", _FullDisk(database.db, lambda sql: sql.startswith("INSERT INTO nodes"))
    )
    with cache.batch():
        a = cache.create(ROOT_ID, "a.md", 0o644)
        cache.contents.put(a, b"content of a")
        cache.rename(ROOT_ID, "kept.md", ROOT_ID, "moved.md")
    assert cache.disk_full
    assert cache.journal.content(a.id) == b"content of a"
    assert {n.path for n in cache.files()} == {"/a.md", "/moved.md"}
    monkeypatch.undo()

    again = killed_copy(cache, tmp_path / "after")
    assert contents(again) == {"/a.md": b"content of a", "/moved.md": b"before the batch"}
    assert again.find("/moved.md").id == kept.id
    assert not again.disk_full
    again.close()


async def test_a_cache_whose_disk_is_full_opens_from_its_log(tmp_path, monkeypatch, expect_log):
    """Killed with records SQLite cannot take: the cache opens with them in the
    log, answers from it (contents, the tree, new ids after the log's), adds to
    it, and applies it all once the disk has room."""
    expect_log("memfs.cache", "is full: changes to the files are refused", count=1)
    cache = StoreCache(str(tmp_path / "live"), STORE)
    await new_file(cache, "applied.md", b"in SQLite")
    cache.journal.apply_log()
    logged = await new_file(cache, "logged.md", b"in the log only")
    where = tmp_path / "killed"
    shutil.copytree(cache.dir, where / STORE)
    cache.journal.abandon()

    import sqlite3

    real_connect = sqlite3.connect

    def full_connect(*args, **kwargs):
        return _FullDisk(real_connect(*args, **kwargs), lambda sql: sql == "COMMIT")

    monkeypatch.setattr(sqlite3, "connect", full_connect)
    full = StoreCache(str(where), STORE)
    assert full.disk_full
    assert contents(full) == {"/applied.md": b"in SQLite", "/logged.md": b"in the log only"}
    newer = await new_file(full, "newer.md", b"on the full disk")
    assert newer.id > logged.id
    assert full.uploads() == []  # read with the log applied in a transaction rolled back
    full.journal.abandon()
    monkeypatch.undo()

    again = StoreCache(str(where), STORE)
    assert contents(again) == {
        "/applied.md": b"in SQLite",
        "/logged.md": b"in the log only",
        "/newer.md": b"on the full disk",
    }
    assert invariant_problems(again) == []
    again.close()
