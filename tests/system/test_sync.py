"""Whole-system sync scenarios: real mounts, a real `memfs serve`, passes driven
with `memfs sync`, and faults from a proxy process between memfs and the store."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import threading
import time
from pathlib import Path

import pytest

from tests.support import conflict_files
from tests.support.faults import FaultProxyProcess


def remote_files(server, store_id: str) -> dict[str, str]:
    http = server.http()
    out, page = {}, None
    while True:
        params = {"view": "full", "limit": 20}
        if page:
            params["page"] = page
        body = http.get(f"/v1/memory_stores/{store_id}/memories", params=params).json()
        out.update({m["path"]: m["content"] for m in body["data"]})
        page = body.get("next_page")
        if not page:
            return out


def put_remote(server, store_id: str, path: str, content: str) -> dict:
    http = server.http()
    r = http.post(f"/v1/memory_stores/{store_id}/memories", json={"path": path, "content": content})
    if r.status_code == 409:
        mid = r.json()["error"]["conflicting_memory_id"]
        r = http.post(f"/v1/memory_stores/{store_id}/memories/{mid}", json={"content": content})
    assert r.status_code == 200, r.text
    return r.json()


def memory_id(server, store_id: str, path: str) -> str:
    body = server.http().get(f"/v1/memory_stores/{store_id}/memories", params={"limit": 100}).json()
    return next(m["id"] for m in body["data"] if m["path"] == path)


def test_remote_changes_reach_the_mount_through_the_kernel_cache(mounter, memfs_server):
    store_id = memfs_server.create_store("pulls")["id"]
    put_remote(memfs_server, store_id, "/a.md", "first")
    put_remote(memfs_server, store_id, "/moved/m.md", "moving")
    put_remote(memfs_server, store_id, "/gone.md", "bye")
    path = mounter.mount_one(store_id)
    assert (path / "a.md").read_text() == "first"  # now in the kernel's page cache
    with open(path / "gone.md") as held:
        put_remote(memfs_server, store_id, "/a.md", "second, longer")
        put_remote(memfs_server, store_id, "/new/b.md", "brand new")
        mid = memory_id(memfs_server, store_id, "/moved/m.md")
        memfs_server.http().post(
            f"/v1/memory_stores/{store_id}/memories/{mid}", json={"path": "/m2.md"}
        )
        gid = memory_id(memfs_server, store_id, "/gone.md")
        memfs_server.http().delete(f"/v1/memory_stores/{store_id}/memories/{gid}")
        mounter.sync(path)
        assert (path / "a.md").read_text() == "second, longer"
        assert (path / "a.md").stat().st_size == len("second, longer")
        assert (path / "new" / "b.md").read_text() == "brand new"
        assert (path / "m2.md").read_text() == "moving" and not (path / "moved").exists()
        assert not (path / "gone.md").exists()
        assert held.read() == "bye"  # an open file keeps its content until closed


def test_local_changes_reach_the_store_on_sync(mounted, mounter, memfs_server):
    store_id, path = mounted
    (path / "dir").mkdir()
    (path / "dir" / "x.md").write_text("x")
    (path / "y.md").write_text("y")
    mounter.sync(path)
    assert remote_files(memfs_server, store_id) == {"/dir/x.md": "x", "/y.md": "y"}
    os.rename(path / "dir", path / "renamed")
    (path / "y.md").unlink()
    mounter.sync(path)
    files = remote_files(memfs_server, store_id)
    assert files == {"/renamed/x.md": "x", "/y.md": "y"}  # the delete waits for its window
    mounter.unmount(path)  # the final sync waives the window
    assert remote_files(memfs_server, store_id) == {"/renamed/x.md": "x"}


def test_names_swapped_in_the_mount_are_swapped_in_the_store(mounted, mounter, memfs_server):
    """`mv a t; mv b a; mv t b` between two syncs: each memory moves where the
    other stood, keeping its id, in one `memfs sync` (before, each move waited
    for the other's path forever)."""
    store_id, path = mounted
    (path / "a.md").write_text("A")
    (path / "b.md").write_text("B")
    mounter.sync(path)
    ids = {p: memory_id(memfs_server, store_id, p) for p in ("/a.md", "/b.md")}
    os.rename(path / "a.md", path / "t.md")
    os.rename(path / "b.md", path / "a.md")
    os.rename(path / "t.md", path / "b.md")
    r = mounter.sync(path)
    assert r.stdout.startswith(f"{path}: pushed 2,"), r.stdout
    assert remote_files(memfs_server, store_id) == {"/a.md": "B", "/b.md": "A"}
    assert memory_id(memfs_server, store_id, "/a.md") == ids["/b.md"]
    assert memory_id(memfs_server, store_id, "/b.md") == ids["/a.md"]
    mounter.unmount(path)
    assert remote_files(memfs_server, store_id) == {"/a.md": "B", "/b.md": "A"}


def test_conflict_keeps_the_local_version_beside_the_cache(mounted, mounter, memfs_server):
    store_id, path = mounted
    (path / "c.md").write_text("base")
    mounter.sync(path)
    put_remote(memfs_server, store_id, "/c.md", "theirs")
    (path / "c.md").write_text("mine")
    mounter.sync(path)
    assert (path / "c.md").read_text() == "theirs"
    copies = conflict_files(mounter.cache_dir / store_id / "conflicts")
    assert [c.read_text() for c in copies] == ["mine"]
    log = (mounter.cache_dir / store_id / "memfs.log").read_text()
    assert "conflict on /c.md" in log and str(copies[0]) in log


def test_editor_save_is_one_update_and_the_temporary_file_never_reaches_the_store(
    mounted, mounter, memfs_server
):
    store_id, path = mounted
    (path / "doc.md").write_text("v1")
    mounter.sync(path)
    tmp = path / ".doc.md.swp"
    with open(tmp, "w") as f:
        f.write("v2")
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path / "doc.md")
    mounter.sync(path)
    assert remote_files(memfs_server, store_id) == {"/doc.md": "v2"}
    versions = (
        memfs_server.http().get(f"/v1/memory_stores/{store_id}/memory_versions").json()["data"]
    )
    assert [(v["operation"], v["path"]) for v in versions] == [
        ("modified", "/doc.md"),
        ("created", "/doc.md"),
    ]


