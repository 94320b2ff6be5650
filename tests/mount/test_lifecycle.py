"""The life of a real mount: the tree at once and contents on demand, a warm
cache that fetches nothing again, the marker, a stale mount left by a killed
memfs, and what a stop leaves in the store, including a stop while the store
is down (through `FaultProxyProcess`, which also counts the requests)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memfs.mount import mount_table
from memfs.testing import FakeStore
from tests.support.faults import FaultProxyProcess
from tests.support.mounts import memfs_mounts_under

MARKER = ".anthropic-memory-store"
SINGLE_MEMORY = "/memories/mem_"
"""What the route of a GET of one memory (its content) contains."""


def _put(server, store_id: str, path: str, content: str) -> dict:
    with server.http() as http:
        r = http.post(
            f"/v1/memory_stores/{store_id}/memories", json={"path": path, "content": content}
        )
    assert r.status_code == 200, r.text
    return r.json()


def _memories(server, store_id: str) -> dict[str, str]:
    """Every memory of the store: path -> content."""
    return FakeStore(server, store_id).memories()


def _content_gets(proxy: FaultProxyProcess) -> dict[str, int]:
    by_path = proxy.state()["counters"]["requests_by_path"]
    return {route: n for route, n in by_path.items() if SINGLE_MEMORY in route}


def _wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def _mounted_sources(root: Path) -> dict[str, str]:
    return {m.point: m.source for m in mount_table() if m.point.startswith(str(root))}


@pytest.fixture
def proxy(memfs_server):
    p = FaultProxyProcess(memfs_server.url).start()
    try:
        yield p
    finally:
        p.stop()


def test_reading_the_whole_tree_right_after_the_mount_costs_no_request_of_its_own(
    mounter, memfs_server, proxy
):
    """A store of six folders on a slow link, every file read the moment the
    mount returns: each content comes on a listing page the background
    download reads anyway (two a folder), none by a GET of the reader's."""
    store_id = memfs_server.create_store("Read at once")["id"]
    files = {f"/f{d}/n{i:02}.md": f"note {d}.{i} " * 40 for d in range(6) for i in range(30)}
    for path, content in files.items():
        _put(memfs_server, store_id, path, content)
    proxy.set(delay=0.05)
    mnt = mounter.mount_one(store_id, extra=("--api-url", proxy.url))
    walked = sorted(Path(d) / f for d, _, names in os.walk(mnt) for f in names if f != MARKER)
    read = {"/" + p.relative_to(mnt).as_posix(): p.read_text() for p in walked}
    assert read == files
    assert _content_gets(proxy) == {}
    _wait_for(lambda: all(s["prefetched"] for s in mounter.status()), 30, "the prefetch")
    listings = proxy.state()["counters"]["requests_by_path"][
        f"/v1/memory_stores/{store_id}/memories"
    ]
    # The first pass: one page of the whole store, the root, each folder; then the
    # download: two full-view pages a folder.
    assert listings <= 2 + 6 + 6 * 2, listings


