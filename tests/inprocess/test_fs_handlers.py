"""MemoryStoreFS handlers called in-process, without a kernel: what each request
answers, and that nothing but FUSEError ever leaves a handler.

The cache underneath is a real StoreCache in a temporary folder.
"""

from __future__ import annotations

import errno
import logging
import os
import sqlite3
import stat
from types import SimpleNamespace

import pyfuse3
import pytest

from memfs.api import MARKER_NAME, MAX_CONTENT_BYTES, content_sha256
from memfs.cache import ROOT_ID, StoreCache, StoredMemory
from memfs.fs import MARKER_INODE, MemoryStoreFS

STORE = "memstore_handlers"
MARKER = MARKER_NAME.encode()


def fields(**set_: bool) -> SimpleNamespace:
    names = ("size", "mode", "mtime", "atime", "ctime", "uid", "gid")
    return SimpleNamespace(**{f"update_{n}": set_.get(n, False) for n in names})


def attr(**values: int) -> SimpleNamespace:
    base = {"st_size": 0, "st_mode": 0, "st_mtime_ns": 0, "st_uid": 0, "st_gid": 0}
    return SimpleNamespace(**{**base, **values})


async def errno_of(call) -> int:
    with pytest.raises(pyfuse3.FUSEError) as info:
        await call
    return info.value.errno


@pytest.fixture
def cache(tmp_path):
    c = StoreCache(str(tmp_path), STORE)
    content = b"stored text"
    c.place_remote(
        StoredMemory("mem_1", "/dir/stored.md", content_sha256(content), len(content)), content
    )
    yield c
    c.close()


@pytest.fixture
def fs(cache) -> MemoryStoreFS:
    return MemoryStoreFS(cache)


@pytest.fixture
def ro_fs(cache) -> MemoryStoreFS:
    return MemoryStoreFS(cache, read_only=True)


async def new_file(fs: MemoryStoreFS, name: bytes, content: bytes = b"", parent: int = ROOT_ID):
    info, attrs = await fs.create(parent, name, 0o100644, os.O_WRONLY | os.O_CREAT, None)
    if content:
        assert await fs.write(info.fh, 0, content) == len(content)
    return info.fh, attrs.st_ino


async def test_an_append_handle_writes_at_the_end_whatever_offset_the_kernel_sends(fs):
    """The kernel puts an `O_APPEND` write at the size it last heard of; a pull may
    have shortened the file since, and the gap was written as zero bytes."""
    fh, ino = await new_file(fs, b"log.md", b"a line the pull replaced\n")
    await fs.release(fh)
    fs.cache.truncate(ino, 6)
    info = await fs.open(ino, os.O_WRONLY | os.O_APPEND, None)
    assert await fs.write(info.fh, 25, b"more\n") == 5
    await fs.release(info.fh)
    info = await fs.open(ino, os.O_RDONLY, None)
    assert await fs.read(info.fh, 0, 100) == b"a line" + b"more\n"
    await fs.release(info.fh)


async def test_files_read_write_stat_and_keep_mode_and_times(fs):
    fh, ino = await new_file(fs, b"a.md", b"hello world")
    assert await fs.read(fh, 6, 100) == b"world"
    await fs.write(fh, 20, b"!")  # past the end: a hole of zeros
    assert await fs.read(fh, 0, 100) == b"hello world" + b"\0" * 9 + b"!"
    await fs.fsync(fh, False)
    await fs.release(fh)
    assert (await fs.lookup(ROOT_ID, b"a.md")).st_ino == ino
    a = await fs.setattr(ino, attr(st_mode=0o100600), fields(mode=True), None, None)
    assert stat.S_IMODE(a.st_mode) == 0o600
    a = await fs.setattr(ino, attr(st_mtime_ns=1_000_000_000), fields(mtime=True), None, None)
    assert a.st_mtime_ns == 1_000_000_000
    a = await fs.setattr(ino, attr(st_size=5), fields(size=True), None, None)
    assert a.st_size == 5
    a = await fs.getattr(ino)
    assert (a.st_size, stat.S_IMODE(a.st_mode), a.st_nlink) == (5, 0o600, 1)
    info = await fs.open(ino, os.O_RDWR | os.O_APPEND, None)
    assert await fs.read(info.fh, 0, 100) == b"hello"
    await fs.release(info.fh)
    info = await fs.open(ino, os.O_WRONLY | os.O_TRUNC, None)
    assert (await fs.getattr(ino)).st_size == 0
    await fs.release(info.fh)
    stored = await fs.lookup((await fs.lookup(ROOT_ID, b"dir")).st_ino, b"stored.md")
    info = await fs.open(stored.st_ino, os.O_RDONLY, None)
    assert await fs.read(info.fh, 0, 100) == b"stored text"
    await fs.release(info.fh)
    s = await fs.statfs(None)
    assert s.f_namemax == 255 and s.f_bsize == 4096 and s.f_ffree < s.f_files