def test_deletions_disabled_keeps_the_memory(mounter, memfs_server):
    store_id = memfs_server.create_store("keep")["id"]
    put_remote(memfs_server, store_id, "/k.md", "kept")
    path = mounter.mount_one(store_id, extra=("--sync-deletions", "disabled"))
    (path / "k.md").unlink()
    mounter.unmount(path)
    assert remote_files(memfs_server, store_id) == {"/k.md": "kept"}


def test_store_outage_then_catch_up(mounter, memfs_server):
    store_id = memfs_server.create_store("outage")["id"]
    put_remote(memfs_server, store_id, "/cached.md", "cached")
    with FaultProxyProcess(memfs_server.url) as proxy:
        path = mounter.mount_one(store_id, extra=("--api-url", proxy.url))
        mounter.sync(path)
        assert (path / "cached.md").read_text() == "cached"
        proxy.set(down=True)
        (path / "offline.md").write_text("written while the store is down")
        with open(path / "cached.md", "a") as f:
            f.write(" and appended")
        r = mounter.sync(path, check=False)
        assert r.returncode == 1
        assert "could not be reached" in r.stderr and "Traceback" not in r.stderr
        status = mounter.status()[0]
        assert status["last_error"] and "/offline.md" in status["pending"]
        assert (path / "cached.md").read_text() == "cached and appended"
        proxy.set(down=False)
        mounter.sync(path)
        assert remote_files(memfs_server, store_id) == {
            "/cached.md": "cached and appended",
            "/offline.md": "written while the store is down",
        }


def test_refused_token_keeps_local_changes(mounter, memfs_server):
    store_id = memfs_server.create_store("auth")["id"]
    with FaultProxyProcess(memfs_server.url) as proxy:
        path = mounter.mount_one(store_id, extra=("--api-url", proxy.url))
        (path / "mine.md").write_text("keep me")
        proxy.set(status=401, status_rate=1.0)
        r = mounter.sync(path, check=False)
        assert r.returncode == 1 and "refused the token (401)" in r.stderr
        assert (path / "mine.md").read_text() == "keep me"
        proxy.reset()
        mounter.sync(path)
    assert remote_files(memfs_server, store_id) == {"/mine.md": "keep me"}


def test_parallel_stores_one_failing_spares_the_other(mounter, memfs_server):
    good = memfs_server.create_store("good")["id"]
    bad = memfs_server.create_store("bad")["id"]
    with FaultProxyProcess(memfs_server.url) as proxy:
        good_path = mounter.mount_one(good, "good")
        bad_path = mounter.mount_one(bad, "bad", extra=("--api-url", proxy.url))
        proxy.set(down=True)
        (good_path / "g.md").write_text("good")
        (bad_path / "b.md").write_text("bad")
        r = mounter.memfs("sync")
        assert r.returncode == 1
        assert str(bad_path) in r.stderr and str(good_path) not in r.stderr
        assert remote_files(memfs_server, good) == {"/g.md": "good"}
        assert remote_files(memfs_server, bad) == {}
        proxy.set(down=False)