def test_tree_at_once_contents_on_first_open_and_a_warm_cache_fetches_nothing_again(
    mounter, memfs_server, proxy
):
    store_id = memfs_server.create_store("Lazy")["id"]
    files = {f"/notes/n{i}.md": f"note {i} " * (i + 1) for i in range(8)}
    files |= {f"/deep/a/b/c{i}.md": f"deep {i}" for i in range(8)}
    ids = {
        path: _put(memfs_server, store_id, path, content)["id"] for path, content in files.items()
    }
    # Every fetch of one memory's content takes 1.5 s: prefetching all 16, four
    # at a time, takes at least 6 s.
    proxy.set(delay=1.5, match_method="GET", match_path=SINGLE_MEMORY)
    mnt = mounter.mount_one(store_id, extra=("--api-url", proxy.url))
    assert _mounted_sources(mounter.root)[str(mnt)] == f"memfs:{store_id}"
    by_path = proxy.state()["counters"]["requests_by_path"]
    assert by_path[f"/v1/memory_stores/{store_id}/memories"] == 1, by_path

    started = time.monotonic()
    ls = subprocess.run(["ls", "-lR", str(mnt)], capture_output=True, text=True, timeout=30)
    sizes = {path: os.stat(mnt / path.lstrip("/")).st_size for path in files}
    listed_in = time.monotonic() - started
    assert ls.returncode == 0, ls.stderr
    assert listed_in < 1.0, f"ls -lR took {listed_in:.1f} s: it waited for contents"
    for path in files:
        assert os.path.basename(path) in ls.stdout
    assert sizes == {path: len(content.encode()) for path, content in files.items()}
    in_flight = sum(_content_gets(proxy).values())
    assert in_flight <= 8, f"{in_flight} contents asked for at once: the prefetch is not bounded"

    started = time.monotonic()
    assert (mnt / "deep/a/b/c7.md").read_text() == "deep 7"
    first_open = time.monotonic() - started
    assert first_open < 3.2, f"the first open took {first_open:.1f} s: it waited for other files"

    gets = _wait_for(
        lambda: (g := _content_gets(proxy)) and sum(g.values()) >= len(files) and g,
        30,
        "the background prefetch",
    )
    for path, content in files.items():
        assert (mnt / path.lstrip("/")).read_text() == content
    gets = _content_gets(proxy)
    assert sorted(gets) == sorted(
        f"/v1/memory_stores/{store_id}/memories/{i}" for i in ids.values()
    )
    assert set(gets.values()) == {1}, f"some content was fetched twice: {gets}"

    # One memory changes while nothing is mounted; the remount fetches that one only.
    assert mounter.unmount(mnt).returncode == 0
    with memfs_server.http() as http:
        r = http.post(
            f"/v1/memory_stores/{store_id}/memories/{ids['/notes/n3.md']}",
            json={"content": "changed while unmounted"},
        )
        assert r.status_code == 200, r.text
    proxy.reset()
    mnt = mounter.mount_one(store_id, extra=("--api-url", proxy.url))
    _wait_for(lambda: all(s["prefetched"] for s in mounter.status()), 30, "the prefetch")
    for path, content in (files | {"/notes/n3.md": "changed while unmounted"}).items():
        assert (mnt / path.lstrip("/")).read_text() == content
    assert _content_gets(proxy) == {
        f"/v1/memory_stores/{store_id}/memories/{ids['/notes/n3.md']}": 1
    }
    assert mounter.unmount(mnt).returncode == 0


def test_marker_is_exact_untouchable_and_never_a_memory(mounter, memfs_server):
    store_id = memfs_server.create_store("Marked")["id"]
    _put(memfs_server, store_id, "/a.md", "alpha")
    _put(memfs_server, store_id, f"/{MARKER}", "a memory where the marker goes")
    mnt = mounter.mount_one(store_id)
    marker = mnt / MARKER

    assert marker.read_bytes() == f"version 1\n{store_id}".encode()
    assert marker.stat().st_mode & 0o777 == 0o444
    assert sorted(os.listdir(mnt)) == [MARKER, "a.md"]
    for command in (
        f"echo x > {MARKER}",
        f"echo x >> {MARKER}",
        f"truncate -s 0 {MARKER}",
        f"mv {MARKER} moved",
        f"mv a.md {MARKER}",
        f"rm -f {MARKER}",
        f"chmod 600 {MARKER}",
        f"touch {MARKER}",
    ):
        r = subprocess.run(["sh", "-c", command], cwd=mnt, capture_output=True, text=True)
        assert r.returncode != 0, f"{command!r} succeeded on the marker"
        assert "Operation not permitted" in r.stderr or "Permission denied" in r.stderr, r.stderr
    assert marker.read_bytes() == f"version 1\n{store_id}".encode()
    (mnt / "b.md").write_text("bravo")

    assert mounter.unmount(mnt).returncode == 0
    log = (mounter.cache_dir / store_id / "memfs.log").read_text()
    assert f"/{MARKER}" in log and "WARNING" in log
    assert _memories(memfs_server, store_id) == {
        "/a.md": "alpha",
        "/b.md": "bravo",
        f"/{MARKER}": "a memory where the marker goes",
    }


def test_a_stale_mount_of_a_killed_memfs_is_reused_and_loses_nothing(mounter, memfs_server):
    store_id = memfs_server.create_store("Killed")["id"]
    other_id = memfs_server.create_store("Other")["id"]
    path = mounter.root / "s"
    mounter.mount(f"{store_id}={path}")
    (path / "written.md").write_text("write() returned before the kill")
    for pid in mounter.store_pids():
        os.kill(pid, signal.SIGKILL)
    _wait_for(lambda: not mounter.store_pids(), 10, "the store process to die")
    assert _mounted_sources(mounter.root) == {str(path): f"memfs:{store_id}"}

    r = mounter.mount(f"{other_id}={path}", check=False)
    assert r.returncode == 1, r.stderr
    assert str(path) in r.stderr and "already mounted" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr

    mounter.mount(f"{store_id}={path}")
    assert _mounted_sources(mounter.root) == {str(path): f"memfs:{store_id}"}
    assert (path / "written.md").read_text() == "write() returned before the kill"
    assert mounter.unmount(path).returncode == 0
    assert not path.exists()
    assert memfs_mounts_under(mounter.root) == []
    assert _memories(memfs_server, store_id) == {"/written.md": "write() returned before the kill"}