async def test_each_refusal_has_its_errno(fs, cache):
    create = fs.create
    flags = os.O_WRONLY | os.O_CREAT
    assert await errno_of(fs.symlink(ROOT_ID, b"l", b"a", None)) == errno.EPERM
    assert await errno_of(fs.mknod(ROOT_ID, b"fifo", stat.S_IFIFO | 0o644, 0, None)) == errno.EPERM
    assert await errno_of(create(ROOT_ID, b"sock", stat.S_IFSOCK | 0o644, flags, None)) == (
        errno.EPERM
    )
    fh, ino = await new_file(fs, b"a.md", b"x")
    assert await errno_of(fs.link(ino, ROOT_ID, b"hard", None)) == errno.EPERM
    # Only memfs's own attributes, read-only; never ENOSYS, which would stop them all.
    assert await errno_of(fs.getxattr(ino, b"user.x", None)) == errno.ENODATA
    assert await errno_of(fs.setxattr(ino, b"user.x", b"1", None)) == errno.ENOTSUP
    assert await errno_of(fs.removexattr(ino, b"user.x", None)) == errno.ENOTSUP
    assert await errno_of(fs.setxattr(ino, b"user.memfs.state", b"1", None)) == errno.EPERM
    assert await errno_of(fs.removexattr(ino, b"user.memfs.state", None)) == errno.EPERM
    assert await fs.listxattr(ino, None) == [b"user.memfs.state"]
    assert await fs.getxattr(ino, b"user.memfs.state", None) == b"pending"
    for bad in (
        b"tab\there",
        b"bell\x07",
        "cafe\u0301".encode(),
        b"bad\xffutf8",
        b"zw\xe2\x80\x8b",
    ):
        assert await errno_of(create(ROOT_ID, bad, 0o644, flags, None)) == errno.EINVAL, bad
        assert await errno_of(fs.mkdir(ROOT_ID, bad, 0o755, None)) == errno.EINVAL, bad
        assert await errno_of(fs.rename(ROOT_ID, b"a.md", ROOT_ID, bad, 0, None)) == errno.EINVAL
    assert await errno_of(create(ROOT_ID, b"n" * 256, 0o644, flags, None)) == errno.ENAMETOOLONG
    await new_file(fs, b"n" * 255)
    parent = ROOT_ID
    for _ in range(4):
        parent = (await fs.mkdir(parent, b"d" * 250, 0o755, None)).st_ino
    long_name = b"f" * 20  # the path would be 4 * 251 + 21 = 1,025 bytes
    assert await errno_of(create(parent, long_name, 0o644, flags, None)) == errno.ENAMETOOLONG
    await new_file(fs, b"f" * 19, parent=parent)  # exactly 1,024 bytes
    assert await errno_of(fs.write(fh, MAX_CONTENT_BYTES, b"y")) == errno.EFBIG
    assert await errno_of(fs.write(fh, MAX_CONTENT_BYTES - 1, b"yz")) == errno.EFBIG
    assert await fs.write(fh, MAX_CONTENT_BYTES - 1, b"y") == 1
    assert (await fs.getattr(ino)).st_size == MAX_CONTENT_BYTES
    too_big = attr(st_size=MAX_CONTENT_BYTES + 1)
    assert await errno_of(fs.setattr(ino, too_big, fields(size=True), None, None)) == errno.EFBIG
    assert await errno_of(create(ROOT_ID, b"a.md", 0o644, flags | os.O_EXCL, None)) == (
        errno.EEXIST
    )
    assert await errno_of(fs.mkdir(ROOT_ID, b"dir", 0o755, None)) == errno.EEXIST
    assert await errno_of(fs.lookup(ROOT_ID, b"missing")) == errno.ENOENT
    assert await errno_of(fs.getattr(999_999)) == errno.ENOENT
    assert await errno_of(fs.rmdir(ROOT_ID, b"dir", None)) == errno.ENOTEMPTY
    assert await errno_of(fs.rmdir(ROOT_ID, b"a.md", None)) == errno.ENOTDIR
    assert await errno_of(fs.unlink(ROOT_ID, b"dir", None)) == errno.EISDIR
    assert await errno_of(fs.open((await fs.lookup(ROOT_ID, b"dir")).st_ino, 0, None)) == (
        errno.EISDIR
    )
    dir_ino = (await fs.lookup(ROOT_ID, b"dir")).st_ino
    assert await errno_of(fs.rename(ROOT_ID, b"dir", dir_ino, b"inside", 0, None)) == errno.EINVAL
    assert (
        await errno_of(fs.rename(ROOT_ID, b"a.md", ROOT_ID, b"dir", pyfuse3.RENAME_NOREPLACE, None))
        == errno.EEXIST
    )
    assert (
        await errno_of(
            fs.rename(ROOT_ID, b"a.md", ROOT_ID, b"n" * 255, pyfuse3.RENAME_EXCHANGE, None)
        )
        == errno.EINVAL
    )
    assert await errno_of(fs.rename(ROOT_ID, b"a.md", ROOT_ID, b"dir", 0, None)) == errno.EISDIR
    assert await errno_of(fs.read(12345, 0, 10)) == errno.EBADF
    ro = await fs.open(ino, os.O_RDONLY, None)
    assert await errno_of(fs.write(ro.fh, 0, b"z")) == errno.EBADF
    await fs.release(ro.fh)
    await fs.release(fh)
    assert cache.find("/a.md").size == MAX_CONTENT_BYTES


