"""What an operator reads of live mounts: `memfs status` in both forms, and the
Prometheus endpoint of `--metrics-addr` after real traffic."""

from __future__ import annotations

import os
import socket
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from memfs.testing import FakeStore
from tests.mount.test_lifecycle import git_commit_in
from tests.support.faults import FaultProxyProcess
from tests.support.mounts import memfs_mounts_under


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int) -> dict[str, list]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def cell_under(header: str, row: str, name: str) -> str:
    """A right-aligned column's cell: it ends where the column's name ends."""
    end = header.index(name) + len(name)
    assert row[end : end + 1] in ("", " "), (name, row)
    words = row[:end].split()
    return " ".join(words[-2:]) if name == "CACHED" else words[-1]


@pytest.fixture
def busy_store(mounter, memfs_server):
    """A mounted store with something of everything: synced files, local edits,
    a pending delete, a conflict copy and a refused (too large) file."""
    store_id = memfs_server.create_store("Busy Notes")["id"]
    for name in ("a", "b", "c", "d"):
        FakeStore(memfs_server, store_id).put(f"/{name}.md", f"{name} stored")
    # No push but those the test asks for: the edits stay pending.
    extra = ("--sync-interval", "3600", "--write-behind", "no")
    path = mounter.mount_one(store_id, "busy", extra=extra)
    (path / "c.md").write_text("c here")
    mounter.sync(path)
    FakeStore(memfs_server, store_id).put("/c.md", "c in the store")
    (path / "c.md").write_text("c here, again")
    mounter.sync(path)  # the store wins: a conflict copy
    (path / "new.md").write_text("new here")
    (path / "a.md").write_text("a edited")
    (path / "b.md").unlink()
    with pytest.raises(OSError), open(path / "d.md", "w") as f:
        f.write("x" * 150_000)
    return store_id, path


def test_status_in_both_forms_says_what_is_pending(mounter, busy_store):
    store_id, path = busy_store
    [st] = mounter.status()
    assert st["store_id"] == store_id and st["mount_path"] == str(path)
    assert st["access"] == "read_write"
    assert st["dirty"] == 3  # new.md, a.md, d.md (held back: too large)
    assert st["pending_deletes"] == 1
    assert st["memories"] == 3  # a, c, d (b is deleted here, new is not in the store)
    assert st["cached_bytes"] == sum(
        os.path.getsize(path / n) for n in ("a.md", "c.md", "d.md", "new.md")
    )
    [copy] = st["conflict_copies"]
    with open(copy) as f:
        assert f.read() == "c here, again"
    assert "too large" in st["refused"]["/d.md"]
    assert st["sync_mode"] == "feed"
    assert st["last_pass"]["result"] == "ok" and st["last_pass"]["duration_s"] > 0
    assert st["next_pass_at"] > time.time() + 3000
    assert st["bytes_up"] > 0 and st["bytes_down"] > 0

    r = mounter.memfs("status", check=True)
    lines = r.stdout.splitlines()
    assert lines[1] == str(path)  # the mount path, whole, on a line of its own
    assert all(len(row) <= 80 for row in (lines[0], lines[2])), lines
    assert lines[3].startswith("  store ")  # the details, indented, name whole paths
    header, row = lines[0], lines[2]
    assert header.split() == [
        "ACCESS", "MEMORIES", "CACHED", "DIRTY", "DELETES", "CONFL", "REFUSED", "MODE", "LAST",
        "NEXT",
    ]  # fmt: skip
    assert row.startswith("rw ")
    counts = [cell_under(header, row, n) for n in ("MEMORIES", "DIRTY", "DELETES", "CONFL")]
    assert counts == ["3", "3", "1", "1"] and cell_under(header, row, "REFUSED") == "1"
    assert cell_under(header, row, "CACHED").endswith(" B")
    mode, result, _, next_in, _ = row.split()[-5:]  # MODE, LAST (result, age), NEXT
    assert (mode, result, next_in) == ("feed", "ok", "in"), row
    assert any(line.strip() == f"conflict copy: {copy}" for line in lines)
    assert any("refused: /d.md: too large" in line for line in lines)
    assert any(line.startswith(f"  store {store_id}") for line in lines)


