"""The store process's teardown when something fails after the store is
mounted: the kernel mount goes, the folders memfs made go (and only those),
the cache is released and the runtime folder is left empty, and the
operator reads one sentence."""

from __future__ import annotations

import os

from memfs.control import socket_path
from tests.support.mounts import memfs_mounts_under


def test_a_failure_after_mounting_unmounts_and_removes_only_the_folder_memfs_made(
    mounter, memfs_server
):
    store_id = memfs_server.create_store("teardown")["id"]
    # A folder where the control socket goes: the store process fails to bind
    # it after pyfuse3 mounted the folder.
    mounter.runtime_dir = mounter.tmp / "blocked-run"
    mounter.runtime_dir.mkdir(mode=0o700)
    socket = socket_path(str(mounter.runtime_dir), store_id, str(mounter.cache_dir))
    os.mkdir(socket)
    kept = mounter.root / "kept"
    kept.mkdir()
    parent = kept / "made"
    path = parent / "s"
    r = mounter.mount(f"{store_id}={path}", check=False)

    assert r.returncode == 1, r.stderr
    assert "cannot open the control socket" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    log = (mounter.cache_dir / store_id / "memfs.log").read_text()
    assert "Traceback" not in log, log
    assert memfs_mounts_under(mounter.tmp) == []
    assert not path.exists()
    assert not parent.exists()  # made by `mkdir -p` for the mount folder: it goes too
    assert kept.is_dir()  # not made by memfs: it stays
    assert os.listdir(mounter.runtime_dir) == [os.path.basename(socket)]  # no state file
    assert not mounter.store_pids()

    # Nothing holds the cache or the path: the same store mounts there at once.
    mounter.runtime_dir = mounter.tmp / "run"
    mounter.mount(f"{store_id}={path}")
    (path / "after.md").write_text("mounted again")
    assert mounter.unmount(path).returncode == 0
    assert not path.exists()
