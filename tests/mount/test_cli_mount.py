"""`memfs mount` as an operator runs it: in the foreground until SIGTERM,
several stores at once from a resources file with a work item secret, and
every refusal as one readable sentence with a non-zero exit and nothing left
mounted or created."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memfs.control import socket_path
from memfs.mount import mount_table
from memfs.testing import FakeStore
from tests.mount.test_lifecycle import git_commit_in
from tests.support.faults import FaultProxyProcess
from tests.support.mounts import Mounter, memfs_mounts_under

MARKER = ".anthropic-memory-store"


def _memories(server, store_id: str) -> dict[str, str]:
    """Every memory of the store: path -> content."""
    return FakeStore(server, store_id).memories()


def _mount_options(root: Path) -> dict[str, tuple[str, str]]:
    """mount point -> (source, options) of every mount under `root`."""
    return {m.point: (m.source, m.options) for m in mount_table() if m.point.startswith(str(root))}


def _read_lines(proc: subprocess.Popen, count: int, timeout: float) -> list[str]:
    assert proc.stdout is not None
    lines: list[str] = []
    data = b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while len(lines) < count and time.monotonic() < deadline:
            if not sel.select(deadline - time.monotonic()):
                break
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                break
            data += chunk
            *done, rest = data.split(b"\n")
            lines += [d.decode() for d in done]
            data = rest
    return lines


def _foreground_mount(mounter: Mounter, store_id: str, path: Path, *extra: str) -> subprocess.Popen:
    """`memfs mount` without --daemon, as an operator runs it in a terminal."""
    cmd = [sys.executable, "-m", "memfs", "mount", "--store", f"{store_id}={path}"]
    cmd += ["--token-file", str(mounter.token_file), "--cache-dir", str(mounter.cache_dir), *extra]
    return subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=mounter.env,
    )


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_foreground_mount_runs_until_a_signal_and_uploads_everything(mounter, memfs_server, stop):
    store_id = memfs_server.create_store("Foreground")["id"]
    path = mounter.root / "fg"
    proc = _foreground_mount(mounter, store_id, path)
    try:
        lines = _read_lines(proc, 1, 60)
        assert lines == [f"mounted {store_id} at {path} (read-write)"], proc.poll()
        assert _mount_options(mounter.root)[str(path)][0] == f"memfs:{store_id}"
        (path / "notes").mkdir()
        (path / "notes" / "today.md").write_text("written in the foreground")
        (path / "top.md").write_text("top")
        time.sleep(0.3)
        assert proc.poll() is None, "memfs mount left the foreground"
        proc.send_signal(stop)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err.decode()
    assert b"Traceback" not in err
    assert not path.exists()
    assert memfs_mounts_under(mounter.root) == []
    assert _memories(memfs_server, store_id) == {
        "/notes/today.md": "written in the foreground",
        "/top.md": "top",
    }


def test_foreground_mount_exits_1_and_names_what_the_final_sync_left(mounter, memfs_server):
    store_id = memfs_server.create_store("Left behind")["id"]
    path = mounter.root / "fg"
    with FaultProxyProcess(memfs_server.url) as proxy:
        extra = ("--api-url", proxy.url, "--final-sync-timeout", "3")
        proc = _foreground_mount(mounter, store_id, path, *extra)
        try:
            assert _read_lines(proc, 1, 60) == [f"mounted {store_id} at {path} (read-write)"]
            (path / "unsent.md").write_text("the store is down at stop")
            proxy.set(down=True)
            proc.send_signal(signal.SIGTERM)
            _out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 1
    assert b"not uploaded" in err and b"/unsent.md" in err and b"Traceback" not in err
    assert not path.exists()
    assert _memories(memfs_server, store_id) == {}


def test_ctrl_c_of_a_foreground_mount_after_a_git_commit_exits_0(mounter, memfs_server):
    """As `make demo` ends: the binary files of a commit the store refuses are
    not left behind by a failure, so Ctrl-C after the final sync exits 0."""
    store_id = memfs_server.create_store("Demo")["id"]
    path = mounter.root / "fg"
    proc = _foreground_mount(mounter, store_id, path)
    try:
        assert _read_lines(proc, 1, 60) == [f"mounted {store_id} at {path} (read-write)"]
        git_commit_in(path)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err.decode()
    assert b" ERROR " not in err and b"not uploaded from" not in err, err.decode()
    assert err.count(b" WARNING /.git/index is not uploaded: its content is not UTF-8") == 1
    assert not path.exists()
    assert _memories(memfs_server, store_id)["/notes.md"] == "notes"


def test_sigkill_of_a_foreground_mount_stops_its_stores_and_loses_nothing(mounter, memfs_server):
    store_id = memfs_server.create_store("Killed")["id"]
    path = mounter.root / "fg"
    proc = _foreground_mount(mounter, store_id, path)
    try:
        assert _read_lines(proc, 1, 60) == [f"mounted {store_id} at {path} (read-write)"]
        (path / "last.md").write_text("the last write before the kill")
        proc.kill()
        # The store process holds the pipes too: they close when it has finished.
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert b"Traceback" not in err
    assert memfs_mounts_under(mounter.root) == []
    assert not path.exists()
    assert mounter.store_pids() == []
    assert _memories(memfs_server, store_id) == {"/last.md": "the last write before the kill"}
    again = mounter.mount_one(store_id, "fg")
    assert (again / "last.md").read_text() == "the last write before the kill"


@contextlib.contextmanager
def _silent_api() -> Iterator[str]:
    """The URL of a port that accepts every connection and never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    held: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        while not done.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        done.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()


