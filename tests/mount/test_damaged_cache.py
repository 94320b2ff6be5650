"""A cache a kill left, through real mounts: it opens without a word and
without loss, what fsync made durable comes back, a damaged journal is
refused with one sentence; a full cache disk is reported and never silently
dropped."""

from __future__ import annotations

import errno
import os
import signal
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import pytest

from memfs.testing import FakeStore
from tests.support.mounts import Mounter

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


def _status(mounter: Mounter) -> tuple[dict, str]:
    [status] = mounter.status()
    human = " ".join(mounter.memfs("status", check=True).stdout.split())  # its lines unwrapped
    return status, human


def test_a_kill_in_a_write_storm_loses_nothing_a_write_returned(mounter, memfs_server):
    """SIGKILL of the store process while files are created and appended to:
    the next mount opens without a word, and every file shows everything whose
    write returned (a write cut by the kill may show or not)."""
    store_id = memfs_server.create_store("kill in a storm")["id"]
    folder = mounter.cache_dir / store_id
    mnt = mounter.mount_one(store_id)
    returned: dict[str, bytes] = {}
    cut: list[str] = []
    stop = time.monotonic() + 1.5

    def storm() -> None:
        i = 0
        while time.monotonic() < stop:
            name = f"n{i % 40:02}.md"
            line = f"line {i} of the storm\n".encode()
            try:
                with open(mnt / name, "ab") as f:
                    f.write(line)
            except OSError:
                cut.append(name)
                return
            returned[name] = returned.get(name, b"") + line
            i += 1

    writer = threading.Thread(target=storm)
    writer.start()
    time.sleep(0.7)
    _kill(mounter)
    writer.join()
    mnt = mounter.mount_one(store_id)
    shown = {name: (mnt / name).read_bytes() for name in returned}
    for name, content in returned.items():
        assert shown[name] == content or (name in cut and shown[name].startswith(content)), name
    status, human = _status(mounter)
    assert status["cache_damage"] is None and status["lost_changes"] == []
    assert "cache damaged" not in human
    mounter.unmount(mnt)
    assert "memfs.cache WARNING" not in (folder / "memfs.log").read_text()
    stored = {p: c.encode() for p, c in FakeStore(memfs_server, store_id).memories().items()}
    assert stored == {f"/{name}": content for name, content in shown.items()}


def test_a_clean_kill_leaves_a_cache_that_opens_without_a_word(mounter, memfs_server):
    """Files written, then SIGKILL at once, three times over: no warning,
    nothing in `memfs status`, and nothing the writes returned for is lost."""
    store_id = memfs_server.create_store("clean kill")["id"]
    folder = mounter.cache_dir / store_id
    for attempt in range(3):
        mnt = mounter.mount_one(store_id)
        written = {name: f"{name} as written in attempt {attempt}".encode() for name in FILES}
        for name, content in written.items():
            (mnt / name).write_bytes(content)
        _kill(mounter)
        mnt = mounter.mount_one(store_id)
        assert {name: (mnt / name).read_bytes() for name in FILES} == written
        status, human = _status(mounter)
        assert status["cache_damage"] is None and status["lost_changes"] == []
        assert "cache damaged" not in human
        _kill(mounter)
    log = (folder / "memfs.log").read_text()
    assert "memfs.cache WARNING" not in log, log


def test_what_fsync_made_durable_comes_back_when_a_content_file_lost_it(mounter, memfs_server):
    """A save fsync'd, the store process killed, then its content file cut by
    hand (what a power cut that lost the page cache leaves): the next mount
    shows the bytes fsync made durable, and the store gets them."""
    store_id = memfs_server.create_store("durable copy")["id"]
    folder = mounter.cache_dir / store_id
    mnt = mounter.mount_one(store_id)
    with open(mnt / "saved.md", "wb") as f:
        f.write(b"made durable by fsync")
        f.flush()
        os.fsync(f.fileno())
        inode = os.fstat(f.fileno()).st_ino
    _kill(mounter)
    content = folder / "files" / str(inode)
    content.write_bytes(b"made dur")
    mnt = mounter.mount_one(store_id)
    assert (mnt / "saved.md").read_bytes() == b"made durable by fsync"
    mounter.unmount(mnt)
    assert FakeStore(memfs_server, store_id).memories() == {"/saved.md": "made durable by fsync"}


