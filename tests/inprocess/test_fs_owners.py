"""Owners in the filesystem handlers, without a kernel: who owns what is made,
what `chown` may change when the kernel does not check (no `--allow-other`:
only the mounting user reaches the mount, and memfs refuses what ext4 refuses
to a caller who is not root), and what the journal keeps."""

from __future__ import annotations

import errno
import os
import stat
import subprocess
from types import SimpleNamespace

import pyfuse3
import pytest

from memfs.cache import ROOT_ID, StoreCache
from memfs.fs import MARKER_INODE, MemoryStoreFS

STORE = "memstore_owners"
FLAGS = os.O_WRONLY | os.O_CREAT


def ctx(uid: int, gid: int | None = None, pid: int | None = None) -> SimpleNamespace:
    """A request from `uid` made by the process `pid` (its supplementary groups)."""
    return SimpleNamespace(
        uid=uid, gid=uid if gid is None else gid, pid=pid or os.getpid(), umask=0o022
    )


@pytest.fixture
def in_group_4343():
    """A process whose supplementary groups are [4343], as /proc shows them."""
    if os.geteuid() != 0:
        pytest.skip("only root starts a process with other groups")
    p = subprocess.Popen(["sleep", "60"], extra_groups=[4343])
    yield p.pid
    p.kill()
    p.wait()


def chown_fields(uid: bool = True, gid: bool = True) -> SimpleNamespace:
    names = ("size", "mode", "mtime", "atime", "ctime")
    return SimpleNamespace(**{f"update_{n}": False for n in names}, update_uid=uid, update_gid=gid)


def ids(uid: int = -1, gid: int = -1) -> SimpleNamespace:
    return SimpleNamespace(st_uid=uid, st_gid=gid, st_mode=0, st_size=0)


async def chown(fs: MemoryStoreFS, ino: int, uid: int | None, gid: int | None, who) -> int:
    """0, or the errno the handler answered."""
    try:
        await fs.setattr(
            ino, ids(uid or 0, gid or 0), chown_fields(uid is not None, gid is not None), None, who
        )
    except pyfuse3.FUSEError as e:
        return e.errno
    return 0


@pytest.fixture
def cache(tmp_path):
    c = StoreCache(str(tmp_path), STORE)
    yield c
    c.close()


async def test_without_kernel_checks_chown_is_refused_as_ext4_refuses_a_user(cache, in_group_4343):
    fs = MemoryStoreFS(cache, uid=4321, gid=8765)
    info, a = await fs.create(ROOT_ID, b"mine.md", 0o100644, FLAGS, ctx(1000))
    await fs.release(info.fh)
    ino = a.st_ino
    assert (a.st_uid, a.st_gid) == (1000, 1000)
    user, stranger = ctx(1000, pid=in_group_4343), ctx(2000)
    own_group = 4343
    assert await chown(fs, ino, 2000, None, user) == errno.EPERM  # give it away
    assert await chown(fs, ino, 1000, None, user) == 0  # "change" to what it is
    assert await chown(fs, ino, None, 4242, user) == errno.EPERM  # a group not theirs
    assert await chown(fs, ino, None, own_group, user) == 0
    assert await chown(fs, ino, None, 2000, stranger) == errno.EPERM  # not the owner
    assert await chown(fs, ino, 2000, None, stranger) == errno.EPERM
    assert ((await fs.getattr(ino)).st_uid, (await fs.getattr(ino)).st_gid) == (1000, own_group)
    # root may do anything, and so may a request without a caller (the mounting user's)
    assert await chown(fs, ino, 2000, 3000, ctx(0)) == 0
    assert await chown(fs, ino, 5, 6, None) == 0
    a = await fs.getattr(ino)
    assert (a.st_uid, a.st_gid) == (5, 6)


async def test_with_kernel_checks_memfs_leaves_the_refusals_to_the_kernel(cache):
    fs = MemoryStoreFS(cache, kernel_checks=True)
    info, a = await fs.create(ROOT_ID, b"f.md", 0o100644, FLAGS, ctx(1000))
    await fs.release(info.fh)
    assert await chown(fs, a.st_ino, 2000, 2000, ctx(1000)) == 0


async def test_new_nodes_belong_to_their_maker_in_a_set_gid_folders_group(cache):
    fs = MemoryStoreFS(cache, uid=4321, gid=8765)
    # a request without a caller makes nodes of the mount's default
    d = await fs.mkdir(ROOT_ID, b"shared", 0o755, None)
    assert (d.st_uid, d.st_gid) == (4321, 8765)
    await chown(fs, d.st_ino, None, 4242, None)
    attr = SimpleNamespace(st_mode=stat.S_IFDIR | 0o2775)
    fields = SimpleNamespace(
        update_size=False, update_mode=True, update_mtime=False, update_atime=False,
        update_ctime=False, update_uid=False, update_gid=False,
    )  # fmt: skip
    await fs.setattr(d.st_ino, attr, fields, None, None)
    sub = await fs.mkdir(d.st_ino, b"sub", 0o755, ctx(1000))
    info, f = await fs.create(d.st_ino, b"f.md", 0o100644, FLAGS, ctx(1000))
    await fs.release(info.fh)
    assert (sub.st_uid, sub.st_gid) == (1000, 4242)
    assert sub.st_mode & stat.S_ISGID
    assert (f.st_uid, f.st_gid) == (1000, 4242)
    assert not f.st_mode & stat.S_ISGID


async def test_owners_and_the_markers_owner_are_kept_in_the_journal(tmp_path):
    cache = StoreCache(str(tmp_path), STORE)
    fs = MemoryStoreFS(cache)
    info, a = await fs.create(ROOT_ID, b"f.md", 0o100644, FLAGS, None)
    await fs.release(info.fh)
    assert await chown(fs, a.st_ino, 1234, 2345, None) == 0
    assert await chown(fs, MARKER_INODE, 1234, 2345, None) == 0
    assert await chown(fs, ROOT_ID, 1234, None, None) == 0
    cache.close()

    cache = StoreCache(str(tmp_path), STORE)
    try:
        fs = MemoryStoreFS(cache, uid=7, gid=8)
        got = [await fs.getattr(i) for i in (a.st_ino, MARKER_INODE, ROOT_ID)]
        assert [(x.st_uid, x.st_gid) for x in got] == [(1234, 2345), (1234, 2345), (1234, 8)]
        # the marker's mode never changes
        mode = SimpleNamespace(st_mode=stat.S_IFREG | 0o666)
        fields = chown_fields(False, False)
        fields.update_mode = True
        with pytest.raises(pyfuse3.FUSEError) as e:
            await fs.setattr(MARKER_INODE, mode, fields, None, None)
        assert e.value.errno == errno.EPERM
    finally:
        cache.close()


async def test_a_read_only_store_refuses_chown_with_erofs(cache):
    fs = MemoryStoreFS(cache, read_only=True)
    assert await chown(fs, ROOT_ID, 1, None, ctx(0)) == errno.EROFS
    assert await chown(fs, MARKER_INODE, 1, None, ctx(0)) == errno.EROFS