def _timed_lines(stream, timeout: float) -> list[tuple[float, str]]:
    """The lines of `stream` until its end, each with the seconds it came after the call."""
    started = time.monotonic()
    lines: list[tuple[float, str]] = []
    data = b""
    with selectors.DefaultSelector() as sel:
        sel.register(stream, selectors.EVENT_READ)
        while time.monotonic() - started < timeout:
            if not sel.select(timeout - (time.monotonic() - started)):
                break
            chunk = os.read(stream.fileno(), 4096)
            if not chunk:
                break
            data += chunk
            *done, data = data.split(b"\n")
            lines += [(time.monotonic() - started, d.decode()) for d in done]
    return lines


CLIENT_TIMEOUT = 30.0
"""The client's own wait for one answer: before the start's bound, the first
attempt alone took this long, and four of them (123 s) went by in silence."""


@pytest.mark.parametrize("where", ["path", "id", "session"])
def test_a_silent_api_is_said_at_once_and_the_start_gives_up_at_its_bound(
    where, mounter, memfs_server, tmp_path
):
    """An API that accepts connections and never answers: `memfs mount` says
    within a few seconds that it waits for it (the URL, attempt n of m), and
    gives up at --start-timeout (MEMFS_START_TIMEOUT), nothing mounted. With
    a path the store process waits; without one memfs itself, asking the
    store's name; for a session, memfs itself reading it."""
    store_id = memfs_server.create_store("Silent")["id"]
    env = mounter.env
    with _silent_api() as url:
        cmd = [sys.executable, "-m", "memfs", "mount", "--daemon", "--api-url", url]
        cmd += ["--root", str(mounter.root), "--cache-dir", str(mounter.cache_dir)]
        if where == "session":
            secret = tmp_path / "secret"
            sessions = json.dumps({"sessions_token": "silent-session-token"})
            secret.write_text(base64.urlsafe_b64encode(sessions.encode()).decode())
            cmd += ["--session", "sesn_silent", "--secret-file", str(secret)]
        else:
            store = f"{store_id}={mounter.root / 's'}" if where == "path" else store_id
            cmd += ["--store", store, "--token-file", str(mounter.token_file)]
        if where == "path":
            env["MEMFS_START_TIMEOUT"] = "8"
        else:
            cmd += ["--start-timeout", "8"]
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env
        )
        try:
            lines = _timed_lines(proc.stderr, timeout=3 * CLIENT_TIMEOUT)
            ended = proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
            proc.stderr.close()
    said = "\n".join(line for _, line in lines)
    waiting = [at for at, line in lines if f"waiting for the API at {url}: " in line]
    assert waiting and "(attempt 1 of 2)" in said, said
    # Said while the first attempt still could have been waiting, long before the end.
    assert waiting[0] < CLIENT_TIMEOUT and waiting[0] < lines[-1][0], lines
    assert ended == 1 and lines[-1][1].startswith("memfs: "), said
    assert f"cannot reach the API at {url}: " in lines[-1][1], said
    assert "gave up after 2 attempts" in lines[-1][1] and "(start-timeout 8 s)" in said, said
    assert lines[-1][0] < CLIENT_TIMEOUT, lines
    assert "Traceback" not in said
    assert memfs_mounts_under(mounter.root) == [] and os.listdir(mounter.root) == []
    assert not mounter.store_pids()


