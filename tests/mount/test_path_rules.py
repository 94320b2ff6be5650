"""The path rules the SDK adds (at most 20 segments, no U+2028 or U+2029),
refused where a program makes the name, at the syscall, on a real mount of a
real `memfs serve`, the same as `memfs serve` refuses them: no file is left
that the store would refuse at the next sync."""

from __future__ import annotations

import errno
import os

import pytest

from memfs.testing import FakeStore


def errno_of(fn, *args) -> int:
    with pytest.raises(OSError) as info:
        fn(*args)
    return info.value.errno


def test_paths_the_sdk_calls_invalid_are_refused_at_the_syscall(mounted, mounter, memfs_server):
    store_id, mnt = mounted
    for separator in ("\u2028", "\u2029"):
        target = mnt / f"line{separator}break.md"
        assert errno_of(os.open, target, os.O_WRONLY | os.O_CREAT) == errno.EINVAL
        assert errno_of(os.mkdir, target) == errno.EINVAL
    deep = mnt.joinpath(*["d"] * 19)
    deep.mkdir(parents=True)
    (deep / "twentieth.md").write_text("20 segments")
    assert errno_of(os.mkdir, deep / "d") == errno.ENAMETOOLONG  # could hold no memory
    (mnt / "e").mkdir()
    assert errno_of(os.rename, mnt / "d", mnt / "e" / "d") == errno.ENAMETOOLONG
    mounter.sync(mnt)
    assert FakeStore(memfs_server, store_id).memories() == {
        "/d" * 19 + "/twentieth.md": "20 segments"
    }
