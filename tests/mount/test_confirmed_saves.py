"""`memfs sync FILE...`: files inside a real mount pushed now and confirmed,
one line each, against a real `memfs serve` (through the fault proxy where
the store must fail)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from memfs.api import content_sha256
from memfs.testing import FakeStore
from tests.support.faults import FaultProxyProcess

QUIET = ("--sync-interval", "3600", "--write-behind", "no")
"""No periodic pass: only the command under test talks to the store."""


def stored(server, store_id: str, path: str) -> dict | None:
    """The store's memory at `path` (its id and content sha), or None."""
    with server.http() as http:
        r = http.get(
            f"/v1/memory_stores/{store_id}/memories", params={"limit": 100, "view": "full"}
        )
    return next((m for m in r.json()["data"] if m.get("path") == path), None)


def sync_files(mounter, *files: Path | str, extra: tuple[str, ...] = ()):
    return mounter.memfs("sync", *extra, *map(str, files))


def test_a_saved_file_is_in_the_store_with_that_sha(mounter, memfs_server):
    store_id = memfs_server.create_store("s")["id"]
    mnt = mounter.mount_one(store_id, extra=QUIET)
    (mnt / "notes").mkdir()
    (mnt / "notes" / "a.md").write_text("first\n")
    r = sync_files(mounter, mnt / "notes" / "a.md")
    assert r.returncode == 0, r.stderr
    memory = stored(memfs_server, store_id, "/notes/a.md")
    assert memory is not None and memory["content"] == "first\n"
    sha = content_sha256(b"first\n")
    assert memory["content_sha256"] == sha
    assert r.stdout == f"saved {mnt / 'notes' / 'a.md'} memory_id={memory['id']} sha256={sha}\n"
    # Nothing pending: the same answer again, without a request that changes anything.
    again = sync_files(mounter, mnt / "notes" / "a.md")
    assert (again.returncode, again.stdout) == (0, r.stdout)