def test_a_new_mount_waits_for_the_previous_process_of_the_store_to_finish(mounter, memfs_server):
    store_id = memfs_server.create_store("Overlap")["id"]
    path = mounter.root / "fg"
    with FaultProxyProcess(memfs_server.url) as proxy:
        proc = _foreground_mount(mounter, store_id, path, "--api-url", proxy.url)
        try:
            assert _read_lines(proc, 1, 60) == [f"mounted {store_id} at {path} (read-write)"]
            for i in range(3):
                (path / f"n{i}.md").write_text(f"note {i}")
            # The old process's final sync takes longer than SQLite's own 5 s wait
            # for the journal's lock: the new one must wait for it as memfs does.
            proxy.set(delay=3.0)
            proc.kill()
            proc.wait()
            r = mounter.mount(f"{store_id}={path}", check=False)
            assert r.returncode == 0, r.stderr
            assert sorted(os.listdir(path)) == [MARKER, "n0.md", "n1.md", "n2.md"]
            log = (mounter.cache_dir / store_id / "memfs.log").read_text()
            waited = (
                f"waiting for the previous memfs process of {store_id} to finish its final sync"
            )
            assert waited in log, "the new mount did not meet the old process"
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proxy.set(delay=0)
            mounter.unmount(path, check=False)
    assert _memories(memfs_server, store_id) == {f"/n{i}.md": f"note {i}" for i in range(3)}


def test_a_second_mount_of_the_same_store_and_cache_is_refused(mounted, mounter, memfs_server):
    """One process per store and cache: a second `memfs mount` of the store,
    elsewhere, fails with one sentence, leaves nothing behind and the first
    mount as it was."""
    store_id, first = mounted
    (first / "kept.md").write_text("by the first mount")
    second = mounter.root / "second"
    pids = mounter.store_pids()
    r = mounter.mount(f"{store_id}={second}", check=False)
    assert (r.returncode, r.stdout, r.stderr) == (
        1,
        "",
        f"memfs: store {store_id} could not be mounted at {second}: the cache at "
        f"{mounter.cache_dir / store_id} is in use by another memfs process of store {store_id}\n",
    )
    assert not second.exists()
    assert list(_mount_options(mounter.root)) == [str(first)]
    assert mounter.store_pids() == pids
    assert (first / "kept.md").read_text() == "by the first mount"
    mounter.unmount(first)
    assert _memories(memfs_server, store_id) == {"/kept.md": "by the first mount"}


