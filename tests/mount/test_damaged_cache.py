"""A cache that a kill left damaged, through real mounts: a redo log cut short
or failing its check opens with a warning that names the files whose changes
were lost, and `memfs status` shows it; a clean SIGKILL says nothing."""

from __future__ import annotations

import errno
import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from memfs.testing import FakeStore
from tests.support.mounts import Mounter
from tests.support.redo import REDO_LOG, journal_meta, record_with

pytestmark = pytest.mark.fuse

FILES = ("a.md", "b.md", "c.md")
ATTEMPTS = 5


def _kill(mounter: Mounter) -> None:
    for pid in mounter.store_pids():
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while mounter.store_pids() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not mounter.store_pids()


def _contents(attempt: int) -> dict[str, bytes]:
    return {name: f"{name} as written in attempt {attempt}".encode() for name in FILES}


def _written_and_killed(
    mounter: Mounter, store_id: str, *, log_filled: bool = False
) -> tuple[Path, dict[str, bytes]]:
    """Mount, write a.md, b.md and c.md, SIGKILL the store process at once:
    their records still in the redo log (the mount applies it to SQLite while
    idle, so a write that was applied first is tried again). `log_filled`:
    first wait until the log's space is written and noted, so that a log cut
    short is known to be shorter than it was made."""
    folder = mounter.cache_dir / store_id
    for attempt in range(ATTEMPTS):
        mnt = mounter.mount_one(store_id)
        if log_filled:
            deadline = time.monotonic() + 20
            while journal_meta(folder).get("redo_log_filled") != "1":
                assert time.monotonic() < deadline, "the redo log's space was never noted written"
                time.sleep(0.3)
        written = _contents(attempt)
        for name, content in written.items():
            (mnt / name).write_bytes(content)
        _kill(mounter)
        if all(record_with(folder, content) for content in written.values()):
            return mnt, written
    raise AssertionError(f"the writes were applied before the kill {ATTEMPTS} times")


def _damage_log(folder: Path, at: int, data: bytes) -> None:
    with open(folder / REDO_LOG, "r+b") as f:
        f.seek(at)
        f.write(data)


def _status(mounter: Mounter) -> tuple[dict, str]:
    [status] = mounter.status()
    human = " ".join(mounter.memfs("status", check=True).stdout.split())  # its lines unwrapped
    return status, human


def test_a_redo_log_record_that_fails_its_check_is_named_and_shown(mounter, memfs_server):
    """Bytes of b.md's record flipped, c.md's records after it: b.md's write
    and everything after it are lost, and the mount says which files."""
    store_id = memfs_server.create_store("flipped")["id"]
    folder = mounter.cache_dir / store_id
    _, written = _written_and_killed(mounter, store_id)
    record = record_with(folder, written["b.md"])
    assert record is not None
    _damage_log(folder, record.at + record.length - 5, b"\xff\x00\xff")

    mnt = mounter.mount_one(store_id)
    log = (folder / "memfs.log").read_text()
    warnings = [line for line in log.splitlines() if "is damaged" in line]
    assert len(warnings) == 1, log
    assert "WARNING" in warnings[0] and f"the redo log of the cache at {folder}" in warnings[0]
    assert "the changes it held to /b.md, /c.md are lost" in warnings[0]
    assert (mnt / "a.md").read_bytes() == written["a.md"]
    assert (mnt / "b.md").read_bytes() == b""
    assert not (mnt / "c.md").exists()
    status, human = _status(mounter)
    assert status["lost_changes"] == ["/b.md", "/c.md"]
    assert "/b.md, /c.md" in status["cache_damage"]
    assert f"cache damaged: the redo log of the cache at {folder} is damaged" in human

    # Said once: the next mount finds a log that starts again, and says nothing.
    mounter.unmount(mnt)
    mnt = mounter.mount_one(store_id)
    assert [
        line for line in (folder / "memfs.log").read_text().splitlines() if "is damaged" in line
    ] == warnings
    status, human = _status(mounter)
    assert status["cache_damage"] is None and status["lost_changes"] == []
    assert "cache damaged" not in human
    mounter.unmount(mnt)
    assert FakeStore(memfs_server, store_id).memories() == {
        "/a.md": written["a.md"].decode(),
        "/b.md": "",
    }


