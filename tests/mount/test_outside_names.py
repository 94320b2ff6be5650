"""Names that come from outside memfs, through real mounts: a store id (from
`--store` or a resources file) that is not the API's form is refused before
anything is created, and a stale mount at a path with a space and a
non-ASCII letter is still recognised as memfs's own."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from memfs.testing import FakeStore
from tests.support.mounts import Mounter, memfs_mounts_under

pytestmark = pytest.mark.fuse


def _tree(root: Path) -> set[str]:
    """Every path under `root`, relative to it."""
    out = set()
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            out.add(os.path.relpath(os.path.join(folder, name), root))
    return out


def _wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


@pytest.mark.parametrize(
    "store_id",
    ["../escaped-store", "memstore_a/../../escaped-store", "memstore_x,allow_other", "escaped"],
)
def test_a_store_id_not_of_the_api_form_is_refused_before_anything_is_made(
    mounter: Mounter, memfs_server, store_id
):
    """`--store ../escaped-store` once made the journal, its redo log and
    `conflicts/` beside the cache folder; `,` would add mount options to
    `fsname=`. Now the mount is refused with one sentence (exit 2, as for
    other configuration errors) and nothing is created anywhere."""
    memfs_server.create_store("a real one")
    before = _tree(mounter.tmp)
    r = mounter.mount(f"{store_id}={mounter.root / 's'}", check=False)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("memfs: ") and "store id" in lines[0], r.stderr
    assert "memstore_" in lines[0], r.stderr
    assert _tree(mounter.tmp) == before
    assert memfs_mounts_under(mounter.tmp) == []


def test_a_resources_file_with_a_store_id_not_of_the_api_form_is_refused(
    mounter: Mounter, memfs_server
):
    good = memfs_server.create_store("good")["id"]
    resources = mounter.tmp / "resources.json"
    resources.write_text(
        json.dumps(
            [
                {"type": "memory_store", "memory_store_id": good, "mount_path": "/x/good"},
                {"type": "memory_store", "memory_store_id": "../../escaped-store"},
            ]
        )
    )
    before = _tree(mounter.tmp)
    args = ["mount", "--daemon", "--root", str(mounter.root), "--cache-dir", str(mounter.cache_dir)]
    args += ["--token-file", str(mounter.token_file), "--resources", str(resources)]
    r = mounter.memfs(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "resources[1]" in lines[0] and "store id" in lines[0], r.stderr
    assert _tree(mounter.tmp) == before
    assert memfs_mounts_under(mounter.tmp) == []


def test_an_entry_of_the_cache_folder_that_is_a_symlink_is_never_written_through(
    mounter: Mounter, memfs_server
):
    """The journal's folder is opened once, checked, and its files reached
    through that descriptor: a symlink standing where the journal goes (SQLite
    follows symlinks, and made its database and WAL where it pointed) is
    refused, not written through."""
    store_id = memfs_server.create_store("planted")["id"]
    folder = mounter.cache_dir / store_id
    folder.mkdir(parents=True, mode=0o700)
    os.chmod(mounter.cache_dir, 0o700)
    victim = mounter.tmp / "victim"
    victim.write_bytes(b"")
    os.symlink(victim, folder / "journal.sqlite3")
    r = mounter.mount(f"{store_id}={mounter.root / 's'}", check=False)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "journal.sqlite3 is not a file of memfs's own" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert victim.read_bytes() == b""
    assert sorted(p.name for p in mounter.tmp.iterdir() if p.name.startswith("victim")) == [
        "victim"
    ]
    assert memfs_mounts_under(mounter.tmp) == []


def test_a_stale_mount_at_a_path_with_a_space_and_an_accent_is_cleaned_up(
    mounter: Mounter, memfs_server
):
    """/proc/mounts writes a space as `\\040` and other bytes as they are (UTF-8
    here): decoded as Latin-1, `Café Notes` was not the path, the stale mount
    was not memfs's own, and the store could not be mounted again until
    someone ran `umount -l`. `memfs unmount` finds it too."""
    store_id = memfs_server.create_store("Café Notes")["id"]
    path = mounter.root / "Café Notes"
    mounter.mount(f"{store_id}={path}")
    (path / "kept.md").write_text("written before the kill")
    for pid in mounter.store_pids():
        os.kill(pid, signal.SIGKILL)
    _wait_for(lambda: not mounter.store_pids(), 10, "the store process to die")
    assert memfs_mounts_under(mounter.root) == [str(path)]

    r = mounter.mount(f"{store_id}={path}", check=False)
    assert r.returncode == 0, r.stderr
    assert (path / "kept.md").read_text() == "written before the kill"
    assert memfs_mounts_under(mounter.root) == [str(path)]
    log = (mounter.cache_dir / store_id / "memfs.log").read_text()
    assert f"cleaning up a stale memfs mount of {store_id} at {path}" in log
    assert mounter.unmount(path).returncode == 0
    assert not path.exists()
    assert memfs_mounts_under(mounter.root) == []
    assert FakeStore(memfs_server, store_id).memories() == {"/kept.md": "written before the kill"}
