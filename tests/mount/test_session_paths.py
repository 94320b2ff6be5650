"""Where a store may be mounted, on real mounts of a real `memfs serve`.

- A session's mount path (`--work-item`, `--session`, a store attached
  mid-session) must lead, every symlink followed, to a folder strictly under
  the mount root (`--root`); anything else is refused with one sentence
  naming it, before anything is created. A path the operator gives
  (`--store ID=PATH`) may be anywhere.
- Mount paths are compared where they lead: `/x` and `//x` are one path.
- One store's folder inside another's (`a` and `a/sub`) is refused up front,
  whichever would mount first.
- The folders memfs made above a mount path (`team/` for `team/notes`) go at
  unmount, innermost first, while empty; no folder memfs did not make does.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from tests.mount.test_worker import (
    CHECK,
    admin,
    feed,
    memfs_run,
    new_session,
    wait_for_event,
    worker_env,
)
from tests.support import ServerProcess
from tests.support.mounts import Mounter, memfs_mounts_under
from tests.support.running import remote_files, wait_for_file


@contextlib.contextmanager
def session_run(mounter: Mounter, item: dict, first: Path, tmp_path: Path) -> Iterator[list[str]]:
    """`memfs run` of the work item, its command waiting until the block ends;
    inside, the store at `first` is mounted; after it, memfs run exited 0, and
    the list given holds its stderr's lines."""
    flags = tmp_path / "flags"
    flags.mkdir()
    proc = memfs_run(mounter, ["sh", "-c", f"while [ ! -e {flags}/done ]; do sleep 0.1; done"])
    feed(proc, item)
    stderr: list[str] = []
    try:
        wait_for_file(first / ".anthropic-memory-store", 60, "the first store")
        yield stderr
        (flags / "done").touch()
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    stderr += err.splitlines()


def refused_attach(
    server: ServerProcess, mounter: Mounter, session_id: str, store_id: str, path: Path
) -> str:
    """Attach the store at `path` and wait for the follower's `not_mounted`:
    why the store was not mounted."""
    admin(server, mounter, "session", "attach", session_id, "--store", f"{store_id}={path}")
    record = wait_for_event(mounter, worker_env(mounter), "not_mounted", store_id)
    (event,) = [e for e in record["events"] if e["store_id"] == store_id]
    return str(event["detail"])


def mount_work_item(mounter: Mounter, item: dict, tmp_path: Path) -> subprocess.CompletedProcess:
    """`memfs mount --daemon --work-item FILE`, the root the mounter's."""
    item_file = tmp_path / "work-item.json"
    item_file.write_text(json.dumps(item))
    return mounter.memfs(
        "mount",
        "--daemon",
        "--work-item",
        str(item_file),
        "--root",
        str(mounter.root),
        "--cache-dir",
        str(mounter.cache_dir),
        "--final-sync-timeout",
        "20",
        env=worker_env(mounter),
    )


def stores(server: ServerProcess, mounter: Mounter, *names: str) -> list[str]:
    return [admin(server, mounter, "create", name).strip() for name in names]


# ------------------------------------------------------------------ the root


def test_a_session_mount_path_outside_the_root_is_refused_before_anything_is_made(
    mounter, memfs_server, tmp_path
):
    (store,) = stores(memfs_server, mounter, "Keys")
    outside = tmp_path / "host" / "dot-ssh"
    item = new_session(memfs_server, mounter, f"{store}={outside}")
    r = mount_work_item(mounter, item, tmp_path)
    assert r.returncode == 2, r.stderr
    assert f"the mount path {outside} of {store}, given by the session, is not a folder" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert not (tmp_path / "host").exists()
    assert memfs_mounts_under(mounter.tmp) == []


def test_a_symlink_under_the_root_does_not_carry_a_session_mount_outside_it(
    mounter, memfs_server, tmp_path
):
    (store,) = stores(memfs_server, mounter, "Conf")
    elsewhere = tmp_path / "etc"
    elsewhere.mkdir()
    (mounter.root / "link").symlink_to(elsewhere)
    item = new_session(memfs_server, mounter, f"{store}={mounter.root}/link/conf.d")
    r = mount_work_item(mounter, item, tmp_path)
    assert r.returncode == 2, r.stderr
    assert f"which leads to {elsewhere}/conf.d" in r.stderr
    assert "is not a folder under the mount root" in r.stderr
    assert os.listdir(elsewhere) == []
    assert memfs_mounts_under(mounter.tmp) == []


def test_a_session_mount_path_at_the_root_itself_is_refused(mounter, memfs_server, tmp_path):
    (store,) = stores(memfs_server, mounter, "Root")
    item = new_session(memfs_server, mounter, f"{store}={mounter.root}")
    r = mount_work_item(mounter, item, tmp_path)
    assert r.returncode == 2, r.stderr
    assert "is not a folder under the mount root" in r.stderr
    assert memfs_mounts_under(mounter.tmp) == []


def test_a_path_the_operator_gives_may_be_outside_the_root(mounter, memfs_server, tmp_path):
    """...and the folders memfs made for it go at unmount, those memfs did not make stay."""
    (store,) = stores(memfs_server, mounter, "Operator")
    path = tmp_path / "elsewhere" / "deep" / "s"
    mounter.mount(f"{store}={path}")
    (path / "a.md").write_text("anywhere the operator says\n")
    mounter.unmount(path)
    assert remote_files(memfs_server, store) == {"/a.md": "anywhere the operator says\n"}
    assert not (tmp_path / "elsewhere").exists()
    assert tmp_path.exists()