async def test_read_only_store_refuses_every_change_with_erofs(ro_fs, cache):
    fs = ro_fs
    dir_ino = cache.find("/dir").id
    file_ino = cache.find("/dir/stored.md").id
    flags = os.O_WRONLY | os.O_CREAT
    refusals = {
        "create": fs.create(ROOT_ID, b"new", 0o644, flags, None),
        "mkdir": fs.mkdir(ROOT_ID, b"new", 0o755, None),
        "rmdir": fs.rmdir(ROOT_ID, b"dir", None),
        "unlink": fs.unlink(dir_ino, b"stored.md", None),
        "rename": fs.rename(dir_ino, b"stored.md", ROOT_ID, b"x", 0, None),
        "symlink": fs.symlink(ROOT_ID, b"l", b"x", None),
        "link": fs.link(file_ino, ROOT_ID, b"l", None),
        "mknod": fs.mknod(ROOT_ID, b"p", stat.S_IFIFO | 0o644, 0, None),
        "open for writing": fs.open(file_ino, os.O_WRONLY, None),
        "open for reading and writing": fs.open(file_ino, os.O_RDWR, None),
        "open with O_TRUNC": fs.open(file_ino, os.O_RDONLY | os.O_TRUNC, None),
        "truncate": fs.setattr(file_ino, attr(st_size=0), fields(size=True), None, None),
        "chmod": fs.setattr(file_ino, attr(st_mode=0o600), fields(mode=True), None, None),
        "utimens": fs.setattr(file_ino, attr(st_mtime_ns=1), fields(mtime=True), None, None),
        "touch": fs.setattr(file_ino, attr(), fields(atime=True), None, None),
        "access W_OK": fs.access(file_ino, os.W_OK, None),
        "chmod the marker": fs.setattr(MARKER_INODE, attr(), fields(mode=True), None, None),
    }
    got = {what: await errno_of(call) for what, call in refusals.items()}
    assert got == {what: errno.EROFS for what in refusals}
    info = await fs.open(file_ino, os.O_RDONLY, None)
    assert await fs.read(info.fh, 0, 100) == b"stored text"
    assert await errno_of(fs.write(info.fh, 0, b"x")) == errno.EROFS
    await fs.release(info.fh)
    a = await fs.getattr(file_ino)
    assert stat.S_IMODE(a.st_mode) & 0o222 == 0
    assert await fs.access(file_ino, os.R_OK, None)
    assert cache.changes() == [] and cache.tombstones == {}
    assert cache.read_content(cache.find("/dir/stored.md")) == b"stored text"


