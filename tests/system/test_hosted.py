"""What the hosted API can answer and `memfs serve` never does by itself, imitated
by the fault proxy between real mounts and a real `memfs serve`: refusals of
one memory, a refused version feed, answers lost after the store applied the
change; and what a user does that must not hurt the store: wiping the folder,
deleting twice, writing half a file or more than a memory holds."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time

import pytest

from memfs.api import MAX_CONTENT_BYTES
from memfs.testing import FakeStore
from tests.support import conflict_files
from tests.support.faults import FaultProxyProcess


def remote_files(server, store_id: str) -> dict[str, str]:
    """Every memory of the store: path -> content."""
    return FakeStore(server, store_id).memories()


def put_remote(server, store_id: str, path: str, content: str) -> dict:
    with server.http() as http:
        r = http.post(
            f"/v1/memory_stores/{store_id}/memories",
            params={"view": "full"},
            json={"path": path, "content": content},
        )
        if r.status_code == 409:
            mid = r.json()["error"]["conflicting_memory_id"]
            r = http.post(f"/v1/memory_stores/{store_id}/memories/{mid}", json={"content": content})
    assert r.status_code == 200, r.text
    return r.json()


def memory_ids(server, store_id: str) -> dict[str, str]:
    with server.http() as http:
        body = http.get(f"/v1/memory_stores/{store_id}/memories", params={"limit": 100}).json()
    return {m["path"]: m["id"] for m in body["data"]}


def store_log(mounter, store_id: str) -> str:
    return (mounter.cache_dir / store_id / "memfs.log").read_text()


def conflict_copies(mounter, store_id: str) -> list:
    return conflict_files(mounter.cache_dir / store_id / "conflicts")


@pytest.fixture
def proxy(memfs_server):
    p = FaultProxyProcess(memfs_server.url).start()
    try:
        yield p
    finally:
        p.stop()


# ---- 2. one memory's refusal is that memory's alone -------------------------


@pytest.mark.parametrize(
    "status, error_type",
    [(403, "permission_error"), (409, "conflict_error"), (402, "billing_error"), (412, None)],
)
def test_one_refused_memory_does_not_stop_the_others(
    mounter, memfs_server, proxy, status, error_type
):
    store_id = memfs_server.create_store("refusals")["id"]
    for name in ("a", "b", "c"):
        put_remote(memfs_server, store_id, f"/{name}.md", f"{name} v1")
    path = mounter.mount_one(store_id, extra=("--api-url", proxy.url))
    refused_id = memory_ids(memfs_server, store_id)["/b.md"]
    proxy.set(
        status=status,
        error_type=error_type,
        status_rate=1.0,
        match_method="POST",
        match_path=f"/memories/{refused_id}",
    )
    for name in ("a", "b", "c", "d"):
        (path / f"{name}.md").write_text(f"{name} v2")
    r = mounter.sync(path, check=False)
    assert r.returncode == 0, r.stderr
    assert remote_files(memfs_server, store_id) == {
        "/a.md": "a v2",
        "/b.md": "b v1",
        "/c.md": "c v2",
        "/d.md": "d v2",
    }
    [status_entry] = mounter.status()
    assert str(status) in status_entry["refused"]["/b.md"]
    assert "/b.md" in status_entry["pending"]
    mounter.sync(path)  # `memfs sync` tries it again at once; refused again, logged once
    assert store_log(mounter, store_id).count("/b.md is not uploaded") == 1
    proxy.reset()
    (path / "b.md").write_text("b v3")  # a change is tried at once
    mounter.sync(path)
    assert remote_files(memfs_server, store_id)["/b.md"] == "b v3"
    assert mounter.status()[0]["refused"] == {}


def test_a_memory_deleted_in_the_store_is_created_again_in_the_same_pass(
    mounter, memfs_server, proxy
):
    store_id = memfs_server.create_store("recreate")["id"]
    put_remote(memfs_server, store_id, "/gone.md", "v1")
    put_remote(memfs_server, store_id, "/other.md", "other")
    path = mounter.mount_one(store_id, extra=("--api-url", proxy.url))
    gone_id = memory_ids(memfs_server, store_id)["/gone.md"]
    # The update waits in the proxy while the memory is deleted in the store:
    # the feed saw nothing, the update meets a real 404.
    update = f"/v1/memory_stores/{store_id}/memories/{gone_id}"
    proxy.set(delay=3.0, match_method="POST", match_path=f"/memories/{gone_id}")
    (path / "gone.md").write_text("v2, written here")
    sync = subprocess.Popen(
        [sys.executable, "-m", "memfs", "sync", str(path)], env=mounter.env, text=True
    )
    deadline = time.monotonic() + 30
    while proxy.state()["counters"]["requests_by_method_path"].get(f"POST {update}", 0) == 0:
        assert time.monotonic() < deadline, "the pass sent no update"
        time.sleep(0.05)
    with memfs_server.http() as http:
        assert http.delete(update).status_code == 200
    assert sync.wait(60) == 0
    exchanges = proxy.state()["counters"]["exchanges"]
    updates = [
        status
        for method, target, status in exchanges
        if method == "POST" and target.split("?")[0] == update
    ]
    assert updates == [404], "the update did not meet the delete in the proxy"
    assert remote_files(memfs_server, store_id) == {
        "/gone.md": "v2, written here",
        "/other.md": "other",
    }
    assert memory_ids(memfs_server, store_id)["/gone.md"] != gone_id


# ---- 3. the version feed is an optimisation --------------------------------------


@pytest.mark.parametrize("status", [401, 403, 404])
def test_a_refused_version_feed_falls_back_to_listings(mounter, memfs_server, proxy, status):
    store_id = memfs_server.create_store("no feed")["id"]
    put_remote(memfs_server, store_id, "/first.md", "there at mount")
    proxy.set(status=status, status_rate=1.0, match_path="/memory_versions")
    path = mounter.mount_one(store_id, extra=("--api-url", proxy.url))
    assert (path / "first.md").read_text() == "there at mount"
    put_remote(memfs_server, store_id, "/later.md", "arrived by a listing")
    put_remote(memfs_server, store_id, "/first.md", "changed in the store")
    (path / "mine.md").write_text("pushed as usual")
    mounter.sync(path)
    assert (path / "later.md").read_text() == "arrived by a listing"
    assert (path / "first.md").read_text() == "changed in the store"
    assert remote_files(memfs_server, store_id)["/mine.md"] == "pushed as usual"
    [status_entry] = mounter.status()
    assert status_entry["sync_mode"] == "listing"
    assert str(status) in status_entry["sync_mode_reason"]
    mounter.sync(path)
    assert store_log(mounter, store_id).count("the version feed of") == 1


# ---- 4. a wipe is not a request to delete the store -----------------------------


def test_a_wiped_folder_deletes_nothing_and_is_restored(mounter, memfs_server):
    store_id = memfs_server.create_store("wipe")["id"]
    files = {"/a.md": "a", "/notes/b.md": "b", "/notes/deep/c.md": "c"}
    for p, text in files.items():
        put_remote(memfs_server, store_id, p, text)
    path = mounter.mount_one(store_id)
    for entry in os.listdir(path):
        target = path / entry
        if target.is_dir():
            for root, dirs, names in os.walk(target, topdown=False):
                for n in names:
                    os.unlink(os.path.join(root, n))
                for d in dirs:
                    os.rmdir(os.path.join(root, d))
            os.rmdir(target)
        elif not entry.startswith(".anthropic"):
            target.unlink()
    mounter.sync(path)
    assert remote_files(memfs_server, store_id) == files
    assert (path / "notes" / "deep" / "c.md").read_text() == "c"
    assert "looks like a wipe" in store_log(mounter, store_id)
    # The final sync applies the same rule.
    for p in files:
        (path / p.lstrip("/")).unlink()
    mounter.unmount(path)
    assert remote_files(memfs_server, store_id) == files


def test_deleting_some_files_still_deletes_them(mounter, memfs_server):
    store_id = memfs_server.create_store("some")["id"]
    for name in ("keep", "drop1", "drop2"):
        put_remote(memfs_server, store_id, f"/{name}.md", name)
    path = mounter.mount_one(store_id)
    (path / "drop1.md").unlink()
    (path / "drop2.md").unlink()
    mounter.unmount(path)
    assert remote_files(memfs_server, store_id) == {"/keep.md": "keep"}


# ---- 5. a lost answer is not a conflict ------------------------------------------


def test_a_lost_answer_to_an_update_then_a_new_edit_reaches_the_store(mounter, memfs_server, proxy):
    store_id = memfs_server.create_store("lost update")["id"]
    put_remote(memfs_server, store_id, "/note.md", "v0")
    path = mounter.mount_one(store_id, extra=("--api-url", proxy.url))
    note_id = memory_ids(memfs_server, store_id)["/note.md"]
    # Every attempt is applied (the first) or answered 409 (the retries), and
    # every answer is lost: the pass ends without knowing.
    proxy.set(lose_answer_next=10, match_method="POST", match_path=f"/memories/{note_id}")
    (path / "note.md").write_text("v1")
    assert mounter.sync(path, check=False).returncode == 1
    assert remote_files(memfs_server, store_id) == {"/note.md": "v1"}
    proxy.reset()
    (path / "note.md").write_text("v2")
    mounter.sync(path)
    assert remote_files(memfs_server, store_id) == {"/note.md": "v2"}
    assert (path / "note.md").read_text() == "v2"
    assert conflict_copies(mounter, store_id) == []
    assert "conflict on" not in store_log(mounter, store_id)


def test_a_lost_answer_to_a_create_then_a_new_edit_reaches_the_store(mounter, memfs_server, proxy):
    store_id = memfs_server.create_store("lost create")["id"]
    path = mounter.mount_one(store_id, extra=("--api-url", proxy.url))
    proxy.set(lose_answer_next=10, match_method="POST", match_path=r"/memories(\?|$)")
    (path / "new.md").write_text("v1")
    assert mounter.sync(path, check=False).returncode == 1
    assert remote_files(memfs_server, store_id) == {"/new.md": "v1"}
    proxy.reset()
    (path / "new.md").write_text("v2")
    mounter.sync(path)
    assert remote_files(memfs_server, store_id) == {"/new.md": "v2"}
    assert (path / "new.md").read_text() == "v2"
    assert conflict_copies(mounter, store_id) == []


def test_a_lost_answer_to_a_create_then_a_delete_deletes_it(mounter, memfs_server, proxy):
    store_id = memfs_server.create_store("lost then gone")["id"]
    put_remote(memfs_server, store_id, "/stays.md", "stays")
    path = mounter.mount_one(store_id, extra=("--api-url", proxy.url))
    proxy.set(lose_answer_next=10, match_method="POST", match_path=r"/memories(\?|$)")
    (path / "brief.md").write_text("soon gone")
    assert mounter.sync(path, check=False).returncode == 1
    proxy.reset()
    (path / "brief.md").unlink()
    mounter.unmount(path)
    assert remote_files(memfs_server, store_id) == {"/stays.md": "stays"}


# ---- 6. deletion window ------------------------------------------------------------


@pytest.mark.slow
def test_a_second_deletion_after_a_re_create_gets_a_window_of_its_own(mounter, memfs_server):
    store_id = memfs_server.create_store("window")["id"]
    put_remote(memfs_server, store_id, "/x.md", "x")
    put_remote(memfs_server, store_id, "/other.md", "other")
    path = mounter.mount_one(store_id)
    (path / "x.md").unlink()
    mounter.sync(path)  # the first window starts here
    time.sleep(20)
    (path / "x.md").write_text("x again")
    (path / "x.md").unlink()  # a second deletion: its window starts at the next pass
    time.sleep(11)
    mounter.sync(path)
    assert "/x.md" in remote_files(memfs_server, store_id)


# ---- 7. the final sync finishes in time on a real link -----------------------------


@pytest.mark.slow
def test_a_final_sync_of_2000_new_files_past_its_bound_reports_and_keeps_what_it_left(
    mounter, memfs_server, proxy
):
    """How long a final sync of 2,000 files takes on a real link is measured in
    bench/final_sync_bench.py; here the link is slow enough that no machine
    finishes within the bound, and what the stop left is named and kept."""
    store_id = memfs_server.create_store("many")["id"]
    path = mounter.mount_one(store_id, extra=("--api-url", proxy.url, "--final-sync-timeout", "1"))
    for d in range(20):
        (path / f"d{d:02}").mkdir()
        for i in range(100):
            (path / f"d{d:02}" / f"f{i:03}.md").write_text(f"file {d}/{i}\n")
    proxy.set(delay=0.5)
    r = mounter.unmount(path, check=False)
    assert r.returncode == 1, r.stderr[-2000:]
    assert "not uploaded" in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert len(remote_files(memfs_server, store_id)) < 2000

    proxy.set(delay=0)
    mounter.mount_one(store_id, extra=("--api-url", proxy.url))
    stored = remote_files(memfs_server, store_id)
    assert len(stored) == 2000 and stored["/d07/f042.md"] == "file 7/42\n"


# ---- 10. no torn memories ------------------------------------------------------------


def test_a_pass_while_a_file_is_half_written_leaves_the_store_alone(mounter, memfs_server):
    store_id = memfs_server.create_store("torn")["id"]
    put_remote(memfs_server, store_id, "/doc.md", "the whole old text")
    path = mounter.mount_one(store_id)
    with open(path / "doc.md", "w") as f:
        f.write("the first half of the new")
        f.flush()
        mounter.sync(path)
        assert remote_files(memfs_server, store_id) == {"/doc.md": "the whole old text"}
        f.write(" text, and its second half")
    mounter.sync(path)
    assert remote_files(memfs_server, store_id) == {
        "/doc.md": "the first half of the new text, and its second half"
    }


def test_a_writer_that_keeps_a_file_open_still_syncs(mounter, memfs_server):
    store_id = memfs_server.create_store("log writer")["id"]
    path = mounter.mount_one(store_id)
    with open(path / "log.md", "w") as f:
        f.write("line 1\n")
        f.flush()
        time.sleep(2.5)  # no write for more than 2 s
        mounter.sync(path)
        assert remote_files(memfs_server, store_id) == {"/log.md": "line 1\n"}


def test_an_efbig_write_leaves_the_store_alone_until_rewritten(mounter, memfs_server):
    store_id = memfs_server.create_store("too big")["id"]
    put_remote(memfs_server, store_id, "/big.md", "the stored version")
    path = mounter.mount_one(store_id)
    with pytest.raises(OSError) as info, open(path / "big.md", "w") as f:
        f.write("x" * 150_000)
    assert info.value.errno == errno.EFBIG
    assert (path / "big.md").stat().st_size <= MAX_CONTENT_BYTES
    mounter.sync(path)
    assert remote_files(memfs_server, store_id) == {"/big.md": "the stored version"}
    [status_entry] = mounter.status()
    assert "too large" in status_entry["refused"]["/big.md"]
    (path / "big.md").write_text("small enough")
    mounter.sync(path)
    assert remote_files(memfs_server, store_id) == {"/big.md": "small enough"}
    assert mounter.status()[0]["refused"] == {}
