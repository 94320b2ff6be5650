"""A pull never makes a version that exists nowhere: a change of the store's
waits for a file's writers, and a conflict copy is written whole and durably
before the local version is replaced (or the pull waits). Real mounts, a real
`memfs serve`; a full disk is a real, small tmpfs."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.support import conflict_files
from tests.system.test_sync import put_remote, remote_files


def test_a_change_of_the_store_waits_for_the_file_s_writer(mounter, memfs_server):
    store_id = memfs_server.create_store("writer")["id"]
    put_remote(memfs_server, store_id, "/doc.md", "base")
    mnt = mounter.mount_one(store_id)
    assert (mnt / "doc.md").read_text() == "base"
    fd = os.open(mnt / "doc.md", os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, b"A" * 100)
        put_remote(memfs_server, store_id, "/doc.md", "theirs")
        mounter.sync(mnt)  # within 2 s of the write: the store's change waits
        assert "/doc.md" in mounter.status()[0]["pending"]
        os.write(fd, b"B" * 100)
    finally:
        os.close(fd)
    mounter.sync(mnt)  # closed: decided on the whole local version
    assert (mnt / "doc.md").read_text() == "theirs"
    (copy,) = conflict_files(mounter.cache_dir / store_id / "conflicts")
    assert copy.read_bytes() == b"A" * 100 + b"B" * 100
    mounter.unmount(mnt)
    assert remote_files(memfs_server, store_id) == {"/doc.md": "theirs"}


def test_a_change_of_the_store_waits_for_a_quiet_writer_too(mounter, memfs_server):
    """A writer that paused for longer than the quiet time goes on at its own
    offset: in the store's version, that left a hole of zero bytes, which was
    pushed to the store and every session."""
    store_id = memfs_server.create_store("quiet writer")["id"]
    put_remote(memfs_server, store_id, "/doc.md", "base")
    mnt = mounter.mount_one(store_id)
    assert (mnt / "doc.md").read_text() == "base"
    with open(mnt / "doc.md", "w") as f:
        f.write("first half, ")
        f.flush()
        time.sleep(2.5)  # quiet: this version is pushed
        put_remote(memfs_server, store_id, "/doc.md", "theirs")
        mounter.sync(mnt)
        f.write("second half")
        f.flush()
        time.sleep(2.5)
        # The conflict is known: no push that must fail, nor the full listing it asks for.
        for _ in range(2):
            (done,) = json.loads(mounter.memfs("sync", "--json", str(mnt), check=True).stdout)
            assert not done["report"]["full_listing"], done
        assert (mnt / "doc.md").read_text() == "first half, second half"
    mounter.sync(mnt)  # closed: decided on the whole local version
    assert (mnt / "doc.md").read_text() == "theirs"
    (copy,) = conflict_files(mounter.cache_dir / store_id / "conflicts")
    assert copy.read_text() == "first half, second half"
    mounter.unmount(mnt)
    assert remote_files(memfs_server, store_id) == {"/doc.md": "theirs"}


@pytest.fixture
def small_disk(tmp_path: Path):
    """Mounts a 1 MiB tmpfs at a folder: `mount(path)`; unmounted at teardown."""
    mounted: list[Path] = []

    def mount(path: Path) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(path)], check=True
        )
        mounted.append(path)
        return path

    yield mount
    for path in reversed(mounted):
        with contextlib.suppress(subprocess.CalledProcessError):
            subprocess.run(["umount", "-l", str(path)], check=True, capture_output=True)


def fill(folder: Path, leave: int) -> Path:
    """A file that leaves about `leave` bytes free in `folder`'s filesystem."""
    filler = folder / "filler"
    with open(filler, "wb") as f:
        while True:
            st = os.statvfs(folder)
            free = st.f_bavail * st.f_frsize
            if free <= leave:
                break
            try:
                f.write(b"\0" * min(free - leave, 65536))
                f.flush()
            except OSError:
                break
    return filler