def test_several_stores_from_resources_with_a_work_item_secret(mounter, memfs_server, tmp_path):
    notes = memfs_server.create_store("Team Notes!")["id"]
    prefs = memfs_server.create_store("User Preferences")["id"]
    deep = memfs_server.create_store("Deep")["id"]
    with memfs_server.http() as http:
        r = http.post(
            f"/v1/memory_stores/{prefs}/memories", json={"path": "/tz.md", "content": "UTC"}
        )
        assert r.status_code == 200, r.text
    deep_path = tmp_path / "not" / "yet" / "there"
    resources = [
        {"type": "memory_store", "memory_store_id": notes, "access": "read_write"},
        {"type": "memory_store", "memory_store_id": prefs, "access": "read_only"},
        {"type": "memory_store", "memory_store_id": deep, "mount_path": str(deep_path)},
    ]
    resources_file = tmp_path / "resources.json"
    resources_file.write_text(json.dumps(resources))
    secret = {"sessions_token": memfs_server.token, "api_base_url": memfs_server.url}
    env = mounter.env
    env.pop("MEMFS_API_URL")
    env["MEMFS_WORK_ITEM_SECRET"] = base64.urlsafe_b64encode(json.dumps(secret).encode()).decode()
    args = ["mount", "--daemon", "--resources", str(resources_file), "--root", str(mounter.root)]
    args += ["--cache-dir", str(mounter.cache_dir), "--uid", "4321", "--gid", "8765"]
    r = mounter.memfs(*args, "--allow-other", env=env)
    assert r.returncode == 0, r.stderr

    paths = {
        notes: mounter.root / "team-notes",
        prefs: mounter.root / "user-preferences",
        deep: deep_path,
    }
    assert r.stdout.splitlines() == [
        f"mounted {notes} at {paths[notes]} (read-write)",
        f"mounted {prefs} at {paths[prefs]} (read-only)",
        f"mounted {deep} at {deep_path} (read-write)",
    ]
    mounts = _mount_options(tmp_path)
    for store_id, path in paths.items():
        source, options = mounts[str(path)]
        assert source == f"memfs:{store_id}"
        assert "allow_other" in options.split(",")
        assert (path / MARKER).read_text() == f"version 1\n{store_id}"
        st = os.stat(path / MARKER)
        assert (st.st_uid, st.st_gid) == (4321, 8765)
    assert (paths[prefs] / "tz.md").read_text() == "UTC"
    with pytest.raises(OSError, match="Read-only file system"):
        (paths[prefs] / "tz.md").write_text("CET")
    (paths[notes] / "n.md").write_text("note")
    (deep_path / "d.md").write_text("deep")
    assert sorted(s["store_id"] for s in mounter.status()) == sorted(paths)

    r = mounter.unmount_all(check=False)
    assert r.returncode == 0, r.stderr
    assert memfs_mounts_under(tmp_path) == []
    assert not any(p.exists() for p in paths.values())
    assert not (tmp_path / "not").exists()  # every folder memfs made for deep_path goes
    assert tmp_path.is_dir()
    assert _memories(memfs_server, notes) == {"/n.md": "note"}
    assert _memories(memfs_server, deep) == {"/d.md": "deep"}
    assert _memories(memfs_server, prefs) == {"/tz.md": "UTC"}


STORE_GET = r"^/v1/memory_stores/[^/?]+(\?|$)"
"""`GET /v1/memory_stores/{id}`, which the hosted API may refuse to a sessions token."""


def test_resources_as_the_api_returns_them(mounter, memfs_server, tmp_path):
    """`access: null`, no `mount_path`, fields memfs does not know: the store
    mounts read-write at the slug of the resource's name, else of its own."""
    named = memfs_server.create_store("Store Name Unused")["id"]
    unnamed = memfs_server.create_store("Project Log")["id"]
    resources = [
        {
            "type": "memory_store",
            "memory_store_id": named,
            "access": None,
            "name": "Agent Scratch Pad",
            "description": "where the agent thinks",
            "instructions": "Keep notes short.",
            "added_later": {"any": ["thing"]},
        },
        {"type": "memory_store", "memory_store_id": unnamed, "access": None},
    ]
    resources_file = tmp_path / "resources.json"
    resources_file.write_text(json.dumps(resources))
    args = ["mount", "--daemon", "--resources", str(resources_file), "--root", str(mounter.root)]
    args += ["--cache-dir", str(mounter.cache_dir), "--token-file", str(mounter.token_file)]
    r = mounter.memfs(*args)
    assert r.returncode == 0, r.stderr
    paths = {named: mounter.root / "agent-scratch-pad", unnamed: mounter.root / "project-log"}
    assert r.stdout.splitlines() == [
        f"mounted {sid} at {path} (read-write)" for sid, path in paths.items()
    ]
    for sid, path in paths.items():
        assert (path / MARKER).read_text() == f"version 1\n{sid}"
        (path / "hello.md").write_text(f"hello {sid}")
    mounter.unmount_all()
    for sid in paths:
        assert _memories(memfs_server, sid) == {"/hello.md": f"hello {sid}"}