def test_a_mount_whose_process_died_is_named_and_unmounted_alone(mounter, memfs_server):
    live_id = memfs_server.create_store("Live")["id"]
    dead_id = memfs_server.create_store("Dead")["id"]
    live, dead = mounter.root / "live", mounter.root / "dead"
    mounter.mount(f"{live_id}={live}", f"{dead_id}={dead}")
    [pid] = [s["pid"] for s in mounter.status() if s["mount_path"] == str(dead)]
    os.kill(pid, signal.SIGKILL)
    _wait_for(lambda: len(mounter.store_pids()) == 1, 10, "the store process to die")
    hint = f"{dead} is a memfs mount whose process is gone: memfs unmount {dead} cleans it up"
    assert mounter.memfs("sync", str(dead)).stderr == f"memfs: {hint}\n"
    r = mounter.unmount(dead)
    assert r.stdout == f"cleaned up a stale mount at {dead}\n" and not dead.exists()
    assert _mounted_sources(mounter.root) == {str(live): f"memfs:{live_id}"}


def test_memfs_works_from_a_shell_left_in_an_unmounted_folder(mounter, memfs_server):
    """A terminal left inside a mount that `memfs unmount` ended: its folder answers
    ENOTCONN, which the import of httpx (through rich) did not survive: a
    traceback, for every command that talks to the API."""
    store_id = memfs_server.create_store("Dead")["id"]
    path = mounter.root / "s"
    mounter.mount(f"{store_id}={path}")
    shell = subprocess.Popen(
        ["sh", "-c", f'read _; exec "{sys.executable}" -P -m memfs store list'],
        cwd=path,
        env={**mounter.env, "MEMFS_API_URL": memfs_server.url, "MEMFS_TOKEN": memfs_server.token},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert mounter.unmount(path).returncode == 0
    out, err = shell.communicate("go\n", timeout=60)
    assert shell.returncode == 0 and store_id in out, err
    assert err == "memfs: the current folder is gone; working from /\n"


def test_a_stop_while_the_store_is_down_keeps_the_file_for_the_next_mount(
    mounter, memfs_server, proxy
):
    store_id = memfs_server.create_store("Flaky")["id"]
    _put(memfs_server, store_id, "/kept.md", "old")
    extra = ("--api-url", proxy.url, "--final-sync-timeout", "3")
    mnt = mounter.mount_one(store_id, extra=extra)
    (mnt / "draft.md").write_text("written while the store was up")
    (mnt / "kept.md").write_text("new")
    proxy.set(down=True)

    r = mounter.unmount(mnt, check=False)
    assert r.returncode == 1, r.stderr
    assert "/draft.md" in r.stderr and "/kept.md" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert not mnt.exists()
    assert memfs_mounts_under(mounter.root) == []
    log = (mounter.cache_dir / store_id / "memfs.log").read_text()
    assert "not uploaded" in log and "/draft.md" in log and "/kept.md" in log
    assert _memories(memfs_server, store_id) == {"/kept.md": "old"}

    proxy.set(down=False)
    mnt = mounter.mount_one(store_id, extra=extra)
    assert _memories(memfs_server, store_id) == {
        "/draft.md": "written while the store was up",
        "/kept.md": "new",
    }
    assert (mnt / "draft.md").read_text() == "written while the store was up"

    # A store that hangs: the stop gives up after --final-sync-timeout (3 s).
    (mnt / "late.md").write_text("late")
    proxy.set(delay=120)
    started = time.monotonic()
    r = mounter.unmount(mnt, check=False)
    stopped_in = time.monotonic() - started
    assert r.returncode == 1 and "/late.md" in r.stderr, r.stderr
    assert stopped_in < 15, f"the stop took {stopped_in:.0f} s with a 3 s final sync timeout"
    assert not mnt.exists()
    assert "/late.md" not in _memories(memfs_server, store_id)


def test_two_mounts_of_one_store_with_their_own_caches_are_each_found(mounter, memfs_server):
    """Two `memfs mount` commands of the same store at two paths, each with its
    own cache folder: `memfs status` lists both, and `memfs unmount` of one
    stops that one (with its final sync) and leaves the other mounted."""
    store_id = memfs_server.create_store("twice")["id"]
    first = mounter.mount_one(store_id, "first")
    other_cache = mounter.tmp / "cache-2"
    second = mounter.root / "second"
    mounter.mount(f"{store_id}={second}", extra=("--cache-dir", str(other_cache)))
    assert sorted(s["mount_path"] for s in mounter.status()) == [str(first), str(second)]

    (first / "a.md").write_text("from the first\n")
    (second / "b.md").write_text("from the second\n")
    synced = mounter.sync(second)
    assert str(second) in synced.stdout and str(first) not in synced.stdout, synced.stdout
    assert _memories(memfs_server, store_id) == {"/b.md": "from the second\n"}

    mounter.unmount(first)
    assert _memories(memfs_server, store_id) == {
        "/a.md": "from the first\n",
        "/b.md": "from the second\n",
    }
    assert not memfs_mounts_under(first) and memfs_mounts_under(second)
    assert [s["mount_path"] for s in mounter.status()] == [str(second)]
    mounter.unmount(second)
    assert mounter.status() == []
    assert os.listdir(mounter.runtime_dir) == []


def test_a_mount_ended_by_memfs_unmount_says_so_in_its_log(mounter, memfs_server):
    """A mount that `memfs unmount` ends from another shell names it, and the
    asking process's pid, in its log before its final sync: the reader of
    that log learns why it ended."""
    store_id = memfs_server.create_store("ended from outside")["id"]
    mnt = mounter.mount_one(store_id)
    unmount = subprocess.Popen(
        [sys.executable, "-m", "memfs", "unmount", str(mnt)],
        env=mounter.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = unmount.communicate(timeout=120)
    assert unmount.returncode == 0, err
    assert f"unmounted {mnt}" in out
    log = (mounter.cache_dir / store_id / "memfs.log").read_text()
    said = f"stopping {store_id}: unmounted by `memfs unmount` from pid {unmount.pid}; final sync"
    assert said in log, log
    assert log.index(said) < log.index(f"unmounted {store_id} from {mnt}")


def test_a_memfs_py_in_the_working_folder_is_never_run(mounter, memfs_server, tmp_path):
    """`memfs mount` run by root in a folder others may write (/tmp) runs none of
    its files: a `memfs.py` there is not imported by the store process."""
    store_id = memfs_server.create_store("started from a shared folder")["id"]
    shared, ran = tmp_path / "shared", tmp_path / "ran"
    shared.mkdir()
    (shared / "memfs.py").write_text(f"open({str(ran)!r}, 'w').close()\n")
    args = ["mount", "--daemon", "--root", str(mounter.root), "--cache-dir", str(mounter.cache_dir)]
    args += ["--token-file", str(mounter.token_file), "--store", f"{store_id}={mounter.root}/s"]
    memfs = os.path.join(os.path.dirname(sys.executable), "memfs")
    r = subprocess.run(
        [memfs, *args], cwd=shared, env=mounter.env, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert not ran.exists()
    (mounter.root / "s" / "note.md").write_text("mounted\n")
    mounter.unmount(mounter.root / "s")
    assert _memories(memfs_server, store_id) == {"/note.md": "mounted\n"}


def git_commit_in(folder: Path) -> None:
    """`git init` and a first commit of one file, as a newcomer does in a mount:
    it leaves binary files (`.git/index`, objects) the store refuses."""
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(folder),
    }
    (folder / "notes.md").write_text("notes")
    for args in (("init", "-q", "-b", "main"), ("add", "notes.md"), ("commit", "-q", "-m", "1")):
        subprocess.run(["git", *args], cwd=folder, env=env, check=True, capture_output=True)


def test_a_git_repository_in_a_mount_is_refused_once_and_stops_cleanly(mounter, memfs_server):
    """The files of a commit the store refuses for their content are each said
    once, as a WARNING naming the file and the reason; a clean stop exits 0,
    this time and at the next mount's stop, and logs no ERROR."""
    store_id = memfs_server.create_store("Repo")["id"]
    mnt = mounter.mount_one(store_id)
    git_commit_in(mnt)
    mounter.sync(mnt)
    mounter.sync(mnt)
    r = mounter.unmount(mnt, check=False)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "", r.stderr
    mnt = mounter.mount_one(store_id)
    assert (mnt / ".git" / "index").exists()
    r = mounter.unmount(mnt, check=False)
    assert r.returncode == 0 and r.stderr == "", r.stderr

    lines = (mounter.cache_dir / store_id / "memfs.log").read_text().splitlines()
    said = [line for line in lines if "/.git/index" in line]
    assert len(said) == 1, said
    assert (
        " WARNING " in said[0]
        and "/.git/index is not uploaded: its content is not UTF-8" in (said[0])
    )
    assert not [line for line in lines if " ERROR " in line], lines
    stored = _memories(memfs_server, store_id)
    assert stored["/notes.md"] == "notes" and "/.git/HEAD" in stored
    assert "/.git/index" not in stored