def test_final_sync_is_bounded_and_what_is_left_is_uploaded_by_the_next_mount(
    mounter, memfs_server
):
    """The store hangs (it takes requests and never answers): only the bound of
    3 s ends the final sync, well before the client's own 30 s timeout."""
    store_id = memfs_server.create_store("bounded")["id"]
    with FaultProxyProcess(memfs_server.url) as proxy:
        path = mounter.mount_one(
            store_id, extra=("--api-url", proxy.url, "--final-sync-timeout", "3")
        )
        (path / "late.md").write_text("must not be lost")
        before = proxy.set(delay=600)["counters"]
        started = time.monotonic()
        r = mounter.unmount(path, check=False, timeout=30)
        stopped_in = time.monotonic() - started
        assert 3 <= stopped_in < 25, f"the stop took {stopped_in:.1f} s with a 3 s bound"
        assert r.returncode == 1
        assert "/late.md" in r.stderr
        assert not path.exists()
        after = proxy.state()["counters"]
        assert after["requests_seen"] > before["requests_seen"], "the final sync asked nothing"
        assert after["forwarded"] == before["forwarded"], "a request got through the hang"
    log = (mounter.cache_dir / store_id / "memfs.log").read_text()
    assert f"final sync of {store_id} did not finish within 3 s" in log
    assert "not uploaded" in log and "/late.md" in log
    assert remote_files(memfs_server, store_id) == {}
    path = mounter.mount_one(store_id)
    assert (path / "late.md").read_text() == "must not be lost"
    assert remote_files(memfs_server, store_id) == {"/late.md": "must not be lost"}


class Writes:
    """What the writer thread knows: `returned[name]` is the content whose one
    write() returned (the file must hold it after any kill); `inflight` the
    write the kill may cut short: (name, content, whether open returned)."""

    def __init__(self) -> None:
        self.returned: dict[str, str] = {}
        self.inflight: tuple[str, str, bool] | None = None

    def allowed(self, name: str) -> set[str | None]:
        """What `name` may hold now (None: no file)."""
        if self.inflight is None or self.inflight[0] != name:
            return {self.returned.get(name)}
        _, content, opened = self.inflight
        cut = {content[:i] for i in range(len(content) + 1)}  # O_TRUNC done, write() cut short
        return cut if opened else cut | {self.returned.get(name)}


def _writer(root: Path, stop: threading.Event, writes: Writes, round_no: int) -> None:
    """Rewrites 25 files over and over, each with one open(O_TRUNC) and one write()."""
    i = 0
    while not stop.is_set():
        name = f"f{i % 25:02}.md"
        content = f"round {round_no} write {i}\n" * (1 + i % 7)
        writes.inflight = (name, content, False)
        try:
            fd = os.open(root / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        except OSError:
            return
        writes.inflight = (name, content, True)
        try:
            written = os.write(fd, content.encode())
        except OSError:
            return
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)
        assert written == len(content.encode())
        writes.returned[name] = content
        writes.inflight = None
        i += 1


def _check_recovered(path: Path, writes: Writes) -> None:
    """Every file holds what its last returned write() left, the one the kill
    cut short one of the contents it may hold, and there is nothing else."""
    names = {n for n in os.listdir(path) if n.endswith(".md")}
    expected = set(writes.returned) | ({writes.inflight[0]} if writes.inflight else set())
    assert names <= expected, f"files nobody wrote: {names - expected}"
    for name in expected:
        now = (path / name).read_text() if name in names else None
        assert now in writes.allowed(name), f"{name} holds {now!r}"
        if now is not None:
            writes.returned[name] = now  # what the cache recovered is kept from now on
        else:
            writes.returned.pop(name, None)
    writes.inflight = None


def test_sigkill_loses_nothing_a_closed_write_returned_for(mounter, memfs_server):
    """SIGKILL of the store process while a writer rewrites files: each next
    mount recovers every file whose write() had returned, exactly, and the store
    ends up with what the mount shows."""
    store_id = memfs_server.create_store("crashy")["id"]
    writes = Writes()
    rng = random.Random(7)
    for round_no in range(4):
        path = mounter.mount_one(store_id)  # cleans the stale mount, recovers, reconciles
        _check_recovered(path, writes)
        stop = threading.Event()
        t = threading.Thread(target=_writer, args=(path, stop, writes, round_no))
        t.start()
        time.sleep(rng.uniform(0.2, 0.6))
        for pid in mounter.store_pids():
            os.kill(pid, signal.SIGKILL)
        stop.set()
        t.join(10)
        assert not t.is_alive()
        assert writes.returned, "the writer wrote nothing before the kill"
    path = mounter.mount_one(store_id)
    _check_recovered(path, writes)
    local = {n: (path / n).read_text() for n in os.listdir(path) if n.endswith(".md")}
    assert local == writes.returned
    mounter.unmount(path)
    assert remote_files(memfs_server, store_id) == {"/" + n: c for n, c in local.items()}


@pytest.mark.slow
def test_real_cadence_five_seconds(mounter, memfs_server):
    store_id = memfs_server.create_store("cadence")["id"]
    path = mounter.mount_one(store_id, extra=("--sync-interval", "5"))
    (path / "up.md").write_text("going up")
    deadline = time.monotonic() + 10
    while remote_files(memfs_server, store_id).get("/up.md") != "going up":
        assert time.monotonic() < deadline, (
            "a local change did not reach the store within two intervals"
        )
        time.sleep(0.25)
    put_remote(memfs_server, store_id, "/down.md", "coming down")
    deadline = time.monotonic() + 10
    while not (path / "down.md").exists():
        assert time.monotonic() < deadline, (
            "a remote change did not reach the mount within two intervals"
        )
        time.sleep(0.25)
    assert (path / "down.md").read_text() == "coming down"
