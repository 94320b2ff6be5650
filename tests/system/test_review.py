"""What a security and fault review found, each on a real mount against a real
`memfs serve`: conflicts on long and look-alike paths, folders other users
could write into, a mount that fails after making its folder, file modes, the
kernel's entries after a pull, a folder against a file, a read-only mount of a
read-write cache, the `ro` option and the store's memory cap."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
import sys

import pytest

from memfs.mount import mount_table
from memfs.testing import FakeStore
from tests.support import conflict_files
from tests.support.faults import FaultProxyProcess
from tests.support.mounts import memfs_mounts_under

MARKER = ".anthropic-memory-store"


def remote_files(server, store_id: str) -> dict[str, str]:
    """Every memory of the store: path -> content."""
    return FakeStore(server, store_id).memories()


def store_log(mounter, store_id: str) -> str:
    return (mounter.cache_dir / store_id / "memfs.log").read_text()


# ---- conflicts -------------------------------------------------------------------


def test_a_conflict_on_a_long_path_keeps_the_copy_and_the_store_process(mounter, memfs_server):
    store_id = memfs_server.create_store("long")["id"]
    path = mounter.mount_one(store_id)
    deep = path.joinpath(*["d" * 60] * 3)  # 245 bytes with the file name below
    deep.mkdir(parents=True)
    rel = "/" + "/".join(["d" * 60] * 3) + "/" + "n" * 61
    assert len(rel.encode()) == 245
    (path / rel.lstrip("/")).write_text("base")
    mounter.sync(path)
    FakeStore(memfs_server, store_id).put(rel, "theirs")
    (path / rel.lstrip("/")).write_text("mine")
    mounter.sync(path)
    assert (path / rel.lstrip("/")).read_text() == "theirs"
    [copy] = conflict_files(mounter.cache_dir / store_id / "conflicts")
    assert copy.read_text() == "mine" and str(copy).endswith(rel)
    assert str(copy) in store_log(mounter, store_id)
    [status] = mounter.status()
    assert status["last_error"] is None  # the store process lives on
    mounter.unmount(path)
    again = mounter.mount_one(store_id)
    assert (again / rel.lstrip("/")).read_text() == "theirs"


def test_conflict_copies_of_look_alike_paths_never_meet(mounter, memfs_server):
    store_id = memfs_server.create_store("alike")["id"]
    path = mounter.mount_one(store_id)
    (path / "p").mkdir()
    (path / "p" / "q").write_text("base 1")
    (path / "p__q").write_text("base 2")
    mounter.sync(path)
    FakeStore(memfs_server, store_id).put("/p/q", "theirs 1")
    FakeStore(memfs_server, store_id).put("/p__q", "theirs 2")
    (path / "p" / "q").write_text("mine 1")
    (path / "p__q").write_text("mine 2")
    mounter.sync(path)
    copies = conflict_files(mounter.cache_dir / store_id / "conflicts")
    assert sorted(c.read_text() for c in copies) == ["mine 1", "mine 2"]
    log = store_log(mounter, store_id)
    assert all(str(c) in log for c in copies)


# ---- folders other users could write into ---------------------------------------


def test_every_folder_is_0700_and_every_file_0600_whatever_the_umask(mounter, memfs_server):
    store_id = memfs_server.create_store("modes")["id"]
    path = mounter.root / "s"
    mounter.mount(f"{store_id}={path}", umask=0)
    (path / "c.md").write_text("base")
    mounter.sync(path)
    FakeStore(memfs_server, store_id).put("/c.md", "theirs")
    (path / "c.md").write_text("mine")
    mounter.sync(path)
    assert conflict_files(mounter.cache_dir / store_id / "conflicts")
    checked = 0
    for folder in (mounter.cache_dir, mounter.runtime_dir):
        for root, _dirs, files in os.walk(folder):
            assert stat.S_IMODE(os.stat(root).st_mode) == 0o700, root
            for name in files:
                mode = os.lstat(os.path.join(root, name)).st_mode
                if stat.S_ISSOCK(mode):
                    continue
                assert stat.S_IMODE(mode) == 0o600, os.path.join(root, name)
                checked += 1
    assert checked >= 5  # journal, its WAL, contents, a copy, the log, the state file
    assert stat.S_IMODE(os.stat(mounter.root / "s").st_mode) & 0o055  # others may walk in


@pytest.mark.parametrize("which", ["cache", "runtime"])
def test_a_folder_others_can_write_is_refused_before_anything_mounts(mounter, memfs_server, which):
    store_id = memfs_server.create_store("open folder")["id"]
    folder = mounter.cache_dir if which == "cache" else mounter.runtime_dir
    folder.mkdir()
    os.chmod(folder, 0o777)
    r = mounter.mount(f"{store_id}={mounter.root / 's'}", check=False)
    assert r.returncode == 2
    assert str(folder) in r.stderr and "written by other users" in r.stderr
    assert "Traceback" not in r.stderr
    assert memfs_mounts_under(mounter.root) == [] and not (mounter.root / "s").exists()


def test_a_cache_folder_of_another_user_is_refused(mounter, memfs_server):
    store_id = memfs_server.create_store("theirs")["id"]
    mounter.cache_dir.mkdir(mode=0o700)
    os.chown(mounter.cache_dir, 65534, 65534)
    r = mounter.mount(f"{store_id}={mounter.root / 's'}", check=False)
    assert r.returncode == 2 and "belongs to another user" in r.stderr


def test_a_symlink_planted_where_older_caches_kept_contents_is_never_followed(
    mounter, memfs_server, tmp_path
):
    """Had another user got into the cache, a symlink planted where caches of
    memfs's first days kept their content files must not make memfs (root)
    read or delete what it points to: memfs no longer reads that folder at all."""
    store_id = memfs_server.create_store("planted")["id"]
    FakeStore(memfs_server, store_id).put("/stored.md", "stored")
    path = mounter.mount_one(store_id)
    mounter.unmount(path)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "1001").write_text("untouched")
    (mounter.cache_dir / store_id / "contents").symlink_to(victim)
    path = mounter.mount_one(store_id)
    assert (path / "stored.md").read_text() == "stored"
    mounter.unmount(path)
    assert (victim / "1001").read_text() == "untouched"
    assert sorted(p.name for p in victim.iterdir()) == ["1001"]


# ---- a mount that fails after making its folder -------------------------------


def test_a_kernel_mount_that_fails_leaves_no_folder_behind(mounter, memfs_server):
    assert shutil.which("unshare"), "unshare (util-linux, part of every Debian) is missing"
    store_id = memfs_server.create_store("no fuse")["id"]
    path = mounter.root / "nested" / "s"
    cmd = [sys.executable, "-m", "memfs", "mount", "--daemon", "--store", f"{store_id}={path}"]
    cmd += ["--cache-dir", str(mounter.cache_dir), "--token-file", str(mounter.token_file)]
    # /dev/fuse that is not FUSE, as in a container started without the device.
    script = 'mount --bind /dev/null /dev/fuse && exec "$@"'
    r = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *cmd],
        capture_output=True,
        text=True,
        env=mounter.env,
        timeout=60,
    )
    assert r.returncode == 1, r.stderr
    assert f"cannot mount {store_id} at {path}" in r.stderr and "Traceback" not in r.stderr
    assert not path.exists()
    again = mounter.mount_one(store_id, "nested/s")  # and the path is free for the next mount
    assert sorted(os.listdir(again)) == [MARKER]


# ---- the kernel's entries after a pull -------------------------------------------


def test_a_pull_that_replaces_a_local_file_leaves_no_stale_entry(mounter, memfs_server):
    store_id = memfs_server.create_store("stale entry")["id"]
    path = mounter.mount_one(store_id)
    FakeStore(memfs_server, store_id).put("/gone/b.md", "b")
    mounter.sync(path)
    assert (path / "gone" / "b.md").read_text() == "b"
    (path / "a.md").write_text("local, never synced")
    assert os.stat(path / "a.md").st_size  # the kernel holds the entry
    FakeStore(memfs_server, store_id).put("/a.md", "from the store")
    with memfs_server.http() as http:
        mid = next(
            m["id"]
            for m in http.get(f"/v1/memory_stores/{store_id}/memories").json()["data"]
            if m["path"] == "/gone/b.md"
        )
        http.delete(f"/v1/memory_stores/{store_id}/memories/{mid}")
    mounter.sync(path)
    assert (path / "a.md").read_text() == "from the store"
    with open(path / "a.md", "a") as f:
        f.write(", appended")
    (path / "a.md").touch()
    assert (path / "a.md").read_text() == "from the store, appended"
    (path / "a.md").write_text("replaced")
    assert (path / "a.md").read_text() == "replaced"
    assert not (path / "gone").exists()  # the folder the store emptied went
    (path / "gone").mkdir()  # and its name is free again


# ---- a folder against a file -------------------------------------------------------


def test_a_local_folder_against_a_remote_file_is_decided_once(mounter, memfs_server):
    store_id = memfs_server.create_store("folder vs file")["id"]
    path = mounter.mount_one(store_id)
    (path / "x").mkdir()
    (path / "x" / "y.md").write_text("in the local folder")
    FakeStore(memfs_server, store_id).put("/x", "a file in the store")
    mounter.sync(path)
    assert (path / "x").read_text() == "a file in the store"
    [copy] = conflict_files(mounter.cache_dir / store_id / "conflicts")
    assert copy.read_text() == "in the local folder" and str(copy).endswith("/x/y.md")
    for _ in range(2):
        mounter.sync(path)
    assert remote_files(memfs_server, store_id) == {"/x": "a file in the store"}
    log = store_log(mounter, store_id)
    assert log.count("conflict on /x/y.md") == 1 and "cannot show" not in log


# ---- read-only ---------------------------------------------------------------------


def test_a_read_only_mount_of_a_read_write_cache_shows_the_store(mounter, memfs_server):
    store_id = memfs_server.create_store("ro reuse")["id"]
    FakeStore(memfs_server, store_id).put("/doc.md", "the store's")
    FakeStore(memfs_server, store_id).put("/kept.md", "kept")
    with FaultProxyProcess(memfs_server.url) as proxy:
        extra = ("--api-url", proxy.url, "--final-sync-timeout", "2")
        path = mounter.mount_one(store_id, extra=extra)
        (path / "doc.md").write_text("an edit that never reached the store")
        (path / "new.md").write_text("a new file")
        (path / "kept.md").unlink()
        proxy.set(down=True)
        assert mounter.unmount(path, check=False).returncode == 1
    path = mounter.mount_one(store_id, read_only=True)
    assert (path / "doc.md").read_text() == "the store's"
    assert (path / "kept.md").read_text() == "kept"
    assert not (path / "new.md").exists()
    copies = {c.read_text() for c in conflict_files(mounter.cache_dir / store_id / "conflicts")}
    assert copies == {"an edit that never reached the store", "a new file"}


def test_a_read_only_store_is_mounted_ro(mounter, memfs_server):
    store_id = memfs_server.create_store("ro option")["id"]
    FakeStore(memfs_server, store_id).put("/a.md", "a")
    path = mounter.mount_one(store_id, read_only=True)
    options = next(m.options for m in mount_table() if m.point == str(path))
    assert "ro" in options.split(",")
    assert not os.access(path / "a.md", os.W_OK)
    assert not os.access(path, os.W_OK)


# ---- the store's memory cap --------------------------------------------------------


@pytest.mark.slow
def test_new_files_past_the_store_cap_are_refused_with_enospc(mounter, memfs_server):
    store_id = memfs_server.create_store("full")["id"]
    path = mounter.mount_one(store_id, extra=("--final-sync-timeout", "60"))
    for d in range(20):
        (path / f"d{d:02}").mkdir()
        for i in range(100):
            (path / f"d{d:02}" / f"f{i:03}.md").write_text("x")
    with pytest.raises(OSError) as info:
        (path / "one-too-many.md").write_text("refused")
    assert info.value.errno == errno.ENOSPC
    [status] = mounter.status()
    assert status["store_full"] is True
    assert "its limit" in store_log(mounter, store_id)
    os.unlink(path / "d00" / "f000.md")
    os.rename(path / "d00" / "f001.md", path / "renamed.md")  # still allowed
    (path / "d00" / "f000.md").write_text("takes the deleted one's place")
    mounter.unmount(path)
    assert len(remote_files(memfs_server, store_id)) == 2000