@pytest.mark.parametrize("status", [403, 404])  # as the hosted API may answer a sessions token
def test_a_store_the_api_will_not_name_mounts_at_the_slug_of_its_id(
    status, mounter, memfs_server, tmp_path
):
    by_flag = memfs_server.create_store("By Flag")["id"]
    by_file = memfs_server.create_store("By File")["id"]
    resources_file = tmp_path / "resources.json"
    resources_file.write_text(json.dumps([{"type": "memory_store", "memory_store_id": by_file}]))
    with FaultProxyProcess(memfs_server.url) as proxy:
        proxy.set(status=status, status_rate=1.0, match_method="GET", match_path=STORE_GET)
        env = {**mounter.env, "MEMFS_API_URL": proxy.url}
        r = mounter.memfs(
            *("mount", "--daemon", "--root", str(mounter.root), "--store", by_flag),
            *("--resources", str(resources_file), "--cache-dir", str(mounter.cache_dir)),
            *("--token-file", str(mounter.token_file)),
            env=env,
        )
        assert r.returncode == 0, r.stderr
        assert proxy.state()["counters"]["statuses_injected"] == 2
        paths = {sid: mounter.root / sid.replace("_", "-").lower() for sid in (by_flag, by_file)}
        for sid, path in paths.items():
            assert f"mounted {sid} at {path} (read-write)" in r.stdout.splitlines()
            said = f"cannot read the name of store {sid} (the API answered {status} "
            assert said in r.stderr and f"_error); mounting it at {path}\n" in r.stderr
            (path / "note.md").write_text("through a refused name")
        assert "Traceback" not in r.stderr
        mounter.unmount_all(env)
    for sid in paths:
        assert _memories(memfs_server, sid) == {"/note.md": "through a refused name"}


@pytest.mark.parametrize(
    ("before", "after", "level", "levels_seen", "levels_not_seen"),
    [
        ((), (), None, ["INFO"], ["DEBUG"]),
        (("-vv",), (), None, ["DEBUG"], []),
        (("-v",), ("-v",), None, ["DEBUG"], []),
        ((), (), "DEBUG", ["DEBUG"], []),
        ((), (), "WARNING", [], ["INFO", "DEBUG"]),
    ],
    ids=["default", "memfs -vv mount", "memfs -v mount -v", "MEMFS_LOG_LEVEL=DEBUG", "WARNING"],
)
def test_the_log_level_reaches_the_store_process(
    mounter, memfs_server, before, after, level, levels_seen, levels_not_seen
):
    store_id = memfs_server.create_store("Log level")["id"]
    env = mounter.env
    env.pop("MEMFS_LOG_LEVEL", None)
    if level:
        env["MEMFS_LOG_LEVEL"] = level
    path = mounter.root / "s"
    args = ["mount", "--daemon", "--store", f"{store_id}={path}", *after]
    args += ["--cache-dir", str(mounter.cache_dir), "--token-file", str(mounter.token_file)]
    r = mounter.memfs(*before, *args, env=env)
    assert r.returncode == 0, r.stderr
    (path / "x.md").write_text("x")
    mounter.sync(path)
    log = (mounter.cache_dir / store_id / "memfs.log").read_text()
    for name in levels_seen:
        assert f" {name} " in log, log
    for name in levels_not_seen:
        assert f" {name} " not in log, log
    assert memfs_server.token not in log


# ------------------------------------------------------------------ refusals


@pytest.fixture(scope="module")
def refusal_stores(shared_memfs_server):
    return [shared_memfs_server.create_store(f"store {i}")["id"] for i in range(2)]


def _case_nine_stores(m: Mounter, stores, tmp: Path):
    return m.mount(*[f"memstore_{i}" for i in range(9)], check=False), ["at most 8"]