def test_the_path_is_printed_as_given(mounter, memfs_server):
    store_id = memfs_server.create_store("s")["id"]
    mnt = mounter.mount_one(store_id, extra=QUIET)
    (mnt / "a.md").write_text("x\n")
    r = subprocess.run(
        [sys.executable, "-m", "memfs", "sync", "a.md"],
        cwd=mnt,
        env=mounter.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("saved a.md memory_id=")


def test_an_identical_memory_in_the_store_counts_as_saved(mounter, memfs_server):
    store_id = memfs_server.create_store("s")["id"]
    mnt = mounter.mount_one(store_id, extra=QUIET)
    memory_id = FakeStore(memfs_server, store_id).put("/same.md", "the same\n")
    (mnt / "same.md").write_text("the same\n")
    r = sync_files(mounter, mnt / "same.md")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"saved {mnt / 'same.md'} memory_id={memory_id} " in r.stdout
    assert FakeStore(memfs_server, store_id).memories() == {"/same.md": "the same\n"}
    assert not list((mounter.cache_dir / store_id / "conflicts").rglob("*.md"))


def test_a_content_memfs_cannot_send_is_refused(mounter, memfs_server):
    store_id = memfs_server.create_store("s")["id"]
    mnt = mounter.mount_one(store_id, extra=QUIET)
    (mnt / "bin.md").write_bytes(b"\xff\xfe not text")
    r = sync_files(mounter, mnt / "bin.md")
    assert r.returncode == 65, r.stdout + r.stderr
    assert r.stdout == f"refused {mnt / 'bin.md'}: its content is not UTF-8 text\n"
    assert stored(memfs_server, store_id, "/bin.md") is None


def test_a_content_the_store_refuses_is_refused_with_its_message(mounter, memfs_server):
    store_id = memfs_server.create_store("s")["id"]
    with FaultProxyProcess(memfs_server.url) as proxy:
        mnt = mounter.mount_one(store_id, extra=(*QUIET, "--api-url", proxy.url))
        (mnt / "a.md").write_text("stored\n")
        assert sync_files(mounter, mnt / "a.md").returncode == 0
        (mnt / "a.md").write_text("refused\n")
        proxy.set(status=400, status_rate=1.0, match_method="POST", match_path="/memories/mem")
        r = sync_files(mounter, mnt / "a.md")
        assert r.returncode == 65, r.stdout + r.stderr
        assert r.stdout.startswith(f"refused {mnt / 'a.md'}: the store refused it: ")
        proxy.set(status_rate=0.0)
        assert sync_files(mounter, mnt / "a.md").returncode == 0
        mounter.unmount(mnt)


def test_a_new_file_a_full_store_refuses_is_held_and_named_at_unmount(mounter, memfs_server):
    memfs_server.extra_args = ["--max-memories", "1"]
    memfs_server.restart()
    store_id = memfs_server.create_store("s")["id"]
    mnt = mounter.mount_one(store_id, extra=QUIET)
    (mnt / "one.md").write_text("fits\n")
    (mnt / "two.md").write_text("one too many\n")
    r = sync_files(mounter, mnt / "one.md", mnt / "two.md")
    assert r.returncode == 65, r.stdout + r.stderr
    assert f"refused {mnt / 'two.md'}: the store refused it (" in r.stdout
    assert "is full" in r.stdout
    # Deleting a memory makes room: not a content to change first, a file to send again.
    r = mounter.unmount(mnt, check=False)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"not uploaded from {mnt}: /two.md" in r.stderr
    assert stored(memfs_server, store_id, "/two.md") is None
    with memfs_server.http() as http:
        (memory,) = http.get(f"/v1/memory_stores/{store_id}/memories").json()["data"]
        http.delete(f"/v1/memory_stores/{store_id}/memories/{memory['id']}")
    mnt = mounter.mount_one(store_id, extra=QUIET)
    assert mounter.unmount(mnt).returncode == 0
    assert stored(memfs_server, store_id, "/two.md")["content"] == "one too many\n"


def test_a_404_on_an_update_of_a_memory_still_there_is_no_delete_and_no_conflict(
    mounter, memfs_server
):
    """One wrong 404 (a gateway's, say) to an update or a move: the store still
    answers the memory by its id, so nothing is created again, no conflict is
    made, and the edit goes to the same memory when tried again."""
    store_id = memfs_server.create_store("s")["id"]
    with FaultProxyProcess(memfs_server.url) as proxy:
        mnt = mounter.mount_one(store_id, extra=(*QUIET, "--api-url", proxy.url))
        (mnt / "a.md").write_text("version 1\n")
        assert sync_files(mounter, mnt / "a.md").returncode == 0
        first = stored(memfs_server, store_id, "/a.md")
        (mnt / "a.md").write_text("version 2, my edit\n")
        os.rename(mnt / "a.md", mnt / "b.md")
        proxy.set(status=404, status_next=1, match_method="POST", match_path="/memories/mem")
        assert sync_files(mounter, mnt / "b.md").returncode == 0
        exchanges = proxy.state()["counters"]["exchanges"]
        assert [s for m, t, s in exchanges if m == "POST" and "/memories/mem" in t][:1] == [404]
        assert (mnt / "b.md").read_text() == "version 2, my edit\n"
        memory = stored(memfs_server, store_id, "/b.md")
        assert memory["id"] == first["id"] and stored(memfs_server, store_id, "/a.md") is None
        assert [p.name for p in mnt.iterdir() if not p.name.startswith(".")] == ["b.md"]
        assert not mounter.status()[0]["conflict_copies"]
        mounter.unmount(mnt)


def test_a_failing_store_leaves_the_file_pending_not_confirmed(mounter, memfs_server):
    store_id = memfs_server.create_store("s")["id"]
    with FaultProxyProcess(memfs_server.url) as proxy:
        mnt = mounter.mount_one(store_id, extra=(*QUIET, "--api-url", proxy.url))
        (mnt / "a.md").write_text("later\n")
        proxy.set(status=503, status_rate=1.0, match_method="POST", match_path="/memories")
        r = sync_files(mounter, mnt / "a.md")
        assert r.returncode == 75, r.stdout + r.stderr
        assert r.stdout.startswith(f"not-confirmed {mnt / 'a.md'}: the store answered 503: ")
        assert mounter.status()[0]["pending"] == ["/a.md"]

        proxy.set(status_rate=0.0, down=True)
        r = sync_files(mounter, mnt / "a.md")
        assert r.returncode == 75, r.stdout + r.stderr
        assert r.stdout.startswith(f"not-confirmed {mnt / 'a.md'}: the store could not be reached")

        proxy.set(down=False, delay=30.0)
        r = sync_files(mounter, mnt / "a.md", extra=("--confirm-timeout", "2"))
        assert r.returncode == 75, r.stdout + r.stderr
        assert r.stdout == (f"not-confirmed {mnt / 'a.md'}: no answer from the store within 2 s\n")
        proxy.set(delay=0.0)
        assert sync_files(mounter, mnt / "a.md").returncode == 0
        assert stored(memfs_server, store_id, "/a.md")["content"] == "later\n"
        mounter.unmount(mnt)


def test_the_timeout_is_a_setting(mounter, memfs_server):
    store_id = memfs_server.create_store("s")["id"]
    with FaultProxyProcess(memfs_server.url) as proxy:
        mnt = mounter.mount_one(store_id, extra=(*QUIET, "--api-url", proxy.url))
        (mnt / "a.md").write_text("x\n")
        proxy.set(delay=30.0)
        env = {**mounter.env, "MEMFS_CONFIRM_TIMEOUT": "1.5"}
        r = mounter.memfs("sync", str(mnt / "a.md"), env=env)
        assert r.stdout.endswith("no answer from the store within 1.5 s\n"), r.stdout
        bad = mounter.memfs("sync", str(mnt / "a.md"), env={**env, "MEMFS_CONFIRM_TIMEOUT": "x"})
        assert bad.returncode == 2 and "MEMFS_CONFIRM_TIMEOUT" in bad.stderr
        proxy.set(delay=0.0)
        mounter.unmount(mnt)


def changed_on_both_sides(mounter, memfs_server, theirs: str, *, by_pass: bool = False):
    """A file saved as "base", then changed to `theirs` in the store and to
    "mine" here: (store id, mount path, file). `by_pass`: saved by a pass."""
    store_id = memfs_server.create_store("s")["id"]
    mnt = mounter.mount_one(store_id, extra=QUIET)
    f = mnt / "a.md"
    f.write_text("base\n")
    if by_pass:
        mounter.sync(mnt)
    else:
        assert sync_files(mounter, f).returncode == 0
    FakeStore(memfs_server, store_id).put("/a.md", theirs)
    f.write_text("mine\n")
    return store_id, mnt, f


def test_an_edit_the_store_overruled_says_so_until_written_again(mounter, memfs_server):
    store_id, mnt, f = changed_on_both_sides(mounter, memfs_server, "the store's\n")

    r = sync_files(mounter, f)
    assert r.returncode == 3, r.stdout + r.stderr
    m = re.fullmatch(
        rf"overruled {re.escape(str(f))}: the store's version is now in the file; "
        r"your edit is kept at (/\S+)\n",
        r.stdout,
    )
    assert m, r.stdout
    kept = Path(m.group(1))
    assert kept.is_absolute() and kept.read_text() == "mine\n"
    assert f.read_text() == "the store's\n"
    assert FakeStore(memfs_server, store_id).memories() == {"/a.md": "the store's\n"}

    again = sync_files(mounter, f)
    assert (again.returncode, again.stdout) == (3, r.stdout)
    as_json = json.loads(sync_files(mounter, f, extra=("--json",)).stdout)
    assert as_json[0]["outcome"] == "overruled" and as_json[0]["kept_copy"] == str(kept)

    f.write_text("mine, redone\n")
    r = sync_files(mounter, f)
    assert r.returncode == 0, r.stdout
    assert FakeStore(memfs_server, store_id).memories() == {"/a.md": "mine, redone\n"}


def test_a_file_written_back_to_a_version_the_store_left_is_not_called_saved(mounter, memfs_server):
    """Written with the bytes last synced, a file is clean here; but the store
    changed or deleted its memory since, so it does not hold them: not saved.
    The store's version comes into the folder, as a pass would bring it."""
    store_id = memfs_server.create_store("s")["id"]
    mnt = mounter.mount_one(store_id, extra=QUIET)
    changed, deleted = mnt / "changed.md", mnt / "deleted.md"
    for f in (changed, deleted):
        f.write_text("as synced\n")
    assert sync_files(mounter, changed, deleted).returncode == 0
    store = FakeStore(memfs_server, store_id)
    store.put("/changed.md", "the store's\n")
    store.delete("/deleted.md")
    for f in (changed, deleted):
        f.write_text("as synced\n")

    r = sync_files(mounter, changed, deleted)
    assert r.returncode == 75, r.stdout + r.stderr
    assert r.stdout.splitlines() == [
        f"overruled {changed}: the store's version is now in the file",
        f"not-confirmed {deleted}: the file was moved or removed meanwhile",
    ]
    assert changed.read_text() == "the store's\n" and not deleted.exists()
    assert store.memories() == {"/changed.md": "the store's\n"}
    assert sync_files(mounter, changed).stdout.startswith(f"saved {changed} ")


def test_an_overruled_edit_is_still_said_after_a_remount(mounter, memfs_server):
    store_id, mnt, f = changed_on_both_sides(mounter, memfs_server, "the store's\n")
    first = sync_files(mounter, f)
    assert first.returncode == 3, first.stdout + first.stderr

    mounter.unmount(mnt)
    mnt = mounter.mount_one(store_id, extra=QUIET)
    again = sync_files(mounter, f)
    assert (again.returncode, again.stdout) == (3, first.stdout)
    assert os.getxattr(f, "user.memfs.state").startswith(b"overruled")

    f.write_text("mine, redone\n")
    assert sync_files(mounter, f).returncode == 0
    assert os.getxattr(f, "user.memfs.state") == b"synced"


def test_a_conflict_found_by_a_pass_answers_overruled(mounter, memfs_server):
    _, mnt, f = changed_on_both_sides(mounter, memfs_server, "theirs\n", by_pass=True)
    mounter.sync(mnt)
    assert f.read_text() == "theirs\n"
    r = sync_files(mounter, f)
    assert r.returncode == 3, r.stdout
    assert r.stdout.startswith(f"overruled {f}: ")


def test_a_read_only_store_never_pushes(mounter, memfs_server):
    store_id = memfs_server.create_store("s")["id"]
    FakeStore(memfs_server, store_id).put("/a.md", "x\n")
    mnt = mounter.mount_one(store_id, read_only=True)
    r = sync_files(mounter, mnt / "a.md")
    assert r.returncode == 65
    assert r.stdout == (
        f"refused {mnt / 'a.md'}: the store is read-only: this file is never pushed\n"
    )


def test_json_gives_one_object_per_file_and_the_worst_status(mounter, memfs_server):
    store_id = memfs_server.create_store("s")["id"]
    mnt = mounter.mount_one(store_id, extra=QUIET)
    (mnt / "a.md").write_text("a\n")
    (mnt / "bin.md").write_bytes(b"\xff")
    r = sync_files(mounter, mnt / "a.md", mnt / "bin.md", extra=("--json",))
    assert r.returncode == 65, r.stderr
    a, b = json.loads(r.stdout)
    memory = stored(memfs_server, store_id, "/a.md")
    assert a == {
        "path": str(mnt / "a.md"),
        "outcome": "saved",
        "memory_id": memory["id"],
        "sha256": memory["content_sha256"],
        "reason": None,
        "kept_copy": None,
    }
    assert b == {
        "path": str(mnt / "bin.md"),
        "outcome": "refused",
        "memory_id": None,
        "sha256": None,
        "reason": "its content is not UTF-8 text",
        "kept_copy": None,
    }


def test_what_is_not_a_file_in_a_mount_is_refused_with_status_2(mounter, memfs_server, tmp_path):
    store_id = memfs_server.create_store("s")["id"]
    mnt = mounter.mount_one(store_id, extra=QUIET)
    (mnt / "a.md").write_text("a\n")
    (mnt / "folder").mkdir()
    outside = tmp_path / "outside.md"
    outside.write_text("x\n")
    mixed = mounter.memfs("sync", str(mnt), str(mnt / "a.md"))
    assert mixed.returncode == 2
    assert mixed.stderr.startswith("memfs: give mount paths") and mixed.stderr.count("\n") == 1
    for path in (mnt / "folder", outside, mnt / "missing.md"):
        r = mounter.memfs("sync", str(path))
        assert r.returncode == 2, (path, r.stdout, r.stderr)
        assert r.stderr == f"memfs: {path} is not a regular file inside a mounted store\n"
    # Mount paths alone: a pass, as before.
    assert mounter.memfs("sync", str(mnt)).stdout.startswith(f"{mnt}: pushed 1,")


def test_a_mount_of_another_runtime_folder_is_named_not_denied(mounter, memfs_server, tmp_path):
    """Run with a runtime folder that does not list the mount (the demo's, its
    env file not sourced), the commands say which mount it is and what to set,
    where they said the file was in no mount."""
    store_id = memfs_server.create_store("s")["id"]
    mnt = mounter.mount_one(store_id, extra=QUIET)
    (mnt / "a.md").write_text("a\n")
    other = tmp_path / "other-runtime"
    other.mkdir(mode=0o700)
    env = {**mounter.env, "MEMFS_RUNTIME_DIR": str(other)}
    hint = (
        f"{mnt} is a memfs mount started with another runtime folder than {other}: "
        "set MEMFS_RUNTIME_DIR to that one"
    )
    for args in (("sync", str(mnt / "a.md")), ("sync", str(mnt)), ("unmount", str(mnt))):
        r = mounter.memfs(*args, env=env)
        assert (r.returncode, r.stderr) == (2 if args[1].endswith(".md") else 1, f"memfs: {hint}\n")
    r = mounter.memfs("status", env=env)
    assert r.returncode == 0 and r.stdout.startswith("no memfs mounts are running; ")
    assert "MEMFS_RUNTIME_DIR" in r.stdout
    # With the mount's own runtime folder, the same file is saved.
    assert mounter.memfs("sync", str(mnt / "a.md")).stdout.startswith(f"saved {mnt / 'a.md'} ")


def test_a_file_saved_now_waits_for_no_quiet_time(mounter, memfs_server):
    store_id = memfs_server.create_store("s")["id"]
    mnt = mounter.mount_one(store_id, extra=QUIET)
    with open(mnt / "open.md", "w") as f:
        f.write("being written\n")
        f.flush()
        r = sync_files(mounter, mnt / "open.md")
        assert r.returncode == 0, r.stdout
    assert stored(memfs_server, store_id, "/open.md")["content"] == "being written\n"
    assert os.path.exists(mnt / "open.md")


def test_a_new_file_whose_path_the_store_took_is_overruled(mounter, memfs_server):
    store_id = memfs_server.create_store("s")["id"]
    mnt = mounter.mount_one(store_id, extra=QUIET)
    memory_id = FakeStore(memfs_server, store_id).put("/taken.md", "theirs\n")
    (mnt / "taken.md").write_text("mine\n")
    r = sync_files(mounter, mnt / "taken.md", extra=("--json",))
    assert r.returncode == 3, r.stdout + r.stderr
    (answer,) = json.loads(r.stdout)
    assert (answer["outcome"], answer["memory_id"]) == ("overruled", memory_id)
    assert Path(answer["kept_copy"]).read_text() == "mine\n"
    assert (mnt / "taken.md").read_text() == "theirs\n"
    assert os.getxattr(mnt / "taken.md", "user.memfs.kept_copy").decode() == answer["kept_copy"]


def test_an_edit_of_a_file_another_session_moved_is_saved_at_its_new_path(mounter, memfs_server):
    """The store moved the memory (another session's rename) before this edit was
    pushed: the edit is in the store, at the new path, and is said saved; it was
    said not confirmed, and a second `memfs sync` found no file."""
    store_id = memfs_server.create_store("s")["id"]
    mnt = mounter.mount_one(store_id, extra=QUIET)
    (mnt / "ff.md").write_text("first\n")
    assert sync_files(mounter, mnt / "ff.md").returncode == 0
    memory = stored(memfs_server, store_id, "/ff.md")
    assert memory is not None
    with memfs_server.http() as http:
        moved = http.post(
            f"/v1/memory_stores/{store_id}/memories/{memory['id']}", json={"path": "/gg.md"}
        )
        assert moved.status_code == 200, moved.text
    (mnt / "ff.md").write_text("edited here\n")
    r = sync_files(mounter, mnt / "ff.md", extra=("--json",))
    assert r.returncode == 0, r.stdout + r.stderr
    (answer,) = json.loads(r.stdout)
    assert (answer["outcome"], answer["memory_id"]) == ("saved", memory["id"])
    assert FakeStore(memfs_server, store_id).memories() == {"/gg.md": "edited here\n"}