def test_a_conflict_copy_that_cannot_be_written_whole_keeps_the_local_version(
    mounter, memfs_server, small_disk
):
    store_id = memfs_server.create_store("full disk")["id"]
    put_remote(memfs_server, store_id, "/c.md", "base")
    mnt = mounter.mount_one(store_id)
    conflicts = small_disk(mounter.cache_dir / store_id / "conflicts")
    filler = fill(conflicts, leave=8192)
    mine = "mine " * 10_000  # 50 KB: a write of it here is cut short
    (mnt / "c.md").write_text(mine)
    put_remote(memfs_server, store_id, "/c.md", "theirs")
    mounter.sync(mnt)
    assert (mnt / "c.md").read_text() == mine  # kept as it is: no copy could hold it
    assert conflict_files(conflicts) == [filler]  # and no part of a copy is left
    reason = mounter.status()[0]["refused"]["/c.md"]
    assert "waits" in reason and "No space left on device" in reason
    log = (mounter.cache_dir / store_id / "memfs.log").read_text()
    assert "No space left on device" in log and "is kept at" not in log
    filler.unlink()
    mounter.sync(mnt)
    assert (mnt / "c.md").read_text() == "theirs"
    (copy,) = conflict_files(conflicts)
    assert copy.read_text() == mine
    assert mounter.status()[0]["refused"] == {}


def test_a_file_first_read_after_the_store_grew_it_is_read_whole(mounter, memfs_server):
    """Listed at one size, not fetched yet, and made longer in the store before
    its first open: the open fetches the store's content, and the kernel,
    which kept the listed size, is told, so the read is not cut at it."""
    store_id = memfs_server.create_store("grown")["id"]
    path = mounter.mount_one(store_id, extra=("--sync-interval", "3600", "--write-behind", "no"))
    put_remote(memfs_server, store_id, "/x.md", "v1\n")
    mounter.sync(path)
    assert (path / "x.md").stat().st_size == 3  # the size the kernel keeps
    put_remote(memfs_server, store_id, "/x.md", "version two is longer\n")
    assert (path / "x.md").read_text() == "version two is longer\n"
    assert (path / "x.md").stat().st_size == 22


def test_a_file_the_store_changed_gets_a_new_modification_time(mounter, memfs_server):
    """A pull that changes a file's bytes changes its mtime and ctime, as a local
    write would: git, make and rsync, which trust the times and the size, see
    a change of the same size. A pull that changes nothing leaves them."""
    store_id = memfs_server.create_store("times")["id"]
    path = mounter.mount_one(store_id, extra=("--sync-interval", "3600", "--write-behind", "no"))
    (path / "m.txt").write_text("cccc\n")
    os.utime(path / "m.txt", ns=(10**18, 10**18))
    mounter.sync(path / "m.txt")
    put_remote(memfs_server, store_id, "/other.md", "unrelated\n")
    mounter.sync(path)
    assert (path / "m.txt").stat().st_mtime_ns == 10**18
    put_remote(memfs_server, store_id, "/m.txt", "dddd\n")
    mounter.sync(path)
    changed = (path / "m.txt").stat()
    assert (path / "m.txt").read_text() == "dddd\n"
    assert changed.st_mtime_ns > 10**18 + 10**17 and changed.st_ctime_ns >= changed.st_mtime_ns


def test_a_file_moved_onto_a_path_the_store_just_gave_another_memory_comes_back(
    mounter, memfs_server
):
    """The store's memory at the path wins and the moved file becomes a conflict copy;
    its own memory, still at its old path in the store, vanished from this mount
    until a periodic full listing, about 40 passes later."""
    store_id = memfs_server.create_store("move onto")["id"]
    put_remote(memfs_server, store_id, "/p.md", "p content")
    mnt = mounter.mount_one(store_id)
    assert (mnt / "p.md").read_text() == "p content"
    put_remote(memfs_server, store_id, "/q.md", "q content")
    (mnt / "p.md").rename(mnt / "q.md")
    mounter.sync(mnt)
    mounter.sync(mnt)
    assert sorted(p.name for p in mnt.iterdir() if not p.name.startswith(".")) == ["p.md", "q.md"]
    assert (mnt / "p.md").read_text() == "p content"
    assert (mnt / "q.md").read_text() == "q content"
    mounter.unmount(mnt)
    assert remote_files(memfs_server, store_id) == {"/p.md": "p content", "/q.md": "q content"}