def _case_no_token(m: Mounter, stores, tmp: Path):
    args = ["mount", "--store", stores[0], "--root", str(m.root)]
    return m.memfs(*args), ["the session's memories cannot be mounted without a token"]


def _case_token_as_argument(m: Mounter, stores, tmp: Path):
    r = m.memfs("mount", "--store", stores[0], "--token", m.server.token)
    return r, ["--token is not taken", "--token-file"]


def _case_wrong_token(m: Mounter, stores, tmp: Path):
    m.token_file.write_text("not-the-token")
    return m.mount(stores[0], check=False), [stores[0], "refused the token from --token-file (401)"]


def _case_wrong_token_with_path(m: Mounter, stores, tmp: Path):
    m.token_file.write_text("not-the-token")
    r = m.mount(f"{stores[0]}={m.root / 'x'}", check=False)
    return r, [stores[0], "refused the token from --token-file (401)"]


def _case_api_url_with_v1(m: Mounter, stores, tmp: Path):
    r = m.mount(stores[0], extra=("--api-url", m.server.url + "/v1"), check=False)
    return r, [stores[0], f"looks like it includes /v1: give the base URL, {m.server.url}"]


def _case_api_url_with_v1_and_path(m: Mounter, stores, tmp: Path):
    env = {**m.env, "MEMFS_API_URL": m.server.url + "/v1/"}
    args = ["mount", "--daemon", "--store", f"{stores[0]}={m.root / 'x'}"]
    r = m.memfs(*args, "--token-file", str(m.token_file), "--cache-dir", str(m.cache_dir), env=env)
    return r, [stores[0], f"looks like it includes /v1: give the base URL, {m.server.url}"]


def _case_unknown_store(m: Mounter, stores, tmp: Path):
    r = m.mount(f"memstore_nope={m.root / 'x'}", check=False)
    return r, ["memstore_nope", "404"]


def _case_unknown_store_without_path(m: Mounter, stores, tmp: Path):
    # Its name cannot be read (404), nor its memories: no store of that id, said
    # before anything is made for it (no name warned of, no store process).
    return m.mount("memstore_nope", check=False), ["memstore_nope", "was not found", "404"]


def _case_path_taken(m: Mounter, stores, tmp: Path):
    taken = m.root / "taken"
    taken.write_text("someone else's file")
    return m.mount(f"{stores[0]}={taken}", check=False), [str(taken), "already exists"]


def _case_path_not_creatable(m: Mounter, stores, tmp: Path):
    blocker = tmp / "a-file"
    blocker.write_text("")
    target = blocker / "store"
    return m.mount(f"{stores[0]}={target}", check=False), [
        str(target),
        "the host must make that path writable",
    ]


def _case_relative_path(m: Mounter, stores, tmp: Path):
    return m.mount(f"{stores[0]}=mnt/x", check=False), ["must be absolute"]


def _case_one_of_two_fails(m: Mounter, stores, tmp: Path):
    taken = m.root / "taken"
    taken.mkdir()
    (taken / "keep.txt").write_text("")
    r = m.mount(f"{stores[0]}={m.root / 'fine'}", f"{stores[1]}={taken}", check=False)
    return r, [stores[1], str(taken), "already exists"]


def _case_second_log_folder_unusable(m: Mounter, stores, tmp: Path):
    """The second store's log folder is refused after the first store's process
    has its spec: the first one must not stay mounted."""
    m.cache_dir.mkdir(mode=0o700, exist_ok=True)
    shared = m.cache_dir / stores[1]
    shared.mkdir()
    shared.chmod(0o777)
    r = m.mount(f"{stores[0]}={m.root / 'fine'}", f"{stores[1]}={m.root / 'other'}", check=False)
    return r, [str(shared), "can be written by other users"]


def _case_bad_resources(m: Mounter, stores, tmp: Path):
    bad = tmp / "resources.json"
    bad.write_text("[{")
    r = m.memfs("mount", "--resources", str(bad), "--token-file", str(m.token_file))
    return r, ["resources file", "not JSON"]