async def test_the_marker_is_listed_readable_and_untouchable(fs, cache, monkeypatch):
    a = await fs.lookup(ROOT_ID, MARKER)
    assert a.st_ino == MARKER_INODE and stat.S_IMODE(a.st_mode) == 0o444
    assert a.st_size == len(f"version 1\n{STORE}")
    listed: list[tuple[bytes, int]] = []

    def reply(token, name, attrs, offset):
        listed.append((name, attrs.st_ino))
        return True

    monkeypatch.setattr(pyfuse3, "readdir_reply", reply)
    fh = await fs.opendir(ROOT_ID, None)
    await fs.readdir(fh, 0, None)
    assert listed[0] == (MARKER, MARKER_INODE)
    await fs.releasedir(fh)
    info = await fs.open(MARKER_INODE, os.O_RDONLY, None)
    assert await fs.read(info.fh, 0, 4096) == f"version 1\n{STORE}".encode()
    assert await errno_of(fs.write(info.fh, 0, b"x")) == errno.EPERM
    await fs.release(info.fh)
    flags = os.O_WRONLY | os.O_CREAT
    assert await errno_of(fs.open(MARKER_INODE, os.O_WRONLY, None)) == errno.EPERM
    assert await errno_of(fs.open(MARKER_INODE, os.O_RDONLY | os.O_TRUNC, None)) == errno.EPERM
    assert await errno_of(fs.create(ROOT_ID, MARKER, 0o644, flags | os.O_EXCL, None)) == (
        errno.EEXIST
    )
    assert await errno_of(fs.create(ROOT_ID, MARKER, 0o644, flags, None)) == errno.EPERM
    assert await errno_of(fs.unlink(ROOT_ID, MARKER, None)) == errno.EPERM
    assert await errno_of(fs.rmdir(ROOT_ID, MARKER, None)) == errno.ENOTDIR
    assert await errno_of(fs.mkdir(ROOT_ID, MARKER, 0o755, None)) == errno.EEXIST
    assert await errno_of(fs.rename(ROOT_ID, MARKER, ROOT_ID, b"m", 0, None)) == errno.EPERM
    _, _ = await new_file(fs, b"other")
    assert await errno_of(fs.rename(ROOT_ID, b"other", ROOT_ID, MARKER, 0, None)) == errno.EPERM
    assert await errno_of(fs.setattr(MARKER_INODE, attr(), fields(mode=True), None, None)) == (
        errno.EPERM
    )
    dir_ino = cache.find("/dir").id
    await new_file(fs, MARKER, b"deeper is fine", parent=dir_ino)
    assert cache.find("/dir/" + MARKER_NAME) is not None
    assert [c.path for c in cache.changes()] == ["/other", "/dir/" + MARKER_NAME]


async def test_an_unexpected_exception_becomes_eio_and_the_next_call_works(
    fs, cache, caplog, expect_log
):
    expect_log("memfs.fs", "unexpected error in a filesystem handler", level=logging.ERROR, count=1)
    expect_log("memfs.fs", "/dir/stored.md has no content here and no store to fetch it from")

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in the cache")

    real_create = cache.create
    cache.create = broken
    flags = os.O_WRONLY | os.O_CREAT
    assert await errno_of(fs.create(ROOT_ID, b"a.md", 0o644, flags, None)) == errno.EIO
    assert "a bug in the cache" in caplog.text
    cache.create = real_create
    fh, _ = await new_file(fs, b"a.md", b"fine")
    assert await fs.read(fh, 0, 10) == b"fine"
    await fs.release(fh)
    stored = cache.find("/dir/stored.md")
    cache.journal.drop_content(stored.id)
    stored.cached = False  # content gone and no store to fetch it from
    assert await errno_of(fs.open(stored.id, os.O_RDONLY, None)) == errno.EIO