def test_a_store_attached_mid_session_outside_the_root_is_not_mounted(
    mounter, memfs_server, tmp_path
):
    first, late = stores(memfs_server, mounter, "First", "Late")
    elsewhere = tmp_path / "etc"
    elsewhere.mkdir()
    (mounter.root / "link").symlink_to(elsewhere)
    item = new_session(memfs_server, mounter, f"{first}={mounter.root}/first")
    session_id = item["data"]["id"]
    with session_run(mounter, item, mounter.root / "first", tmp_path):
        detail = refused_attach(memfs_server, mounter, session_id, late, mounter.root / "link/late")
        assert "is not a folder under the mount root" in detail
        assert os.listdir(elsewhere) == []
    assert memfs_mounts_under(mounter.tmp) == []


# ------------------------------------------------------------------ one path


def test_two_stores_at_one_path_however_written_are_refused(mounter, memfs_server):
    one, two = stores(memfs_server, mounter, "One", "Two")
    r = mounter.mount(f"{one}=/{mounter.root}/x", f"{two}={mounter.root}/x", check=False)
    assert r.returncode == 2, r.stderr
    assert f"stores {one} and {two} would both mount at {mounter.root}/x" in r.stderr
    assert not (mounter.root / "x").exists()
    assert memfs_mounts_under(mounter.tmp) == []


# ------------------------------------------------------------------ nesting


def test_a_session_with_one_store_inside_another_is_refused_up_front(
    mounter, memfs_server, tmp_path
):
    outer, inner = stores(memfs_server, mounter, "Outer", "Inner")
    root = mounter.root
    item = new_session(memfs_server, mounter, f"{outer}={root}/a", f"{inner}={root}/a/sub")
    r = mount_work_item(mounter, item, tmp_path)
    assert r.returncode == 2, r.stderr
    assert (
        f"stores {outer} and {inner} would mount one inside the other ({root}/a and {root}/a/sub)"
        in r.stderr
    )
    assert not (root / "a").exists()
    assert memfs_mounts_under(mounter.tmp) == []


def test_a_store_attached_inside_a_mounted_one_is_not_mounted(mounter, memfs_server, tmp_path):
    outer, inner = stores(memfs_server, mounter, "Outer", "Inner")
    root = mounter.root
    item = new_session(memfs_server, mounter, f"{outer}={root}/a")
    session_id = item["data"]["id"]
    with session_run(mounter, item, root / "a", tmp_path):
        detail = refused_attach(memfs_server, mounter, session_id, inner, root / "a/sub")
        assert "would mount one inside the other" in detail
        assert not (root / "a" / "sub").exists()
    assert remote_files(memfs_server, outer) == {}


def test_a_store_attached_where_a_path_is_taken_is_said_once_however_many_checks(
    mounter, memfs_server, tmp_path
):
    """Tried again at each check of the session, the store is not mounted each
    time: the follower says so once, and the store processes add no line of
    their own to `memfs run`'s stderr."""
    outer, late = stores(memfs_server, mounter, "Outer", "Late")
    root = mounter.root
    (root / "taken").mkdir(parents=True)
    (root / "taken" / "mine.txt").write_text("not the store's")
    item = new_session(memfs_server, mounter, f"{outer}={root}/a")
    with session_run(mounter, item, root / "a", tmp_path) as stderr:
        refused_attach(memfs_server, mounter, item["data"]["id"], late, root / "taken")
        time.sleep(4 * float(CHECK) + 1)  # several checks, each trying it again
    said = [line for line in stderr if "the path already exists" in line]
    assert len(said) == 1, stderr
    assert (root / "taken" / "mine.txt").read_text() == "not the store's"


# ------------------------------------------------------------------ folders made


def test_folders_made_above_a_session_mount_path_go_at_unmount(mounter, memfs_server, tmp_path):
    """`team/` made for `team/notes` goes with it, so that a later session
    can mount a store at `team`."""
    notes, team = stores(memfs_server, mounter, "Notes", "Team")
    root = mounter.root
    (root / "kept").mkdir()
    item = new_session(memfs_server, mounter, f"{notes}={root}/team/notes")
    item_kept = new_session(memfs_server, mounter, f"{team}={root}/kept/deep/team")
    for each in (item, item_kept):
        proc = memfs_run(mounter, ["true"])
        feed(proc, each)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    assert sorted(os.listdir(root)) == ["kept"]
    assert os.listdir(root / "kept") == []

    later = new_session(memfs_server, mounter, f"{team}={root}/team")
    proc = memfs_run(mounter, ["sh", "-c", f"echo later > {root}/team/later.md"])
    feed(proc, later)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert remote_files(memfs_server, team) == {"/later.md": "later\n"}
    assert sorted(os.listdir(root)) == ["kept"]


def test_a_folder_made_above_a_mount_path_stays_while_it_holds_something(mounter, memfs_server):
    (store,) = stores(memfs_server, mounter, "Notes")
    root = mounter.root
    mounter.mount(f"{store}={root}/team/notes")
    (root / "team" / "readme").write_text("not memfs's\n")
    mounter.unmount(root / "team" / "notes")
    assert os.listdir(root / "team") == ["readme"]
