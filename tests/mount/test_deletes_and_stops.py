"""Deletes as the reference sync paces them, and the end of a session: the
wipe rule, `log_only` as a dry run of `enabled`, the final sync's cap, a stop
that writers may outlive, and what the stop says of what it left. Real
mounts, a real `memfs serve`."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from tests.support.faults import FaultProxyProcess
from tests.system.test_sync import put_remote, remote_files


def log_of(mounter, store_id: str) -> str:
    return (mounter.cache_dir / store_id / "memfs.log").read_text()


def seed(server, store_id: str, n: int, folder: str = "/n") -> None:
    for i in range(n):
        put_remote(server, store_id, f"{folder}/{i:02}.md", f"note {i}")


def test_deleting_some_files_while_writing_a_new_one_is_not_a_wipe(mounter, memfs_server):
    store_id = memfs_server.create_store("summary")["id"]
    put_remote(memfs_server, store_id, "/a.md", "a")
    put_remote(memfs_server, store_id, "/b.md", "b")
    mnt = mounter.mount_one(store_id)
    (mnt / "a.md").unlink()
    (mnt / "b.md").unlink()
    (mnt / "summary.md").write_text("a and b, summed up")
    mounter.sync(mnt)
    assert not (mnt / "a.md").exists() and not (mnt / "b.md").exists()
    # The deletes wait for their window; the final sync of `memfs unmount` waives it.
    mounter.unmount(mnt)
    assert remote_files(memfs_server, store_id) == {"/summary.md": "a and b, summed up"}
    assert "looks like a wipe" not in log_of(mounter, store_id)


def test_deleting_every_file_is_a_wipe_in_log_only_too(mounter, memfs_server):
    store_id = memfs_server.create_store("wiped")["id"]
    put_remote(memfs_server, store_id, "/a.md", "a")
    put_remote(memfs_server, store_id, "/b.md", "b")
    mnt = mounter.mount_one(store_id, extra=("--sync-deletions", "log_only"))
    (mnt / "a.md").unlink()
    (mnt / "b.md").unlink()
    mounter.sync(mnt)
    assert (mnt / "a.md").read_text() == "a" and (mnt / "b.md").read_text() == "b"
    assert "looks like a wipe" in log_of(mounter, store_id)


def test_log_only_says_what_enabled_would_delete_with_its_cap(mounter, memfs_server):
    store_id = memfs_server.create_store("dry run")["id"]
    seed(memfs_server, store_id, 40)
    mnt = mounter.mount_one(store_id, extra=("--sync-deletions", "log_only"))
    for i in range(30):
        (mnt / "n" / f"{i:02}.md").unlink()
    mounter.sync(mnt)
    assert "would delete" not in log_of(mounter, store_id)  # the window is not over yet
    mounter.unmount(mnt)  # the final sync waives the window, not the cap
    assert len(remote_files(memfs_server, store_id)) == 40
    assert log_of(mounter, store_id).count("memfs would delete it now (deletions: log_only)") == 10


def test_the_final_sync_sends_at_most_one_pass_s_cap_of_deletes(mounter, memfs_server):
    store_id = memfs_server.create_store("capped end")["id"]
    seed(memfs_server, store_id, 40)
    mnt = mounter.mount_one(store_id)
    for i in range(30):
        (mnt / "n" / f"{i:02}.md").unlink()
    r = mounter.unmount(mnt, check=False)
    assert r.returncode == 1  # something is left behind, and said
    assert len(remote_files(memfs_server, store_id)) == 30  # max(8, min(50, 40 // 4)) sent
    held = [line for line in r.stderr.splitlines() if line.endswith(" (deleted)")]
    assert len(held) == 20  # each named in the stop's output, and in the log with its fate
    log = log_of(mounter, store_id)
    assert log.count("the end of a session sends at most 10 deletes") == 20
    assert log.count("the next mount of the store with this cache sends it") == 20
    # The next mount of the store with that cache sends them, a cap at a time.
    mnt = mounter.mount_one(store_id)
    mounter.unmount(mnt, check=False)
    assert len(remote_files(memfs_server, store_id)) == 30 - 8  # n is 30 now: the floor, 8


def test_a_sigterm_sends_every_upload_but_only_deletes_whose_window_passed(mounter, memfs_server):
    store_id = memfs_server.create_store("sigterm")["id"]
    put_remote(memfs_server, store_id, "/gone.md", "deleted just before the stop")
    put_remote(memfs_server, store_id, "/kept.md", "v1")
    mnt = mounter.mount_one(store_id)
    (mnt / "gone.md").unlink()
    (mnt / "kept.md").write_text("v2")
    (pid,) = mounter.store_pids()
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while mounter.store_pids() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert remote_files(memfs_server, store_id) == {
        "/gone.md": "deleted just before the stop",
        "/kept.md": "v2",
    }
    assert "/gone.md (deleted) (the delete is held back: deleted less than 30 s before" in (
        log_of(mounter, store_id)
    )
    # `memfs unmount` has no writer to outlive: the next mount's stop sends it.
    mnt = mounter.mount_one(store_id)
    assert not (mnt / "gone.md").exists()
    mounter.unmount(mnt)
    assert remote_files(memfs_server, store_id) == {"/kept.md": "v2"}


def test_the_final_sync_says_what_becomes_of_a_file_refused_as_too_large(mounter, memfs_server):
    store_id = memfs_server.create_store("too large")["id"]
    mnt = mounter.mount_one(store_id)
    (mnt / "ok.md").write_text("fine")
    with open(mnt / "big.md", "wb") as f:
        f.write(b"x" * 1000)
        try:
            f.write(b"y" * 200_000)
            f.flush()
        except OSError:
            pass
    r = mounter.unmount(mnt, check=False)
    assert r.stderr == f"memfs: not uploaded from {mnt}: /big.md\n"
    lines = [ln for ln in log_of(mounter, store_id).splitlines() if "not uploaded to" in ln]
    assert len(lines) == 1 and lines[0].endswith(
        f"not uploaded to {store_id}: /big.md (a write past 102,400 bytes was refused (EFBIG): "
        "it stays in the cache and is uploaded only once it is written again within the limit)"
    )
    assert remote_files(memfs_server, store_id) == {"/ok.md": "fine"}


def test_the_final_sync_names_an_edit_the_store_overruled_as_not_uploaded(mounter, memfs_server):
    """An edit the final sync finds overruled (the store changed the file
    meanwhile) is kept as a conflict copy in the cache alone, which a sandbox
    may throw away: the stop names it and exits 1, as for a file left behind."""
    store_id = memfs_server.create_store("overruled at the end")["id"]
    put_remote(memfs_server, store_id, "/notes.md", "first")
    mnt = mounter.mount_one(store_id, extra=("--sync-interval", "3600", "--write-behind", "no"))
    put_remote(memfs_server, store_id, "/notes.md", "theirs")
    (mnt / "notes.md").write_text("mine, last")
    r = mounter.unmount(mnt, check=False)
    assert (r.returncode, r.stderr) == (1, f"memfs: not uploaded from {mnt}: /notes.md\n")
    [line] = [ln for ln in log_of(mounter, store_id).splitlines() if "not uploaded to" in ln]
    copy = line.split("the edit is kept only at ")[1].rstrip(")")
    assert Path(copy).read_text() == "mine, last"
    assert remote_files(memfs_server, store_id) == {"/notes.md": "theirs"}


def test_memfs_sync_tries_a_held_file_again_at_once(mounter, memfs_server):
    store_id = memfs_server.create_store("held")["id"]
    with FaultProxyProcess(memfs_server.url) as proxy:
        mnt = mounter.mount_one(store_id, extra=("--api-url", proxy.url))
        proxy.set(status=403, status_next=1, match_method="POST", match_path="/memories")
        (mnt / "h.md").write_text("held once")
        mounter.sync(mnt)
        assert "/h.md" in mounter.status()[0]["refused"]
        mounter.sync(mnt)  # the periodic passes would wait 15 s first
        assert mounter.status()[0]["refused"] == {}
    assert remote_files(memfs_server, store_id) == {"/h.md": "held once"}