@pytest.mark.parametrize("stopped_by", ["unmount", "kill"])
def test_a_damaged_journal_is_refused_with_one_sentence(mounter, memfs_server, stopped_by):
    """The journal's SQLite file overwritten by something else: the mount is
    refused with one sentence naming the cache, a non-zero exit and no
    traceback, and the folder is left as it was (after a kill, its WAL holds
    the last changes: SQLite must not fold it into the garbage, nor delete it)."""
    store_id = memfs_server.create_store("damaged journal")["id"]
    folder = mounter.cache_dir / store_id
    mnt = mounter.mount_one(store_id)
    (mnt / "a.md").write_text("a")
    if stopped_by == "kill":
        _kill(mounter)
    else:
        mounter.unmount(mnt)
    (folder / "journal.sqlite3").write_bytes(b"not a database at all" * 300)
    before = {p.name: p.read_bytes() for p in folder.glob("journal.sqlite3*")}
    r = mounter.mount(f"{store_id}={mounter.root / 's'}", check=False)
    assert r.returncode != 0, (r.stdout, r.stderr)
    [line] = r.stderr.strip().splitlines()
    assert f"cannot open the cache at {folder}: file is not a database" in line, line
    assert "Traceback" not in r.stderr
    assert not mounter.store_pids()
    assert {p.name: p.read_bytes() for p in folder.glob("journal.sqlite3*")} == before


def test_the_cache_of_another_store_is_refused(mounter, memfs_server):
    """A store's cache folder given to another store (renamed, restored under
    the wrong name): refused with one sentence, its files never sent there."""
    first = memfs_server.create_store("first")["id"]
    second = memfs_server.create_store("second")["id"]
    mnt = mounter.mount_one(first)
    (mnt / "mine.md").write_text("the first store's")
    _kill(mounter)
    os.rename(mounter.cache_dir / first, mounter.cache_dir / second)
    r = mounter.mount(f"{second}={mounter.root / 's2'}", check=False)
    assert r.returncode != 0, (r.stdout, r.stderr)
    [line] = r.stderr.strip().splitlines()
    assert f"the cache at {mounter.cache_dir / second} holds store {first}" in line, line
    assert not mounter.store_pids()
    with memfs_server.http() as http:
        assert http.get(f"/v1/memory_stores/{second}/memories").json()["data"] == []


# ---- a full cache disk ------------------------------------------------------------


SMALL_DISK = "40m"
REMOTE_FILES = 30
"""Memories put in the store while the cache was down: more than one listing page."""
LATE_FILES = 24
"""Files of 60 kB written on the full disk: applying them needs more than the WAL has."""


@pytest.fixture
def small_disk(tmp_path):
    """A tmpfs of its own (40 MiB), unmounted at the end."""
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


def test_a_mount_on_a_nearly_full_disk_leaves_the_room_to_the_files(
    small_disk_mounter, memfs_server
):
    """The journal's log is given its blocks ahead when the cache opens, but not
    on a disk with little room: a mount on a disk with 8 MiB left (after a
    clean unmount) takes writes and leaves the disk its room, where the log's
    16 MiB took the last byte and turned every change away."""
    mounter, disk = small_disk_mounter
    store_id = memfs_server.create_store("nearly full")["id"]
    mnt = mounter.mount_one(store_id)
    (mnt / "first.md").write_text("first\n")
    mounter.unmount(mnt)
    st = os.statvfs(disk)
    with open(disk / "fill", "wb") as f:
        f.write(bytes(st.f_bavail * st.f_frsize - (8 << 20)))
    mnt = mounter.mount_one(store_id)
    written = {f"/n{i}.md": f"{i} " * 20_000 for i in range(5)}
    for path, content in written.items():
        (mnt / path.lstrip("/")).write_text(content)
    st = os.statvfs(disk)
    assert st.f_bavail * st.f_frsize > 6 << 20
    mounter.unmount(mnt)
    assert FakeStore(memfs_server, store_id).memories() == {"/first.md": "first\n", **written}