def test_a_redo_log_cut_short_in_a_record_is_named_and_shown(mounter, memfs_server):
    store_id = memfs_server.create_store("truncated")["id"]
    folder = mounter.cache_dir / store_id
    _, written = _written_and_killed(mounter, store_id, log_filled=True)
    record = record_with(folder, written["c.md"])
    assert record is not None
    # In the middle of its content: its operations, before it, still say which file.
    os.truncate(folder / REDO_LOG, record.at + record.length - len(written["c.md"]) // 2)

    mnt = mounter.mount_one(store_id)
    log = (folder / "memfs.log").read_text()
    warnings = [line for line in log.splitlines() if "is damaged" in line]
    assert len(warnings) == 1, log
    assert "the file is cut short" in warnings[0], warnings
    assert "the changes it held to /c.md are lost" in warnings[0], warnings
    assert (mnt / "a.md").read_bytes() == written["a.md"]
    assert (mnt / "b.md").read_bytes() == written["b.md"]
    assert (mnt / "c.md").read_bytes() == b""
    status, _ = _status(mounter)
    assert status["lost_changes"] == ["/c.md"]
    assert json.dumps(status["cache_damage"]).count("cut short") == 1


def test_a_clean_kill_leaves_a_log_that_opens_without_a_word(mounter, memfs_server):
    """The normal end of a log after a SIGKILL (the record after the last one,
    zeros, an earlier cycle's records) is no damage: no warning, nothing in
    `memfs status`, and nothing the writes returned for is lost."""
    store_id = memfs_server.create_store("clean kill")["id"]
    folder = mounter.cache_dir / store_id
    for _ in range(3):  # the log holds earlier cycles' records after the first
        _, written = _written_and_killed(mounter, store_id)
        mnt = mounter.mount_one(store_id)
        assert {name: (mnt / name).read_bytes() for name in FILES} == written
        status, human = _status(mounter)
        assert status["cache_damage"] is None and status["lost_changes"] == []
        assert "cache damaged" not in human
        _kill(mounter)
    log = (folder / "memfs.log").read_text()
    assert "is damaged" not in log and "redo log" not in log, log


# ---- a full cache disk ------------------------------------------------------------


SMALL_DISK = "40m"
REMOTE_FILES = 30
"""Memories put in the store while the cache was down: more than one listing page."""
LATE_FILES = 24
"""Files of 60 kB written on the full disk: applying them needs more than the WAL has."""


@pytest.fixture
def small_disk(tmp_path):
    """A tmpfs of its own (40 MiB: a cache needs 16 MiB for its redo log and a
    little more), unmounted at the end."""
    disk = tmp_path / "disk"
    disk.mkdir(mode=0o700)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SMALL_DISK},mode=0700", "memfs-test", str(disk)],
        check=True,
    )
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


@pytest.fixture
def small_disk_mounter(memfs_server, tmp_path, small_disk):
    """A `Mounter` whose cache folder is on `small_disk`, its mounts gone before the disk is."""
    m = Mounter(memfs_server, tmp_path)
    m.cache_dir = small_disk / "cache"
    try:
        yield m, small_disk
    finally:
        m.cleanup()


def _fill(disk: Path) -> Path:
    """Fill the disk to its last byte with a file of zeros; returns the file."""
    fill = disk / "fill"
    fd = os.open(fill, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 20, 1 << 12, 1):
            chunk = bytes(size)
            while True:
                try:
                    os.write(fd, chunk)
                except OSError as e:
                    assert e.errno == errno.ENOSPC, e
                    break
    finally:
        os.close(fd)
    return fill


def _errno_of(fn) -> int:
    with pytest.raises(OSError) as info:
        fn()
    return info.value.errno