def _case_short_interval(m: Mounter, stores, tmp: Path):
    return m.mount(stores[0], extra=("--sync-interval", "4"), check=False), ["at least 5 seconds"]


def _case_too_many_at_once(m: Mounter, stores, tmp: Path):
    r = m.mount(stores[0], extra=("--sync-concurrency", "33"), check=False)
    return r, ["between 1 and 32"]


def _case_unmount_nothing(m: Mounter, stores, tmp: Path):
    return m.memfs("unmount", str(m.root / "nothing")), ["no memfs mount is running"]


ALONE = {_case_wrong_token, _case_wrong_token_with_path, _case_api_url_with_v1}
ALONE |= {_case_api_url_with_v1_and_path, _case_unknown_store_without_path}
"""Refusals of the token or the URL, or of a store that is not there: nothing
is said before the sentence (no "mounting it at", no "local changes are kept")."""
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} memfs[.\w]* WARNING ")
USAGE, FAILED = 2, 1
"""The documented exit statuses: 2 for what the command was given, 1 for work that failed."""


@pytest.mark.fuse  # one_of_two_fails mounts its first store before the second is refused
@pytest.mark.parametrize(
    ("case", "status"),
    [
        pytest.param(case, status, id=case.__name__.removeprefix("_case_"))
        for case, status in [
            (_case_nine_stores, USAGE),
            (_case_no_token, USAGE),
            (_case_token_as_argument, USAGE),
            (_case_wrong_token, FAILED),
            (_case_wrong_token_with_path, FAILED),
            (_case_api_url_with_v1, FAILED),
            (_case_api_url_with_v1_and_path, FAILED),
            (_case_unknown_store, FAILED),
            (_case_unknown_store_without_path, FAILED),
            (_case_path_taken, FAILED),
            (_case_path_not_creatable, FAILED),
            (_case_relative_path, USAGE),
            (_case_one_of_two_fails, FAILED),
            (_case_second_log_folder_unusable, USAGE),
            (_case_bad_resources, USAGE),
            (_case_short_interval, USAGE),
            (_case_too_many_at_once, USAGE),
            (_case_unmount_nothing, FAILED),
        ]
    ],
)
def test_refusals_are_one_sentence_and_leave_nothing_behind(
    case, status, shared_memfs_server, refusal_stores, tmp_path
):
    m = Mounter(shared_memfs_server, tmp_path)
    try:
        before = sorted(os.listdir(m.root))
        r, words = case(m, refusal_stores, tmp_path)
        assert r.returncode == status, (r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert "Traceback" not in r.stderr
        assert lines and lines[-1].startswith(("memfs: ", "memfs mount: ")), r.stderr
        # Before the sentence, only the log's warnings (a name the store would not give).
        assert all(LOG_LINE.match(line) for line in lines[:-1]), r.stderr
        for word in words:
            assert word in lines[-1], r.stderr
        if case in ALONE:
            assert lines[:-1] == [], r.stderr
        assert "test-token" not in r.stderr
        assert memfs_mounts_under(tmp_path) == []
        assert set(os.listdir(m.root)) - {"taken"} == set(before)
        assert not m.store_pids()
    finally:
        m.cleanup()


def test_a_runtime_folder_deeper_than_a_socket_address_still_works(mounter, memfs_server):
    """AF_UNIX addresses hold 108 bytes; a deep runtime folder must not matter."""
    store_id = memfs_server.create_store("Deep")["id"]
    mounter.runtime_dir = mounter.tmp / ("r" * 60) / ("u" * 60) / "run"
    assert len(socket_path(str(mounter.runtime_dir), store_id, str(mounter.cache_dir))) > 108
    path = mounter.mount_one(store_id)
    (path / "deep.md").write_text("through a long socket path")
    mounter.sync(path)
    assert _memories(memfs_server, store_id) == {"/deep.md": "through a long socket path"}
    assert [s["store_id"] for s in mounter.status()] == [store_id]
    assert mounter.unmount(path).returncode == 0
