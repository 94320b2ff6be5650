"""Each file's sync state as read-only `user.memfs.*` extended attributes, on
real mounts of a real `memfs serve` store."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from memfs.testing import FakeStore
from tests.mount.test_confirmed_saves import QUIET, changed_on_both_sides, stored, sync_files
from tests.support.faults import FaultProxyProcess

MARKER = ".anthropic-memory-store"


def xattr(path: Path, name: str) -> str:
    return os.getxattr(path, f"user.memfs.{name}").decode()


def errno_of(fn, *args) -> int:
    with pytest.raises(OSError) as info:
        fn(*args)
    return info.value.errno


def test_synced_and_pending_files_show_the_store_s_memory(mounter, memfs_server):
    store_id = memfs_server.create_store("s")["id"]
    mnt = mounter.mount_one(store_id, extra=QUIET)
    f = mnt / "a.md"
    f.write_text("one\n")
    assert xattr(f, "state") == "pending"
    assert os.listxattr(f) == ["user.memfs.state"]
    assert errno_of(os.getxattr, f, "user.memfs.memory_id") == errno.ENODATA
    assert errno_of(os.getxattr, f, "user.memfs.sha256") == errno.ENODATA

    assert sync_files(mounter, f).returncode == 0
    memory = stored(memfs_server, store_id, "/a.md")
    assert xattr(f, "state") == "synced"
    assert xattr(f, "memory_id") == memory["id"]
    assert xattr(f, "sha256") == memory["content_sha256"]
    assert os.listxattr(f) == ["user.memfs.state", "user.memfs.memory_id", "user.memfs.sha256"]

    f.write_text("two\n")
    # Pending again; the store still holds the first version.
    assert xattr(f, "state") == "pending"
    assert xattr(f, "sha256") == memory["content_sha256"]


def test_refused_and_local_only_files_say_why(mounter, memfs_server):
    store_id = memfs_server.create_store("s")["id"]
    with FaultProxyProcess(memfs_server.url) as proxy:
        mnt = mounter.mount_one(store_id, extra=(*QUIET, "--api-url", proxy.url))
        (mnt / "bin.md").write_bytes(b"\xff")
        (mnt / "a.md").write_text("a\n")
        sync_files(mounter, mnt / "a.md")
        (mnt / "a.md").write_text("a, refused\n")
        proxy.set(status=400, status_rate=1.0, match_method="POST", match_path="/memories/mem")
        sync_files(mounter, mnt / "bin.md", mnt / "a.md")
        assert xattr(mnt / "bin.md", "state") == "local-only: its content is not UTF-8 text"
        assert xattr(mnt / "a.md", "state").startswith("refused: the store refused it: ")
        proxy.set(status_rate=0.0)
        (mnt / "a.md").write_text("a again\n")
        assert xattr(mnt / "a.md", "state") == "pending"
        mounter.unmount(mnt)


def test_an_overruled_file_names_its_kept_copy_until_written_again(mounter, memfs_server):
    store_id, mnt, f = changed_on_both_sides(mounter, memfs_server, "theirs\n", by_pass=True)
    mounter.sync(mnt)

    kept = xattr(f, "kept_copy")
    assert Path(kept).is_absolute() and Path(kept).read_text() == "mine\n"
    assert (
        xattr(f, "state") == f"overruled: the store's version replaced a local edit, kept at {kept}"
    )
    memory = stored(memfs_server, store_id, "/a.md")
    assert xattr(f, "memory_id") == memory["id"]
    assert xattr(f, "sha256") == memory["content_sha256"]
    assert os.listxattr(f) == [
        "user.memfs.state",
        "user.memfs.memory_id",
        "user.memfs.sha256",
        "user.memfs.kept_copy",
    ]
    f.write_text("mine again\n")
    assert xattr(f, "state") == "pending"
    assert errno_of(os.getxattr, f, "user.memfs.kept_copy") == errno.ENODATA


def test_folders_have_none_and_the_marker_is_local_only(mounted):
    _, mnt = mounted
    (mnt / "d").mkdir()
    assert os.listxattr(mnt / "d") == []
    assert os.listxattr(mnt) == []
    assert errno_of(os.getxattr, mnt / "d", "user.memfs.state") == errno.ENODATA
    assert xattr(mnt / MARKER, "state") == "local-only: the store's marker: it is never a memory"


def test_a_read_only_store_s_files_are_synced(mounter, memfs_server):
    store_id = memfs_server.create_store("s")["id"]
    memory_id = FakeStore(memfs_server, store_id).put("/a.md", "x\n")
    mnt = mounter.mount_one(store_id, read_only=True)
    assert xattr(mnt / "a.md", "state") == "synced"
    assert xattr(mnt / "a.md", "memory_id") == memory_id


def test_the_attributes_cannot_be_set_or_removed(mounted):
    _, mnt = mounted
    f = mnt / "a.md"
    f.write_text("a\n")
    assert errno_of(os.setxattr, f, "user.memfs.state", b"synced") == errno.EPERM
    assert errno_of(os.removexattr, f, "user.memfs.state") == errno.EPERM
    assert errno_of(os.setxattr, f, "user.k", b"v") == errno.ENOTSUP
    assert errno_of(os.removexattr, f, "user.k") == errno.ENOTSUP
    assert errno_of(os.getxattr, f, "user.k") == errno.ENODATA
    # Still so after a refusal: the kernel keeps asking (no ENOSYS was answered).
    assert errno_of(os.setxattr, f, "user.memfs.x", b"v") == errno.EPERM
    assert xattr(f, "state") == "pending"
