"""Edits in the store within seconds (issue 30, section 3): the write-behind
pushes a mount's local changes once it has been quiet for 2 s, at most once
per 5 s, between the passes of a long interval; a burst of writes is pushed
once it ends; a mount where nothing changes sends only its passes' requests.

Real mounts on a real `memfs serve`; the requests are counted by the fault
proxy between them (it injects nothing here). No test asserts a speed: a
file is only required to be in the store before the interval could have
run a pass."""

from __future__ import annotations

import time

from memfs.testing import FakeStore
from tests.support.faults import FaultProxyProcess

LONG_INTERVAL = 60.0
"""No periodic pass runs within a test: what reaches the store is the write-behind's."""


def wait_for_memories(store: FakeStore, expected: dict[str, str], timeout: float) -> float:
    """Seconds until the store holds exactly `expected`; AssertionError after `timeout`."""
    started = time.monotonic()
    while True:
        held = store.memories()
        if held == expected:
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            raise AssertionError(f"the store holds {held}, not {expected}, after {timeout} s")
        time.sleep(0.2)


def uploads(proxy: FaultProxyProcess) -> list[str]:
    """The creates and updates of memories the proxy passed on."""
    return [
        target
        for method, target, _ in proxy.counters().exchanges
        if method == "POST" and "/memories" in target
    ]


def test_a_closed_file_is_in_the_store_long_before_the_next_pass(mounter, memfs_server):
    store_id = memfs_server.create_store("write behind")["id"]
    mounted_at = time.monotonic()
    path = mounter.mount_one(store_id, extra=("--sync-interval", f"{LONG_INTERVAL:g}"))
    (path / "note.md").write_text("written here\n")
    (path / "folder").mkdir()
    (path / "folder" / "deep.md").write_text("and here\n")
    expected = {"/note.md": "written here\n", "/folder/deep.md": "and here\n"}
    wait_for_memories(FakeStore(memfs_server, store_id), expected, timeout=30)
    assert time.monotonic() - mounted_at < LONG_INTERVAL
    (status,) = mounter.status()
    assert status["pending"] == [] and status["dirty"] == 0
    assert status["last_pass"]["push_only"] is True


def test_a_burst_of_writes_is_pushed_once_it_ends(mounter, memfs_server):
    """Five files rewritten every 0.1 s for 3 s: the mount is never quiet
    meanwhile, so nothing is pushed until the burst ends, and then each file
    once, with its last content, by a push-only pass."""
    store_id = memfs_server.create_store("burst")["id"]
    with FaultProxyProcess(memfs_server.url) as proxy:
        path = mounter.mount_one(
            store_id,
            extra=("--sync-interval", f"{LONG_INTERVAL:g}", "--api-url", proxy.url),
        )
        proxy.reset()
        names = [f"f{i}.md" for i in range(5)]
        for n in range(30):
            for name in names:
                (path / name).write_text(f"{name} version {n}\n")
            time.sleep(0.1)
        assert uploads(proxy) == []
        expected = {f"/{name}": f"{name} version 29\n" for name in names}
        wait_for_memories(FakeStore(memfs_server, store_id), expected, timeout=30)
        time.sleep(1)
        seen = proxy.counters().exchanges
    # One create a file, and nothing else: no listing, no pull, no delete.
    assert [(method, status) for method, _, status in seen] == [("POST", 200)] * len(names), seen
    assert all(target.split("?")[0].endswith("/memories") for _, target, _ in seen), seen


def test_a_mount_where_nothing_changes_sends_only_its_passes(mounter, memfs_server):
    """Interval 5 s, the least: over 12 s of nothing changing, the mount sends
    what its passes send (a look at the store's changes each) and nothing
    else; the write-behind looks at the cache only."""
    store_id = memfs_server.create_store("idle")["id"]
    FakeStore(memfs_server, store_id).put("/kept.md", "in the store\n")
    with FaultProxyProcess(memfs_server.url) as proxy:
        path = mounter.mount_one(store_id, extra=("--sync-interval", "5", "--api-url", proxy.url))
        (path / "new.md").write_text("pushed, then quiet\n")
        expected = {"/kept.md": "in the store\n", "/new.md": "pushed, then quiet\n"}
        wait_for_memories(FakeStore(memfs_server, store_id), expected, timeout=30)
        time.sleep(1)
        (before,) = mounter.status()
        proxy.reset()
        time.sleep(12)
        seen = proxy.counters()
        (after,) = mounter.status()
    passes = after["passes"] - before["passes"]
    assert 2 <= passes <= 3, (before, after)
    assert after["last_pass"]["push_only"] is False
    assert all(method == "GET" for method, _, _ in seen.exchanges), seen.exchanges
    # A pass may fall between a status and the proxy's reset or counters, so
    # each count is bounded by the passes rather than set equal to the other.
    assert seen.requests_seen <= passes, seen.exchanges
    assert after["requests"] - before["requests"] <= passes, (before, after)


def test_write_behind_no_leaves_changes_to_the_passes(mounter, memfs_server):
    store_id = memfs_server.create_store("passes only")["id"]
    path = mounter.mount_one(
        store_id, extra=("--sync-interval", f"{LONG_INTERVAL:g}", "--write-behind", "no")
    )
    (path / "waits.md").write_text("until a pass\n")
    time.sleep(5)
    assert FakeStore(memfs_server, store_id).memories() == {}
    (status,) = mounter.status()
    assert status["pending"] == ["/waits.md"] and status["passes"] == 1
    mounter.sync(path)
    assert FakeStore(memfs_server, store_id).memories() == {"/waits.md": "until a pass\n"}


def test_a_file_emptied_by_a_slow_redirect_is_not_pushed_empty(mounter, memfs_server):
    """`slow-command > file`: the shell empties the file at once and the command
    writes seconds later. The memory never goes empty meanwhile: a file open
    for writing and empty waits until it is written or closed."""
    store_id = memfs_server.create_store("redirect")["id"]
    path = mounter.mount_one(store_id, extra=("--sync-interval", f"{LONG_INTERVAL:g}"))
    (path / "report.md").write_text("important content\n")
    store = FakeStore(memfs_server, store_id)
    wait_for_memories(store, {"/report.md": "important content\n"}, timeout=30)
    with open(path / "report.md", "w") as f:
        time.sleep(5)
        assert store.memories() == {"/report.md": "important content\n"}
        f.write("new report\n")
    wait_for_memories(store, {"/report.md": "new report\n"}, timeout=30)
