"""The file semantics programs rely on, on real mounts of a real `memfs serve`
store: what a program sees inside the mount, and what the store holds after
the mount stops."""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import shutil
import signal
import socket
import stat
import tempfile
import time

import pytest

from memfs.api import MAX_CONTENT_BYTES
from memfs.cache._journal import Journal
from memfs.testing import FakeStore

MARKER = ".anthropic-memory-store"


def store_contents(server, store_id: str) -> dict[str, str]:
    """Every memory of the store: path -> content."""
    return FakeStore(server, store_id).memories()


def memory_ids(server, store_id: str) -> dict[str, str]:
    with server.http() as http:
        r = http.get(f"/v1/memory_stores/{store_id}/memories", params={"limit": 100})
    return {m["path"]: m["id"] for m in r.json()["data"]}


def put(server, store_id: str, path: str, content: str) -> None:
    with server.http() as http:
        r = http.post(
            f"/v1/memory_stores/{store_id}/memories", json={"path": path, "content": content}
        )
    assert r.status_code == 200, r.text


def errno_of(fn, *args, **kwargs) -> int:
    with pytest.raises(OSError) as info:
        fn(*args, **kwargs)
    return info.value.errno


def _journal_on_disk(mounter, store_id: str, query: str, inode: int):
    """One row of the cache's journal as it stands on disk: the store process
    holds the journal locked, so a copy of its files is read, as a restart
    after a kill would read them."""
    src = mounter.cache_dir / store_id
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("journal.sqlite3", "journal.sqlite3-wal"):
            if (src / name).exists():
                shutil.copyfile(src / name, os.path.join(tmp, name))
        if (src / "files").exists():
            shutil.copytree(src / "files", os.path.join(tmp, "files"))
        journal = Journal(os.path.join(tmp, "journal.sqlite3"), store_id=store_id, memory_bytes=1)
        try:
            if query == CONTENT:
                content = journal.content(inode)
                return None if content is None else (content,)
            return journal.db.execute(query, (inode,)).fetchone()
        finally:
            journal.close()


CONTENT = "the content file"


def journal_row(mounter, store_id: str, inode: int) -> tuple[int, int]:
    """(edited, pending) of a file in the journal on disk."""
    return _journal_on_disk(
        mounter, store_id, "SELECT edited, pending FROM nodes WHERE id = ?", inode
    )


def journal_content(mounter, store_id: str, inode: int) -> bytes | None:
    """A file's content in the journal on disk (None: it has none there)."""
    row = _journal_on_disk(mounter, store_id, CONTENT, inode)
    return None if row is None else bytes(row[0])