def test_the_metrics_endpoint_after_real_traffic(mounter, memfs_server):
    store_id = memfs_server.create_store("Metrics")["id"]
    port = free_port()
    path = mounter.mount_one(store_id, extra=("--metrics-addr", f"127.0.0.1:{port}"))
    for i in range(5):
        (path / f"n{i}.md").write_text(f"note {i}")
    (path / "n0.md").unlink()
    mounter.sync(path)
    assert (path / "n1.md").read_text() == "note 1"
    metrics = scrape(port)
    assert metrics and all(name.startswith("memfs_") for name in metrics)

    def value(family: str, sample: str | None = None, **labels: str) -> float:
        matching = [
            s.value
            for s in metrics[family]
            if (sample is None or s.name == sample)
            and s.labels.get("store_id") == store_id
            and all(s.labels.get(k) == v for k, v in labels.items())
        ]
        assert matching, (family, labels)
        return sum(matching)

    assert value("memfs_sync_passes", result="ok") >= 2  # the first pass and ours
    assert value("memfs_sync_pass_duration_seconds", "memfs_sync_pass_duration_seconds_count") >= 2
    assert value("memfs_store_requests", endpoint="create_memory", outcome="200") == 4
    assert value("memfs_store_sent_bytes") > 0 and value("memfs_store_received_bytes") > 0
    assert value("memfs_fuse_requests", operation="write") >= 5
    assert (
        value(
            "memfs_fuse_request_duration_seconds",
            "memfs_fuse_request_duration_seconds_count",
            operation="write",
        )
        >= 5
    )
    assert value("memfs_dirty_files") == 0
    assert value("memfs_pending_deletes") == 0  # a new file deleted before its first push
    assert value("memfs_memories") == 4
    assert value("memfs_cache_bytes") == sum(len(f"note {i}") for i in range(1, 5))
    assert value("memfs_conflicts") == 0 and value("memfs_refused_files") == 0
    mounter.unmount(path)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            scrape(port)
        except OSError:
            break
        time.sleep(0.2)
    else:
        raise AssertionError("the metrics endpoint outlived its stores")


def test_one_endpoint_for_every_store_of_a_mount(mounter, memfs_server):
    first = memfs_server.create_store("One")["id"]
    second = memfs_server.create_store("Two")["id"]
    port = free_port()
    mounter.mount(
        f"{first}={mounter.root / 'one'}",
        f"{second}={mounter.root / 'two'}",
        extra=("--metrics-addr", f"127.0.0.1:{port}"),
    )
    passes = scrape(port)["memfs_sync_passes"]
    assert {s.labels["store_id"] for s in passes} == {first, second}


def test_a_metrics_address_in_use_is_refused_and_nothing_stays_mounted(mounter, memfs_server):
    store_id = memfs_server.create_store("Busy port")["id"]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = mounter.mount(
            f"{store_id}={mounter.root / 's'}",
            extra=("--metrics-addr", f"127.0.0.1:{port}"),
            check=False,
        )
    assert r.returncode == 1, r.stderr
    assert "cannot serve the metrics endpoint" in r.stderr and "Traceback" not in r.stderr
    assert memfs_mounts_under(mounter.root) == [] and not (mounter.root / "s").exists()


@pytest.mark.parametrize("addr", ["9477", "localhost:", "host:99999", ":80"])
def test_a_bad_metrics_address_is_refused_before_anything_mounts(mounter, memfs_server, addr):
    store_id = memfs_server.create_store("Bad addr")["id"]
    r = mounter.mount(
        f"{store_id}={mounter.root / 's'}", extra=("--metrics-addr", addr), check=False
    )
    assert r.returncode == 2 and "is not HOST:PORT" in r.stderr
    assert not (mounter.root / "s").exists()