def test_a_cache_killed_on_a_full_disk_mounts_reads_and_uploads(small_disk_mounter, memfs_server):
    """A kill on a full disk left the cache unopenable ("database or disk is
    full") until space was freed. Now it mounts on the still-full disk: the
    files read, the changes the cache holds reach the store, a change that
    needs space fails with ENOSPC, and the log and `memfs status` say why;
    once space is freed, changes are taken again."""
    mounter, disk = small_disk_mounter
    store_id = memfs_server.create_store("full disk")["id"]
    FakeStore(memfs_server, store_id).put("/from-store.md", "in the store first")
    mnt = mounter.mount_one(store_id)
    assert (mnt / "from-store.md").read_text() == "in the store first"
    (mnt / "early.md").write_text("written while there was room")
    mounter.unmount(mnt)  # its WAL is emptied: what comes next needs room of its own
    mnt = mounter.mount_one(store_id)
    time.sleep(1)  # idle: the journal takes what its log holds while there is room
    fill = _fill(disk)
    late = {}
    for i in range(LATE_FILES):
        content = f"{i:03} written on the full disk\n" * 2000
        try:
            (mnt / f"late-{i:03}.md").write_text(content)
        except OSError as e:  # the mount found the disk full meanwhile: it says so
            assert e.errno == errno.ENOSPC and late, e
            break
        late[f"/late-{i:03}.md"] = content
    _kill(mounter)
    remote = {f"/remote/{i:02}.md": f"put in the store meanwhile {i}" for i in range(REMOTE_FILES)}
    for path, content in remote.items():
        FakeStore(memfs_server, store_id).put(path, content)

    mnt = mounter.mount_one(store_id)
    assert (mnt / "from-store.md").read_text() == "in the store first"
    assert (mnt / "early.md").read_text() == "written while there was room"
    for path, content in late.items():
        assert (mnt / path.lstrip("/")).read_text() == content
    mounter.sync(mnt)
    assert FakeStore(memfs_server, store_id).memories() == {
        "/from-store.md": "in the store first",
        "/early.md": "written while there was room",
        **late,
        **remote,
    }
    # The background download waits: the log's room goes to the uploads.
    status, _ = _status(mounter)
    assert not status["prefetched"]
    assert status["cached"] == status["files"] - REMOTE_FILES
    assert (mnt / "remote" / "07.md").read_text() == remote["/remote/07.md"]  # read: fetched
    assert _errno_of(lambda: (mnt / "new.md").write_text("needs room")) == errno.ENOSPC
    fd = os.open(mnt / "early.md", os.O_WRONLY | os.O_APPEND)
    try:
        assert _errno_of(lambda: os.write(fd, b"more")) == errno.ENOSPC
    finally:
        os.close(fd)
    assert _errno_of(lambda: os.mkdir(mnt / "folder")) == errno.ENOSPC
    assert _errno_of(lambda: os.unlink(mnt / "early.md")) == errno.ENOSPC
    assert (mnt / "early.md").read_text() == "written while there was room"
    assert mounter.store_pids(), "the store process is alive"
    log = (mounter.cache_dir / store_id / "memfs.log").read_text()
    assert f"the disk of the cache at {mounter.cache_dir / store_id} is full" in log, log
    status, human = _status(mounter)
    assert "is full" in (status["cache_disk_full"] or "")
    assert "the cache's disk is full: changes are refused (ENOSPC)" in human

    fill.unlink()
    deadline = time.monotonic() + 40
    while _status(mounter)[0]["cache_disk_full"]:
        assert time.monotonic() < deadline, "the mount never took changes again"
        time.sleep(0.5)
    (mnt / "new.md").write_text("once there is room again")
    deadline = time.monotonic() + 30
    while not _status(mounter)[0]["prefetched"]:
        assert time.monotonic() < deadline, "the background download never went on"
        time.sleep(0.5)
    mounter.unmount(mnt)
    assert FakeStore(memfs_server, store_id).memories()["/new.md"] == "once there is room again"
    assert (
        "has room again: changes are taken again"
        in (mounter.cache_dir / store_id / "memfs.log").read_text()
    )


def test_a_daemon_log_keeps_room_for_what_it_says_on_a_full_disk(small_disk):
    """The log of a daemon's store process shares the cache's disk: it keeps
    room allocated past its end, so that the lines saying the disk is full
    reach it."""
    from memfs._private import LOG_ROOM, open_log_file

    folder = small_disk / "cache"
    folder.mkdir(mode=0o700)
    fd = open_log_file(str(folder / "memfs.log"))
    try:
        os.write(fd, b"a first line\n")
        _fill(small_disk)
        line = b"the disk of the cache is full: ...\n"
        for _ in range(LOG_ROOM // 2 // len(line)):
            assert os.write(fd, line) == len(line)
    finally:
        os.close(fd)


# ---- a cache folder of an older layout ---------------------------------------------


def test_a_cache_folder_of_an_older_layout_is_refused_with_one_sentence(mounter, memfs_server):
    """A cache folder a development version made (its journal's layout 6, with
    the contents in a table) is refused at mount, with one sentence telling
    the user to move it aside, a non-zero exit, and the folder left alone."""
    store_id = memfs_server.create_store("old layout")["id"]
    folder = mounter.cache_dir / store_id
    folder.mkdir(parents=True, mode=0o700)
    os.chmod(mounter.cache_dir, 0o700)
    db = sqlite3.connect(folder / "journal.sqlite3", isolation_level=None)
    db.executescript(
        "CREATE TABLE nodes (id INTEGER PRIMARY KEY, parent INTEGER, name TEXT);"
        "CREATE TABLE contents (node_id INTEGER PRIMARY KEY, data BLOB NOT NULL);"
        "PRAGMA user_version = 6;"
    )
    db.close()
    before = (folder / "journal.sqlite3").read_bytes()
    r = mounter.mount(f"{store_id}={mounter.root / 's'}", check=False)
    assert r.returncode != 0, (r.stdout, r.stderr)
    [line] = r.stderr.strip().splitlines()
    assert f"the cache at {folder} was made by a development version of memfs" in line, line
    assert "move it aside (it holds no release's data)" in line, line
    assert "Traceback" not in r.stderr
    assert (folder / "journal.sqlite3").read_bytes() == before
    assert not mounter.store_pids()