def test_files_and_folders_behave_as_programs_expect(mounter, memfs_server):
    store_id = memfs_server.create_store("semantics")["id"]
    put(memfs_server, store_id, "/old/keep.md", "kept")
    put(memfs_server, store_id, "/old/replace-me.md", "to be replaced")
    put(memfs_server, store_id, "/doomed.md", "deleted while open")
    mnt = mounter.mount_one(store_id)

    # create, O_EXCL, write at offsets, the content on disk before close
    a = mnt / "a.md"
    fd = os.open(a, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    ino = os.fstat(fd).st_ino
    assert os.write(fd, b"hello world") == 11
    assert journal_content(mounter, store_id, ino) == b"hello world"
    assert journal_row(mounter, store_id, ino) == (1, 1)
    assert os.pwrite(fd, b"W", 6) == 1
    assert os.pwrite(fd, b"!", 15) == 1
    assert os.pread(fd, 100, 0) == b"hello World\0\0\0\0!"
    os.fsync(fd)
    os.close(fd)
    assert errno_of(os.open, a, os.O_WRONLY | os.O_CREAT | os.O_EXCL) == errno.EEXIST

    # O_APPEND, O_TRUNC, truncate both ways, ftruncate
    with open(a, "ab") as f:
        f.write(b"+tail")
    assert a.read_bytes() == b"hello World\0\0\0\0!+tail"
    os.truncate(a, 5)
    assert a.read_bytes() == b"hello"
    os.truncate(a, 8)
    assert a.read_bytes() == b"hello\0\0\0"
    with open(a, "r+b") as f:
        os.ftruncate(f.fileno(), 2)
        f.write(b"HE")
    assert a.read_bytes() == b"HE"
    with open(a, "wb") as f:  # O_TRUNC
        f.write(b"final a")
    assert a.read_bytes() == b"final a"

    # chmod and utimens are kept locally; the inode stays the same throughout
    os.chmod(a, 0o600)
    os.utime(a, ns=(1_600_000_000_000_000_000, 1_700_000_000_000_000_000))
    st = a.stat()
    assert (stat.S_IMODE(st.st_mode), st.st_mtime_ns, st.st_ino) == (
        0o600,
        1_700_000_000_000_000_000,
        ino,
    )

    # folders: mkdir, readdir, rmdir, non-empty rmdir, rename of a whole folder
    (mnt / "d1" / "d2").mkdir(parents=True)
    (mnt / "d1" / "d2" / "deep.md").write_text("deep")
    (mnt / "empty").mkdir()
    assert errno_of(os.rmdir, mnt / "d1") == errno.ENOTEMPTY
    assert errno_of(os.mkdir, mnt / "d1") == errno.EEXIST
    assert errno_of(os.rmdir, mnt / "a.md") == errno.ENOTDIR
    assert errno_of(os.unlink, mnt / "d1") == errno.EISDIR
    os.rmdir(mnt / "empty")
    assert sorted(os.listdir(mnt)) == sorted([MARKER, "a.md", "d1", "doomed.md", "old"])
    deep_ino = (mnt / "d1" / "d2" / "deep.md").stat().st_ino
    os.rename(mnt / "d1", mnt / "old" / "moved")
    assert (mnt / "old" / "moved" / "d2" / "deep.md").read_text() == "deep"
    assert (mnt / "old" / "moved" / "d2" / "deep.md").stat().st_ino == deep_ino
    assert not (mnt / "d1").exists()
    assert errno_of(os.rename, mnt / "old", mnt / "old" / "moved" / "x") == errno.EINVAL

    # rename over an existing file: the target's content is replaced, its name kept
    (mnt / "new.md").write_text("replacement")
    os.rename(mnt / "new.md", mnt / "old" / "replace-me.md")
    assert (mnt / "old" / "replace-me.md").read_text() == "replacement"
    assert not (mnt / "new.md").exists()

    # unlink of an open file: still readable and writable until closed
    with open(mnt / "doomed.md", "r+b") as f:
        os.unlink(mnt / "doomed.md")
        assert not (mnt / "doomed.md").exists()
        assert f.read() == b"deleted while open"
        f.write(b", written after")
        f.seek(0)
        assert f.read() == b"deleted while open, written after"
        assert os.fstat(f.fileno()).st_nlink == 0
    assert "doomed.md" not in os.listdir(mnt)

    # statfs
    sv = os.statvfs(mnt)
    assert (sv.f_namemax, sv.f_bsize) == (255, 4096)
    assert sv.f_files - sv.f_ffree == 4  # a.md, keep.md, replace-me.md, deep.md

    # a sync pass in the middle keeps every inode number and every local attribute
    mounter.sync(mnt)
    st = a.stat()
    assert (st.st_ino, stat.S_IMODE(st.st_mode), st.st_mtime_ns) == (
        ino,
        0o600,
        1_700_000_000_000_000_000,
    )
    assert journal_row(mounter, store_id, ino) == (0, 0)
    assert (mnt / "old" / "moved" / "d2" / "deep.md").stat().st_ino == deep_ino

    # a folder of stored memories renamed over an empty folder: the same memories move
    ids_before = memory_ids(memfs_server, store_id)
    (mnt / "archive").mkdir()
    os.rename(mnt / "old", mnt / "archive")
    assert (mnt / "archive" / "moved" / "d2" / "deep.md").stat().st_ino == deep_ino

    mounter.unmount(mnt)
    assert store_contents(memfs_server, store_id) == {
        "/a.md": "final a",
        "/archive/keep.md": "kept",
        "/archive/replace-me.md": "replacement",
        "/archive/moved/d2/deep.md": "deep",
    }
    ids_after = memory_ids(memfs_server, store_id)
    assert ids_after["/archive/keep.md"] == ids_before["/old/keep.md"]
    assert ids_after["/archive/moved/d2/deep.md"] == ids_before["/old/moved/d2/deep.md"]


def test_refusals_have_clear_errnos(mounted, mounter, memfs_server):
    store_id, mnt = mounted
    (mnt / "a.md").write_text("a")

    # not regular files or folders: EPERM
    assert errno_of(os.symlink, "a.md", mnt / "link") == errno.EPERM
    assert errno_of(os.link, mnt / "a.md", mnt / "hard") == errno.EPERM
    assert errno_of(os.mkfifo, mnt / "fifo") == errno.EPERM
    assert errno_of(os.mknod, mnt / "dev", 0o600 | stat.S_IFCHR, os.makedev(1, 3)) == errno.EPERM
    with socket.socket(socket.AF_UNIX) as s:
        assert errno_of(s.bind, str(mnt / "sock")) == errno.EPERM

    # extended attributes: only memfs's own, read-only (tests/mount/test_xattrs.py)
    for call, args in [
        (os.setxattr, (mnt / "a.md", "user.k", b"v")),
        (os.removexattr, (mnt / "a.md", "user.k")),
    ]:
        assert errno_of(call, *args) == errno.ENOTSUP, call.__name__
    assert errno_of(os.getxattr, mnt / "a.md", "user.k") == errno.ENODATA

    # names the path rules forbid: EINVAL, for files, folders and renames alike
    bad_names = [
        b"tab\tname",
        b"bell\x07",
        "cafe\u0301.md".encode(),
        b"bad\xff.md",
        b"zw\xe2\x80\x8b",
    ]
    for bad in bad_names:
        target = os.fsencode(mnt) + b"/" + bad
        assert errno_of(os.open, target, os.O_WRONLY | os.O_CREAT) == errno.EINVAL, bad
        assert errno_of(os.mkdir, target) == errno.EINVAL, bad
        assert errno_of(os.rename, mnt / "a.md", target) == errno.EINVAL, bad

    # lengths: a name over 255 bytes, a path over 1,024
    assert errno_of(open, mnt / ("n" * 256), "w") == errno.ENAMETOOLONG
    (mnt / ("n" * 255)).write_text("longest name")
    deep = mnt.joinpath(*["d" * 250] * 4)
    deep.mkdir(parents=True)
    assert errno_of(open, deep / ("f" * 20), "w") == errno.ENAMETOOLONG  # 1,025 bytes
    (deep / ("f" * 19)).write_text("longest path")  # 1,024 bytes
    assert errno_of(os.rename, mnt / ("d" * 250), mnt / ("e" * 251)) == errno.ENAMETOOLONG

    # size: exactly 102,400 bytes is fine, one more is EFBIG
    full = mnt / "full.md"
    full.write_bytes(b"x" * MAX_CONTENT_BYTES)
    with open(full, "ab", buffering=0) as f:
        assert errno_of(f.write, b"y") == errno.EFBIG
    assert errno_of(os.truncate, full, MAX_CONTENT_BYTES + 1) == errno.EFBIG
    fd = os.open(mnt / "over.md", os.O_WRONLY | os.O_CREAT)
    try:
        with pytest.raises(OSError) as info:
            written = os.write(fd, b"z" * (MAX_CONTENT_BYTES + 1))
            # the kernel may split one write: then the rest is refused
            os.write(fd, b"z" * (MAX_CONTENT_BYTES + 1 - written))
        assert info.value.errno == errno.EFBIG
    finally:
        os.close(fd)
    assert full.stat().st_size == MAX_CONTENT_BYTES
    assert (mnt / "over.md").stat().st_size <= MAX_CONTENT_BYTES

    # the marker: readable, never written, renamed or removed
    marker = mnt / MARKER
    assert marker.read_text() == f"version 1\n{store_id}"
    assert errno_of(open, marker, "w") == errno.EPERM
    assert errno_of(open, marker, "a") == errno.EPERM
    assert errno_of(os.unlink, marker) == errno.EPERM
    assert errno_of(os.rename, marker, mnt / "m") == errno.EPERM
    assert errno_of(os.rename, mnt / "a.md", marker) == errno.EPERM
    assert errno_of(os.chmod, marker, 0o644) == errno.EPERM
    assert marker.read_text() == f"version 1\n{store_id}"

    # A file whose last write was refused with EFBIG may be torn: it is not
    # uploaded (the final sync names it) until it is written within the limit.
    r = mounter.unmount(mnt, check=False)
    assert r.returncode == 1
    assert "/full.md" in r.stderr and "/over.md" in r.stderr
    stored = store_contents(memfs_server, store_id)
    long_path = "/" + "/".join(["d" * 250] * 4) + "/" + "f" * 19
    assert stored == {
        "/a.md": "a",
        "/" + "n" * 255: "longest name",
        long_path: "longest path",
    }


def test_a_write_through_any_handle_is_what_every_reader_sees(mounter, memfs_server):
    """A write-only handle writes around the page cache (direct I/O, so that a
    write costs no extended-attribute lookup); a reader holding the file's pages
    still reads what was written, and a shared writable mmap still works."""
    store_id = memfs_server.create_store("coherent")["id"]
    put(memfs_server, store_id, "/a.md", "one two three")
    mnt = mounter.mount_one(store_id)
    a = mnt / "a.md"
    reader = os.open(a, os.O_RDONLY)
    try:
        assert os.pread(reader, 100, 0) == b"one two three"
        before = mounter.status()[0]["fuse_requests"].get("getxattr", 0)
        writer = os.open(a, os.O_WRONLY)
        assert os.pwrite(writer, b"ONE", 0) == 3
        os.close(writer)
        with open(a, "ab") as f:
            for line in (b"\nfour", b"\nfive"):
                f.write(line)
                f.flush()
        assert os.pread(reader, 100, 0) == b"ONE two three\nfour\nfive"
        assert mounter.status()[0]["fuse_requests"].get("getxattr", 0) == before
    finally:
        os.close(reader)

    with open(a, "r+b") as f, mmap.mmap(f.fileno(), 0) as m:
        m[:3] = b"One"
        m.flush()
    assert a.read_bytes() == b"One two three\nfour\nfive"
    mounter.unmount(mnt)
    assert store_contents(memfs_server, store_id) == {"/a.md": "One two three\nfour\nfive"}


def test_a_read_only_store_refuses_every_change(mounter, memfs_server):
    store_id = memfs_server.create_store("read only")["id"]
    put(memfs_server, store_id, "/dir/file.md", "original")
    mnt = mounter.mount_one(store_id, read_only=True)
    f = mnt / "dir" / "file.md"
    assert f.read_text() == "original"
    attempts = {
        "write": lambda: os.open(f, os.O_WRONLY),
        "append": lambda: os.open(f, os.O_WRONLY | os.O_APPEND),
        "read-write": lambda: os.open(f, os.O_RDWR),
        "O_TRUNC": lambda: os.open(f, os.O_RDONLY | os.O_TRUNC),
        "create": lambda: os.open(mnt / "new.md", os.O_WRONLY | os.O_CREAT),
        "truncate": lambda: os.truncate(f, 0),
        "chmod": lambda: os.chmod(f, 0o600),
        "touch": lambda: os.utime(f),
        "rename": lambda: os.rename(f, mnt / "dir" / "moved.md"),
        "unlink": lambda: os.unlink(f),
        "mkdir": lambda: os.mkdir(mnt / "newdir"),
        "rmdir": lambda: os.rmdir(mnt / "dir"),
        "symlink": lambda: os.symlink("file.md", mnt / "dir" / "l"),
        "link": lambda: os.link(f, mnt / "dir" / "h"),
        "mkfifo": lambda: os.mkfifo(mnt / "fifo"),
    }
    got = {what: errno_of(fn) for what, fn in attempts.items()}
    assert got == {what: errno.EROFS for what in attempts}
    assert not os.access(f, os.W_OK)
    assert f.read_text() == "original"
    assert sorted(os.listdir(mnt / "dir")) == ["file.md"]
    mounter.unmount(mnt)
    assert store_contents(memfs_server, store_id) == {"/dir/file.md": "original"}


def test_unsynced_writes_survive_a_killed_store_process(mounter, memfs_server):
    """What a write() returned for survives a SIGKILL, closed or still open; a
    file opened with O_TRUNC and killed before any write is there, empty."""
    store_id = memfs_server.create_store("killed")["id"]
    for path in ("/base.md", "/open.md", "/truncated.md"):
        put(memfs_server, store_id, path, "base")
    mnt = mounter.mount_one(store_id)
    (mnt / "new.md").write_text("written, never synced")
    with open(mnt / "base.md", "a") as f:
        f.write("+appended")
    held = []
    try:
        held.append(os.open(mnt / "open.md", os.O_WRONLY | os.O_TRUNC))
        assert os.write(held[-1], b"rewritten, still open") == 21
        held.append(os.open(mnt / "truncated.md", os.O_WRONLY | os.O_TRUNC))
        for pid in mounter.store_pids():
            os.kill(pid, signal.SIGKILL)
    finally:
        for fd in held:
            with contextlib.suppress(OSError):
                os.close(fd)
    deadline = time.monotonic() + 10
    while mounter.store_pids() and time.monotonic() < deadline:
        time.sleep(0.05)
    base = {"/base.md": "base", "/open.md": "base", "/truncated.md": "base"}
    assert store_contents(memfs_server, store_id) == base
    mnt = mounter.mount_one(store_id)
    assert (mnt / "new.md").read_text() == "written, never synced"
    assert (mnt / "base.md").read_text() == "base+appended"
    assert (mnt / "open.md").read_text() == "rewritten, still open"
    assert (mnt / "truncated.md").read_text() == ""
    mounter.unmount(mnt)
    assert store_contents(memfs_server, store_id) == {
        "/base.md": "base+appended",
        "/new.md": "written, never synced",
        "/open.md": "rewritten, still open",
        "/truncated.md": "",
    }


def test_what_fsync_returned_for_survives_a_kill_before_close(mounted, mounter, memfs_server):
    """SIGKILL right after fsync() returns, the file still open: no close, no
    batch save, no checkpoint. The next mount shows the content, size and
    mtime the file had when fsync returned."""
    store_id, mnt = mounted
    fd = os.open(mnt / "synced.md", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"first")
        time.sleep(0.01)
        os.pwrite(fd, b", then more", 5)
        os.fsync(fd)
        st = os.fstat(fd)
        for pid in mounter.store_pids():
            os.kill(pid, signal.SIGKILL)
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
    deadline = time.monotonic() + 10
    while mounter.store_pids() and time.monotonic() < deadline:
        time.sleep(0.05)
    mnt = mounter.mount_one(store_id)
    back = (mnt / "synced.md").stat()
    assert (mnt / "synced.md").read_bytes() == b"first, then more"
    assert (back.st_size, back.st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    mounter.unmount(mnt)
    assert store_contents(memfs_server, store_id) == {"/synced.md": "first, then more"}


def test_times_and_over_long_names_behave_as_on_ext4(mounter, memfs_server):
    """What pjdfstest's utimensat, open, unlink, rename and *_/02.t files check:
    access times set apart from modification times (kept across a remount, not
    moved by reads), a folder's change time moved by every name made, removed
    or renamed in it, and ENAMETOOLONG (not ENOENT) for a name over 255 bytes."""
    store_id = memfs_server.create_store("times")["id"]
    mnt = mounter.mount_one(store_id)
    f = mnt / "f.md"
    f.write_text("hello")
    os.utime(f, ns=(1_900_000_000_000_000_000, 1_950_000_000_000_000_000))
    assert f.read_text() == "hello"
    st = os.stat(f)
    assert (st.st_atime_ns, st.st_mtime_ns) == (
        1_900_000_000_000_000_000,
        1_950_000_000_000_000_000,
    )

    # Past what 64 bits of nanoseconds hold, a time is clamped, as ext4 clamps
    # past 2446; the file goes on being written and synced.
    os.utime(f, ns=(-(2**64), 2**64))
    st = os.stat(f)
    assert (st.st_atime_ns, st.st_mtime_ns) == (-(2**63), 2**63 - 1)
    f.write_text("written after")
    mounter.sync(mnt)
    assert store_contents(memfs_server, store_id)["/f.md"] == "written after"
    os.utime(f, ns=(1_900_000_000_000_000_000, 1_950_000_000_000_000_000))

    d = mnt / "d"
    d.mkdir()
    for change in (
        lambda: (d / "a").write_text("a"),
        lambda: os.rename(d / "a", d / "b"),
        lambda: os.rename(d / "b", mnt / "b"),
        lambda: os.rename(mnt / "b", d / "c"),
        lambda: os.unlink(d / "c"),
        lambda: os.mkdir(d / "sub"),
        lambda: os.rmdir(d / "sub"),
    ):
        before = os.stat(d)
        time.sleep(0.01)
        change()
        after = os.stat(d)
        assert after.st_mtime_ns > before.st_mtime_ns
        assert after.st_ctime_ns > before.st_ctime_ns

    long_name = "x" * 256
    for call in (
        os.stat,
        os.unlink,
        os.rmdir,
        lambda p: os.truncate(p, 0),
        lambda p: os.chmod(p, 0o600),
    ):
        assert errno_of(call, mnt / long_name) == errno.ENAMETOOLONG
    assert errno_of(os.rename, mnt / long_name, mnt / "y") == errno.ENAMETOOLONG

    mounter.unmount(mnt)
    mnt = mounter.mount_one(store_id)
    st = os.stat(mnt / "f.md")
    assert (st.st_atime_ns, st.st_mtime_ns) == (
        1_900_000_000_000_000_000,
        1_950_000_000_000_000_000,
    )


def test_an_editor_save_killed_right_after_fsync_and_rename_loses_nothing(
    mounted, mounter, memfs_server
):
    """The save that fsync() carries in the journal (write temp, fsync, rename
    over), then SIGKILL before housekeeping made the content files durable, and
    a write after the fsync: the next mount shows the saved file, the later
    write included, and the store gets it."""
    store_id, mnt = mounted
    (mnt / "notes.md").write_text("old")
    for i in range(3):
        with open(mnt / f".notes.md.swp{i}", "w") as f:
            f.write(f"saved {i}")
            f.flush()
            os.fsync(f.fileno())
        os.rename(mnt / f".notes.md.swp{i}", mnt / "notes.md")
    with open(mnt / "notes.md", "a") as f:
        f.write(", then appended")
    for pid in mounter.store_pids():
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while mounter.store_pids() and time.monotonic() < deadline:
        time.sleep(0.05)
    mnt = mounter.mount_one(store_id)
    assert sorted(os.listdir(mnt)) == [".anthropic-memory-store", "notes.md"]
    assert (mnt / "notes.md").read_text() == "saved 2, then appended"
    mounter.unmount(mnt)
    assert store_contents(memfs_server, store_id) == {"/notes.md": "saved 2, then appended"}