def test_status_lists_a_refused_file_once_and_counts_it_as_each_pass_does(mounter, memfs_server):
    """`git init` and a commit in a mount: the files the store refuses for their
    content show under `refused`, not `pending`, and once in the table; each
    pass counts as many refused files as `memfs status` does; every line but
    the mount path fits 80 columns, a CACHED value as wide as `261.3 kB` too."""
    store_id = memfs_server.create_store("Repo")["id"]
    path = mounter.mount_one(store_id, extra=("--sync-interval", "3600"))
    git_commit_in(path)
    for n in range(3):
        (path / f"big-{n}.md").write_text("x" * 87_100)  # 261,300 bytes cached in all
    first = mounter.sync(path)
    second = mounter.sync(path)
    [st] = mounter.status()
    refused = st["refused"]
    assert refused["/.git/index"] == "its content is not UTF-8 text", refused
    assert not set(st["pending"]) & set(refused), st["pending"]
    for r in (first, second):
        assert r.stdout.rstrip().endswith(f"refused {len(refused)}"), (r.stdout, refused)
    assert st["last_pass"]["refused"] == len(refused)
    assert st["dirty"] == 0  # each refused file counted once, under refused

    lines = mounter.memfs("status", check=True).stdout.splitlines()
    for refused_path, reason in refused.items():  # under `refused` only, the reason with it
        at = [i for i, line in enumerate(lines) if refused_path in line]
        assert len(at) == 1 and lines[at[0]].startswith(f"  refused: {refused_path}"), lines
        assert reason in lines[at[0]] or lines[at[0] + 1] == f"    {reason}", lines
    fits = [line for line in lines if line != str(path) and not line.endswith(tuple(refused))]
    assert all(len(line) <= 80 for line in fits), lines
    header, row = lines[0], lines[lines.index(str(path)) + 1]
    assert cell_under(header, row, "CACHED").endswith(" kB"), row
    assert cell_under(header, row, "REFUSED") == str(len(refused)), row
    assert cell_under(header, row, "DIRTY") == "0", row
    assert cell_under(header, row, "MEMORIES") == str(st["memories"]), row


def test_status_counts_requests_through_a_proxy(mounter, memfs_server):
    """`requests` and the bytes in status are what actually crossed the wire."""
    store_id = memfs_server.create_store("Counted")["id"]
    with FaultProxyProcess(memfs_server.url) as proxy:
        path = mounter.mount_one(store_id, extra=("--api-url", proxy.url))
        before = proxy.state()["counters"]["requests_seen"]
        [st0] = mounter.status()
        mounter.sync(path)
        [st1] = mounter.status()
        crossed = proxy.state()["counters"]["requests_seen"] - before
        assert st1["requests"] - st0["requests"] == crossed >= 1


def test_status_shows_a_long_mount_path_whole_at_any_width(mounter, memfs_server):
    """A mount path longer than the MOUNT column is printed whole on a line of
    its own, its row below it; never cut, on a narrow terminal too."""
    store_id = memfs_server.create_store("Long Path")["id"]
    path = mounter.mount_one(
        store_id, "a-project-with-a-rather-long-name/notes-of-a-session-that-ran-for-a-long-time"
    )
    (path / "n.md").write_text("note")
    mounter.sync(path)
    assert len(str(path)) > 100
    for columns in (None, "40"):
        env = mounter.env
        if columns is not None:
            env["COLUMNS"] = columns
        lines = mounter.memfs("status", env=env, check=True).stdout.splitlines()
        assert lines[0].startswith("ACCESS ")
        assert lines[1] == str(path), (columns, lines)
        row = lines[2]
        assert row.startswith("rw ") and len(row) <= 80, row
        assert row.split()[:4] == ["rw", "1", "4", "B"], row  # ACCESS, MEMORIES, CACHED
        assert lines[3].startswith(f"  store {store_id}")