async def test_unlinked_open_file_keeps_its_handle_and_inode(fs, cache):
    fh, ino = await new_file(fs, b"gone.md", b"data")
    await fs.unlink(ROOT_ID, b"gone.md", None)
    assert await errno_of(fs.lookup(ROOT_ID, b"gone.md")) == errno.ENOENT
    assert (await fs.getattr(ino)).st_nlink == 0
    await fs.write(fh, 4, b"+more")
    assert await fs.read(fh, 0, 100) == b"data+more"
    await fs.release(fh)
    assert await errno_of(fs.getattr(ino)) == errno.ENOENT
    assert cache.changes() == []


async def test_a_full_cache_disk_is_enospc_and_the_file_keeps_what_it_had(
    fs, cache, monkeypatch, expect_log
):
    """A write whose bytes the cache cannot keep (its content file meets a full
    disk, even after the room it kept is given back) fails with ENOSPC at the
    syscall, and the file shows what the cache holds: nothing is shown that a
    kill would lose. The full disk is said once; changes are taken again once
    the idle pass finds room."""
    expect_log("memfs.cache", "is full: changes to the files are refused (ENOSPC)", count=1)
    fh, ino = await new_file(fs, b"full.md", b"kept")
    pwritev = os.pwritev

    def disk_full(fd, buffers, offset):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwritev", disk_full)
    assert await errno_of(fs.write(fh, 4, b" and lost")) == errno.ENOSPC
    assert await errno_of(fs.write(fh, 100, b"far")) == errno.ENOSPC
    assert await fs.read(fh, 0, 100) == b"kept"
    assert (await fs.getattr(ino)).st_size == 4
    monkeypatch.setattr(os, "pwritev", pwritev)
    cache.drop_contents()  # the idle pass: the disk has room again
    assert await fs.write(fh, 4, b", then more") == 11
    assert await fs.read(fh, 0, 100) == b"kept, then more"
    assert cache.journal.content(ino) == b"kept, then more"
    await fs.release(fh)


async def test_a_full_disk_at_a_commit_loses_nothing(fs, cache, monkeypatch, expect_log):
    """SQLite's disk full at a commit: the change is refused (ENOSPC, the full
    disk said once), changes to the files are refused meanwhile while reads go
    on, and once there is room (the idle pass) changes are taken again."""
    expect_log("memfs.cache", "is full: changes to the files are refused (ENOSPC)", count=1)
    fh, ino = await new_file(fs, b"later.md", b"kept")
    await fs.release(fh)

    def disk_full(sql, params=()):
        if sql.startswith("INSERT INTO nodes"):
            e = sqlite3.OperationalError("database or disk is full")
            e.sqlite_errorcode = sqlite3.SQLITE_FULL
            raise e
        return db.execute(sql, params)

    class FullDisk:
        execute = staticmethod(disk_full)

        def __getattr__(self, name):
            return getattr(db, name)

    db = cache.journal.db
    with monkeypatch.context() as m:
        m.setattr(cache.journal, "db", FullDisk())
        assert await errno_of(fs.mkdir(ROOT_ID, b"folder", 0o755, None)) == errno.ENOSPC
        assert cache.disk_full
        fh = (await fs.open(ino, os.O_RDWR, None)).fh
        assert await fs.read(fh, 0, 100) == b"kept"
        assert await errno_of(fs.write(fh, 0, b"more")) == errno.ENOSPC
        await fs.release(fh)
    cache.drop_contents()
    assert not cache.disk_full
    await fs.mkdir(ROOT_ID, b"folder", 0o755, None)
    row = db.execute("SELECT name, size FROM nodes WHERE id = ?", (ino,)).fetchone()
    assert row == ("later.md", len(b"kept"))
    assert cache.journal.content(ino) == b"kept"


async def test_fsync_of_a_folder_makes_its_names_durable(fs, cache, monkeypatch):
    """A rename, then `fsync` of the folder (how a program makes a rename
    survive a power cut): the journal's WAL, which holds every name, is
    flushed before the call returns."""
    folder = cache.lookup(ROOT_ID, "dir")
    await fs.rename(folder.id, b"stored.md", folder.id, b"renamed.md", 0, None)
    wal = os.path.realpath(cache.journal.path + "-wal")
    flushed: list[str] = []
    real = os.fdatasync

    def spy(fd: int) -> None:
        flushed.append(os.path.realpath(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fdatasync", spy)
    fh = await fs.opendir(folder.id, None)
    await fs.fsyncdir(fh, False)
    assert flushed == [wal]
