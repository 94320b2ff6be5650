"""memfs on a worker host, as docs/worker.md sets it up: a claimed work item
in (`--work-item FILE|-`, `--session ID`), the session's stores mounted,
the session followed while it runs (stores attached mounted, stores
detached final-synced and unmounted), the final sync at the end.

Everything runs for real: `memfs store session create` makes the session
on a real `memfs serve` and prints the work item a worker's poll would hand
out; `memfs run` and `memfs mount` are real processes with real FUSE
mounts; the session is changed with `memfs store session attach|detach`.
The sessions are checked every half second (`MEMFS_SESSION_CHECK_INTERVAL`,
the variable of `--session-check-interval`; 60 s by default)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memfs.api import parse_work_item_secret
from tests.support import ServerProcess, cmdlines_holding
from tests.support.faults import FaultProxyProcess
from tests.support.mounts import Mounter, memfs_mounts_under
from tests.support.running import remote_files, wait_for_file

CHECK = "0.5"
"""Seconds between two reads of a followed session, in these tests."""
MARKER = ".anthropic-memory-store"
WORKER_OWN = {
    "ANTHROPIC_API_KEY": "sk-ant-api03-" + "not-the-worker-key" * 2,
    "ANTHROPIC_AUTH_TOKEN": "sk-ant-oat01-" + "not-the-worker-token" * 2,
}
"""What a worker host exports for its own SDK client: memfs must not use it."""


def admin(server: ServerProcess, mounter: Mounter, *args: str) -> str:
    """`memfs store ...` as the person who runs the sessions (the server's token)."""
    env = {**mounter.env, "MEMFS_TOKEN": server.token}
    r = subprocess.run(
        [sys.executable, "-m", "memfs", "store", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


def worker_env(mounter: Mounter, **extra: str) -> dict[str, str]:
    """A worker host's environment: no token nor URL for memfs (they come from
    the work item), the host's own SDK credentials, a short session period."""
    env = {**mounter.env, **WORKER_OWN, "MEMFS_SESSION_CHECK_INTERVAL": CHECK, **extra}
    del env["MEMFS_API_URL"]
    return env


def new_session(server: ServerProcess, mounter: Mounter, *stores: str) -> dict:
    """`memfs store session create --store ...`: the work item it prints."""
    args = ["session", "create"]
    for spec in stores:
        args += ["--store", spec]
    (line,) = admin(server, mounter, *args).splitlines()
    item: dict = json.loads(line)
    return item


def memfs_run(mounter: Mounter, command: list[str], *, env=None, stdin=subprocess.PIPE, args=()):
    """`memfs run --work-item - ... -- COMMAND`, started: the caller writes the work item."""
    argv = [sys.executable, "-m", "memfs", "run", "--work-item", "-"]
    argv += ["--cache-dir", str(mounter.cache_dir), "--final-sync-timeout", "20", *args, "--"]
    return subprocess.Popen(
        [*argv, *command],
        env=env or worker_env(mounter),
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def foreground_mount(mounter: Mounter, env: dict[str, str], *args: str) -> subprocess.Popen:
    """`memfs mount ARGS` in the foreground, with the test's cache folder."""
    return subprocess.Popen(
        [sys.executable, "-m", "memfs", "mount", *args]
        + ["--cache-dir", str(mounter.cache_dir), "--final-sync-timeout", "20"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def feed(proc: subprocess.Popen, item: dict, *, keep_open: bool = False) -> None:
    """Write the work item on the process's stdin; close it unless `keep_open`."""
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(item) + "\n")
    proc.stdin.flush()
    if not keep_open:
        proc.stdin.close()
        proc.stdin = None


def status(mounter: Mounter, env: dict[str, str]) -> tuple[list[dict], list[dict]]:
    """`memfs status --json`: the stores, and the followed sessions."""
    r = mounter.memfs("status", "--json", env=env, check=True)
    entries = json.loads(r.stdout)
    return [e for e in entries if "mount_path" in e], [e for e in entries if "session_id" in e]


def wait_for_event(mounter: Mounter, env: dict[str, str], event: str, store_id: str) -> dict:
    """The followed session's record once it holds that event of that store."""
    deadline = time.monotonic() + 30
    while True:
        _, sessions = status(mounter, env)
        for record in sessions:
            if any(e["event"] == event and e["store_id"] == store_id for e in record["events"]):
                return record
        if time.monotonic() > deadline:
            raise AssertionError(f"no {event} event of {store_id} within 30 s: {sessions}")
        time.sleep(0.2)


def unmount_all(mounter: Mounter, env: dict[str, str]) -> subprocess.CompletedProcess:
    """`memfs unmount --all`, seeing no memfs mount but this test's."""
    return mounter.unmount_all(env)


def wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(0.1)


def secrets_of(item: dict) -> list[bytes]:
    token = parse_work_item_secret(item["secret"]).sessions_token
    return [token.encode(), item["secret"].encode()]


# ------------------------------------------------------------------ the whole flow


def daemon_mount(mounter, item: dict, env: dict) -> subprocess.CompletedProcess[str]:
    """`memfs mount --daemon --work-item -` of `item`, as a worker runs it."""
    args = ["mount", "--daemon", "--work-item", "-", "--cache-dir", str(mounter.cache_dir)]
    return subprocess.run(
        [sys.executable, "-m", "memfs", *args],
        input=json.dumps(item),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_worker_flow_end_to_end(mounter, memfs_server, tmp_path):
    """As docs/worker.md types it: `memfs store session create`, then
    `memfs run --work-item - -- sh -c '...'` fed that JSON on standard input
    (and the pipe left open: memfs reads one JSON object, then the command
    gets /dev/null), the agent's writes reaching the store, a store attached
    mid-session mounted at its path, one detached final-synced and
    unmounted, `memfs status` showing both, and the final sync."""
    server = memfs_server
    notes = admin(server, mounter, "create", "Team Notes").strip()
    docs = admin(server, mounter, "create", "Docs").strip()
    late = admin(server, mounter, "create", "Late").strip()
    server_put(server, notes, "/seed.md", "from an earlier session\n")
    server_put(server, docs, "/guide.md", "read me\n")
    root = mounter.root
    item = new_session(server, mounter, f"{notes}={root}/notes", f"{docs}:read_only={root}/docs")
    session_id = item["data"]["id"]
    flags = tmp_path / "flags"
    flags.mkdir()
    agent = (
        f"cat; echo; cat {root}/docs/guide.md; "  # stdin: /dev/null, not the open pipe
        f"cat {root}/notes/seed.md > {root}/notes/copy.md; "
        f"echo 'the agent was here' > {root}/notes/agent.md; "
        f"touch {flags}/started; "
        f"while [ ! -e {root}/late/{MARKER} ]; do sleep 0.1; done; "
        f"echo 'written in a store attached mid-session' > {root}/late/late.md; "
        f"touch {flags}/wrote-late; "
        f"while [ ! -e {flags}/done ]; do sleep 0.1; done"
    )
    proc = memfs_run(mounter, ["sh", "-c", agent])
    feed(proc, item, keep_open=True)  # as a writer may
    try:
        wait_for_file(flags / "started", 60, "the agent", alive=lambda: proc.poll() is None)
        assert cmdlines_holding(secrets_of(item)) == []

        admin(server, mounter, "session", "attach", session_id, "--store", f"{late}={root}/late")
        wait_for_file(
            flags / "wrote-late", 20, "the store attached", alive=lambda: proc.poll() is None
        )
        mounter.sync(root / "late")
        assert remote_files(server, late) == {
            "/late.md": "written in a store attached mid-session\n"
        }

        admin(server, mounter, "session", "detach", session_id, docs)
        wait_for_event(mounter, worker_env(mounter), "detached", docs)
        assert not (root / "docs").exists()
        stores, (followed,) = status(mounter, worker_env(mounter))
        assert sorted(s["mount_path"] for s in stores) == [f"{root}/late", f"{root}/notes"]
        assert followed["session_id"] == session_id and followed["last_error"] is None
        events = [(e["event"], e["store_id"], e["mount_path"]) for e in followed["events"]]
        assert events == [("attached", late, f"{root}/late"), ("detached", docs, f"{root}/docs")]
        # The detach took the store from the session's token: its final sync
        # had nothing to upload, and its pass was refused (403); both are said.
        detail = followed["events"][1]["detail"]
        assert detail.startswith("nothing left to upload, but its final sync failed: "), detail
        assert "(403)" in detail
        text = mounter.memfs("status", env=worker_env(mounter), check=True).stdout
        assert f"attached {late}: mounted at {root}/late (read-write)" in text
        assert f"detached {docs}: unmounted {root}/docs, nothing left to upload, but" in text

        (flags / "done").touch()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            # The agent, orphaned, may still hold the pipes: fail, never hang.
            proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert out == "\nread me\n"
    assert (
        f"memfs: mounted {late} at {root}/late (read-write), attached to session {session_id}"
        in err
    )
    assert f"memfs: unmounted {root}/docs, detached from session {session_id}" in err
    assert f"memfs.mount ERROR final sync of {docs} failed: " in err
    assert (
        f"memfs: unmounted {root}/docs, detached from session {session_id} "
        "(nothing left to upload, but its final sync failed: "
    ) in err
    assert "final sync done" not in err
    assert remote_files(server, notes) == {
        "/seed.md": "from an earlier session\n",
        "/copy.md": "from an earlier session\n",
        "/agent.md": "the agent was here\n",
    }
    with server.http() as http:
        versions = http.get(f"/v1/memory_stores/{notes}/memory_versions").json()["data"]
    # The seed is the admin's; the rest is the session's, not the host's own key.
    actors = {v["path"]: v["created_by"] for v in versions}
    assert actors["/agent.md"] == {"type": "session_actor", "session_id": session_id}
    assert memfs_mounts_under(mounter.tmp) == [] and mounter.store_pids() == []
    assert not any(s in (out + err).encode() for s in secrets_of(item))


def server_put(server: ServerProcess, store_id: str, path: str, content: str) -> None:
    with server.http() as http:
        r = http.post(
            f"/v1/memory_stores/{store_id}/memories", json={"path": path, "content": content}
        )
    r.raise_for_status()


# ------------------------------------------------------------------ detaching


def test_a_store_detached_before_its_last_write_was_synced_keeps_it_in_the_cache(
    mounter, memfs_server, tmp_path
):
    """Detaching takes the store away from the session's token at once (the
    server answers 403 from then on), so its final sync cannot upload what
    the agent wrote since its last pass: the file is named, stays in the
    cache, `memfs run` exits 75 although the agent succeeded (as for files
    its last final sync leaves), and the next mount of the store with that
    cache uploads it."""
    server = memfs_server
    store = admin(server, mounter, "create", "Scratch").strip()
    path = mounter.root / "scratch"
    item = new_session(server, mounter, f"{store}={path}")
    flags = tmp_path / "flags"
    flags.mkdir()
    agent = (
        f"echo 'too late' > {path}/unsynced.md; touch {flags}/wrote; "
        f"while [ -e {path}/{MARKER} ]; do sleep 0.1; done"
    )
    # The write-behind off: the file is still unsynced when the detach comes.
    env = worker_env(mounter, MEMFS_WRITE_BEHIND="no")
    proc = memfs_run(mounter, ["sh", "-c", agent], env=env, stdin=subprocess.PIPE)
    out, err = "", ""
    try:
        feed(proc, item)
        wait_for_file(flags / "wrote", 60, "the agent", alive=lambda: proc.poll() is None)
        admin(server, mounter, "session", "detach", item["data"]["id"], store)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 75, err
    assert f"memfs: not uploaded from {path}: /unsynced.md" in err
    assert err.count("memfs: not uploaded from") == 1, err
    assert (
        f"memfs: the final sync left 1 file behind, kept in the cache ({mounter.cache_dir})"
    ) in err
    assert (
        f"memfs: unmounted {path}, detached from session {item['data']['id']} "
        "(its final sync left 1 file behind, kept in the cache for its next mount)"
    ) in err
    assert remote_files(server, store) == {}
    mounter.mount_one(store, "again")  # the server's own token reaches the store
    mounter.sync(mounter.root / "again")
    assert remote_files(server, store) == {"/unsynced.md": "too late\n"}


# ------------------------------------------------------------------ memfs mount


def test_memfs_mount_daemon_follows_its_session_until_unmount_all(mounter, memfs_server, tmp_path):
    """`memfs mount --daemon --work-item FILE` of a session with no store yet:
    it says so, and a process of its own follows the session (the token on
    its stdin only); a store attached is mounted, one detached unmounted,
    `memfs status` shows both, and `memfs unmount --all` ends the follower."""
    server = memfs_server
    item = new_session(server, mounter)
    session_id = item["data"]["id"]
    item_file = tmp_path / "work-item.json"
    item_file.write_text(json.dumps(item))
    env = worker_env(mounter)
    args = [
        "mount",
        "--daemon",
        "--work-item",
        str(item_file),
        "--cache-dir",
        str(mounter.cache_dir),
    ]
    r = mounter.memfs(*args, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout == (
        f"session {session_id} has no memory store: nothing mounted\n"
        f"following session {session_id}: stores attached to it are mounted, "
        "stores detached are unmounted\n"
    )
    _, (followed,) = status(mounter, env)
    assert followed["daemon"] is True and followed["events"] == []
    follower = followed["pid"]
    with open(f"/proc/{follower}/environ", "rb") as f:
        environ = f.read()
    assert not any(s in environ for s in secrets_of(item))
    assert cmdlines_holding(secrets_of(item)) == []

    store = admin(server, mounter, "create", "Attached Later").strip()
    path = mounter.root / "attached-later"
    admin(server, mounter, "session", "attach", session_id, "--store", f"{store}={path}")
    wait_for_file(path / MARKER, 20, "the attached store")
    (path / "note.md").write_text("through the daemon's mount\n")
    mounter.sync(path)
    assert remote_files(server, store) == {"/note.md": "through the daemon's mount\n"}
    admin(server, mounter, "session", "detach", session_id, store)
    wait_for_event(mounter, env, "detached", store)
    assert not path.exists()
    stores, (followed,) = status(mounter, env)
    assert stores == []
    assert [(e["event"], e["store_id"]) for e in followed["events"]] == [
        ("attached", store),
        ("detached", store),
    ]
    text = mounter.memfs("status", env=env, check=True).stdout
    assert text.startswith(
        f"session {session_id}: followed by pid {follower} (memfs mount --daemon)"
    )

    r = unmount_all(mounter, env)
    assert r.stdout == f"stopped following session {session_id}\n"
    wait_until(lambda: not os.path.exists(f"/proc/{follower}"), 10, "the follower gone")
    assert status(mounter, env) == ([], [])
    log = (mounter.cache_dir / f"session-{session_id}.log").read_bytes()
    assert b"was attached to session" in log and b"was detached from session" in log
    assert not any(s in log for s in secrets_of(item))


def test_a_session_going_idle_has_its_stores_push_at_once(mounter, memfs_server):
    """The follower sees the session go from `running` to `idle` (the agent's
    turn is over) and asks its read-write stores to push now: a file the
    passes (a minute apart) and the write-behind (turned off here) leave
    alone reaches the store within a few of the follower's checks."""
    server = memfs_server
    store = admin(server, mounter, "create", "Idle Flush").strip()
    path = mounter.root / "idle"
    item = new_session(server, mounter, f"{store}={path}")
    session_id = item["data"]["id"]
    env = worker_env(mounter, MEMFS_SYNC_INTERVAL="60", MEMFS_WRITE_BEHIND="no")
    r = daemon_mount(mounter, item, env)
    assert r.returncode == 0, r.stderr
    server.set_session_status(session_id, "running")
    time.sleep(1.5)  # three checks: the follower has seen it running
    (path / "turn.md").write_text("written during the turn\n")
    time.sleep(3)
    assert remote_files(server, store) == {}
    server.set_session_status(session_id, "idle")
    wait_until(lambda: remote_files(server, store) != {}, 10, "the idle flush")
    assert remote_files(server, store) == {"/turn.md": "written during the turn\n"}
    log = (mounter.cache_dir / f"session-{session_id}.log").read_text()
    assert f"session {session_id} went idle: its stores push their local changes now" in log
    unmount_all(mounter, env)


def test_a_store_the_daemon_mount_began_with_is_unmounted_when_detached(mounter, memfs_server):
    """The stores `memfs mount --daemon` mounted itself are not the follower's
    children: detached, each is stopped as `memfs unmount` stops it."""
    server = memfs_server
    store = admin(server, mounter, "create", "From The Start").strip()
    path = mounter.root / "start"
    item = new_session(server, mounter, f"{store}={path}")
    env = worker_env(mounter)
    r = daemon_mount(mounter, item, env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"mounted {store} at {path} (read-write)\n")
    (path / "kept.md").write_text("before the detach\n")
    mounter.sync(path)
    admin(server, mounter, "session", "detach", item["data"]["id"], store)
    followed = wait_for_event(mounter, env, "detached", store)
    assert not path.exists()
    (event,) = followed["events"]
    assert (event["event"], event["store_id"]) == ("detached", store)
    assert event["detail"].startswith("nothing left to upload, but its final sync failed: ")
    assert remote_files(server, store) == {"/kept.md": "before the detach\n"}
    assert unmount_all(mounter, env).stdout == f"stopped following session {item['data']['id']}\n"


def test_unmount_all_returns_only_once_no_mount_of_the_followed_session_can_appear(
    mounter, memfs_server, tmp_path
):
    """`memfs unmount --all` while the daemon follower is mounting a store
    attached to the session (its first pass held back by the fault proxy,
    longer than unmount once waited for a follower): it waits for the
    follower to end, the follower abandons that mount, and no mount of the
    session exists then or appears afterwards."""
    server = memfs_server
    item = new_session(server, mounter)
    session_id = item["data"]["id"]
    item_file = tmp_path / "work-item.json"
    item_file.write_text(json.dumps(item))
    env = worker_env(mounter)
    slow = admin(server, mounter, "create", "Slow To Mount").strip()
    path = mounter.root / "slow"
    held = 15.0
    with FaultProxyProcess(server.url) as proxy:
        args = ["mount", "--daemon", "--work-item", str(item_file), "--api-url", proxy.url]
        r = mounter.memfs(*args, "--cache-dir", str(mounter.cache_dir), env=env)
        assert r.returncode == 0, r.stderr
        _, (followed,) = status(mounter, env)
        follower = followed["pid"]
        proxy.set(match_path=f"^/v1/memory_stores/{slow}", delay=held)
        admin(server, mounter, "session", "attach", session_id, "--store", f"{slow}={path}")

        def store_requested() -> bool:
            seen = proxy.counters().requests_by_method_path
            return any(slow in p for p in seen)

        wait_until(store_requested, 20, "the attached store's first request")
        asked = time.monotonic()
        r = unmount_all(mounter, env)
        assert r.returncode == 0, r.stderr
        assert r.stdout == f"stopped following session {session_id}\n"
        wait_until(lambda: not os.path.exists(f"/proc/{follower}"), 10, "the follower gone")
        assert mounter.store_pids() == []
        time.sleep(max(0.0, asked + held + 3 - time.monotonic()))
        assert memfs_mounts_under(mounter.tmp) == [] and mounter.store_pids() == []
        assert not (path / MARKER).exists()
        assert status(mounter, env) == ([], [])
    log = (mounter.cache_dir / f"session-{session_id}.log").read_text()
    assert f"stopped following session {session_id} while mounting store {slow}" in log


def test_unmount_all_stops_the_follower_of_a_foreground_mount_mid_attach(
    mounter, memfs_server, tmp_path
):
    """A foreground `memfs mount --work-item FILE` follows its session while
    it waits: `memfs unmount --all` while that follower is mounting a store
    attached to the session (its first pass held back by the fault proxy)
    stops the follower, which abandons that mount, and unmounts the first
    store; the foreground process then ends, and no mount of the session
    exists then or appears afterwards."""
    server = memfs_server
    first = admin(server, mounter, "create", "First").strip()
    first_path = mounter.root / "first"
    item = new_session(server, mounter, f"{first}={first_path}")
    session_id = item["data"]["id"]
    item_file = tmp_path / "work-item.json"
    item_file.write_text(json.dumps(item))
    env = worker_env(mounter)
    slow = admin(server, mounter, "create", "Slow To Mount").strip()
    path = mounter.root / "slow"
    held = 15.0
    with FaultProxyProcess(server.url) as proxy:
        proc = foreground_mount(
            mounter, env, "--work-item", str(item_file), "--api-url", proxy.url,
            "--log-level", "INFO",
        )  # fmt: skip
        try:
            wait_for_file(first_path / MARKER, 60, "the first store")
            proxy.set(match_path=f"^/v1/memory_stores/{slow}", delay=held)
            admin(server, mounter, "session", "attach", session_id, "--store", f"{slow}={path}")

            def store_requested() -> bool:
                seen = proxy.counters().requests_by_method_path
                return any(slow in p for p in seen)

            wait_until(store_requested, 20, "the attached store's first request")
            asked = time.monotonic()
            r = unmount_all(mounter, env)
            assert r.stdout == (
                f"stopped following session {session_id}\nunmounted {first_path}\n"
            ), r.stderr
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
            assert memfs_mounts_under(mounter.tmp) == [] and mounter.store_pids() == []
            time.sleep(max(0.0, asked + held + 3 - time.monotonic()))
            assert memfs_mounts_under(mounter.tmp) == [] and mounter.store_pids() == []
            assert not (path / MARKER).exists()
            assert status(mounter, env) == ([], [])
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert f"stopped following session {session_id} while mounting store {slow}" in err
    assert f"stopped following session {session_id}; its mounts stay" in err


def test_unmount_all_stops_the_follower_of_memfs_run_and_the_command_goes_on(mounter, memfs_server):
    """`memfs run --work-item - -- sleep 60`: `memfs unmount --all` stops its
    follower (a store attached afterwards is not mounted) and unmounts its
    store, and the command goes on until it is stopped."""
    server = memfs_server
    first = admin(server, mounter, "create", "First").strip()
    first_path = mounter.root / "first"
    item = new_session(server, mounter, f"{first}={first_path}")
    session_id = item["data"]["id"]
    env = worker_env(mounter)
    proc = memfs_run(mounter, ["sleep", "60"])
    feed(proc, item)
    try:
        wait_for_file(first_path / MARKER, 60, "the first store", alive=lambda: proc.poll() is None)
        r = unmount_all(mounter, env)
        assert r.stdout == (f"stopped following session {session_id}\nunmounted {first_path}\n"), (
            r.stderr
        )
        assert status(mounter, env) == ([], [])
        late = admin(server, mounter, "create", "Late").strip()
        path = mounter.root / "late"
        admin(server, mounter, "session", "attach", session_id, "--store", f"{late}={path}")
        time.sleep(6 * float(CHECK))
        assert not (path / MARKER).exists()
        assert memfs_mounts_under(mounter.tmp) == [] and mounter.store_pids() == []
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "passing SIGUSR2" not in err
    assert memfs_mounts_under(mounter.tmp) == []


def test_unmount_of_one_mount_of_a_followed_session_unmounts_all_of_its_mounts(
    mounter, memfs_server
):
    """`memfs unmount PATH` of one store of a session a daemon follows:
    the follower is stopped first and waited for, then every mount of the
    session goes, and a store attached afterwards is never mounted."""
    server = memfs_server
    one = admin(server, mounter, "create", "One").strip()
    two = admin(server, mounter, "create", "Two").strip()
    one_path, two_path = mounter.root / "one", mounter.root / "two"
    item = new_session(server, mounter, f"{one}={one_path}", f"{two}={two_path}")
    session_id = item["data"]["id"]
    env = worker_env(mounter)
    r = daemon_mount(mounter, item, env)
    assert r.returncode == 0, r.stderr
    _, (followed,) = status(mounter, env)
    follower = followed["pid"]
    r = mounter.memfs("unmount", str(one_path), env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout == (
        f"stopped following session {session_id}\nunmounted {one_path}\nunmounted {two_path}\n"
    )
    wait_until(lambda: not os.path.exists(f"/proc/{follower}"), 10, "the follower gone")
    assert memfs_mounts_under(mounter.tmp) == [] and mounter.store_pids() == []
    assert status(mounter, env) == ([], [])
    late = admin(server, mounter, "create", "Late").strip()
    path = mounter.root / "late"
    admin(server, mounter, "session", "attach", session_id, "--store", f"{late}={path}")
    time.sleep(6 * float(CHECK))
    assert not (path / MARKER).exists()
    assert memfs_mounts_under(mounter.tmp) == [] and mounter.store_pids() == []


def test_unmount_of_an_attached_store_of_a_foreground_mount_takes_the_session_with_it(
    mounter, memfs_server
):
    """`memfs unmount PATH` of a store attached to the session of a
    foreground `memfs mount --session ID`: its follower stops, the store the
    session began with is unmounted too, and the foreground mount ends."""
    server = memfs_server
    first = admin(server, mounter, "create", "First").strip()
    first_path = mounter.root / "first"
    item = new_session(server, mounter, f"{first}={first_path}")
    session_id = item["data"]["id"]
    env = worker_env(mounter, MEMFS_WORK_ITEM_SECRET=item["secret"])
    proc = foreground_mount(mounter, env, "--session", session_id)
    try:
        wait_for_file(first_path / MARKER, 60, "the first store")
        second = admin(server, mounter, "create", "Second").strip()
        path = mounter.root / "second"
        admin(server, mounter, "session", "attach", session_id, "--store", f"{second}={path}")
        wait_for_file(path / MARKER, 20, "the second store")
        r = mounter.memfs("unmount", str(path), env=env)
        assert r.returncode == 0, r.stderr
        assert r.stdout == (
            f"stopped following session {session_id}\nunmounted {path}\nunmounted {first_path}\n"
        )
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert memfs_mounts_under(mounter.tmp) == [] and mounter.store_pids() == []
    assert status(mounter, env) == ([], [])


def test_memfs_mount_in_the_foreground_follows_a_session_named_by_id(
    mounter, memfs_server, tmp_path
):
    """`--session ID` with the work item secret in MEMFS_WORK_ITEM_SECRET:
    the same without a work item file; SIGTERM ends it all with the final
    sync of every store, the one attached meanwhile included."""
    server = memfs_server
    first = admin(server, mounter, "create", "First").strip()
    item = new_session(server, mounter, f"{first}={mounter.root}/first")
    session_id = item["data"]["id"]
    env = worker_env(mounter, MEMFS_WORK_ITEM_SECRET=item["secret"])
    proc = foreground_mount(mounter, env, "--session", session_id)
    try:
        wait_for_file(mounter.root / "first" / MARKER, 60, "the first store")
        second = admin(server, mounter, "create", "Second").strip()
        path = mounter.root / "second"
        admin(
            server,
            mounter,
            "session",
            "attach",
            session_id,
            "--store",
            f"{second}:read_only={path}",
        )
        wait_for_file(path / MARKER, 20, "the second store")
        with pytest.raises(OSError):
            (path / "x.md").write_text("read-only")
        (mounter.root / "first" / "a.md").write_text("kept by the final sync\n")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert out.splitlines() == [
        f"mounted {first} at {mounter.root}/first (read-write)",
        f"following session {session_id}: stores attached to it are mounted, "
        "stores detached are unmounted",
        f"mounted {second} at {mounter.root}/second (read-only), attached to session {session_id}",
    ]
    assert remote_files(server, first) == {"/a.md": "kept by the final sync\n"}
    assert memfs_mounts_under(mounter.tmp) == []


def threads_of(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def test_a_foreground_memfs_that_follows_a_session_waits_in_one_thread(mounter, memfs_server):
    """`memfs run` and a foreground `memfs mount` follow their sessions in
    the program that waits (trio), not in a thread beside it: once a store
    attached meanwhile is mounted, each is one thread."""
    server = memfs_server
    first = admin(server, mounter, "create", "First").strip()
    item = new_session(server, mounter, f"{first}={mounter.root}/first")
    session_id = item["data"]["id"]
    running = memfs_run(mounter, ["sleep", "60"])
    feed(running, item)
    env = worker_env(mounter, MEMFS_WORK_ITEM_SECRET=item["secret"])
    try:
        wait_for_file(mounter.root / "first" / MARKER, 60, "the first store")
        second = admin(server, mounter, "create", "Second").strip()
        path = mounter.root / "second"
        admin(server, mounter, "session", "attach", session_id, "--store", f"{second}={path}")
        wait_for_file(path / MARKER, 20, "the second store")
        assert threads_of(running.pid) == 1
        running.send_signal(signal.SIGTERM)
        _, err = running.communicate(timeout=60)
        assert running.returncode == 128 + signal.SIGTERM, err

        mounting = foreground_mount(mounter, env, "--session", session_id)
        try:
            wait_for_file(path / MARKER, 60, "the second store again")
            third = admin(server, mounter, "create", "Third").strip()
            later = mounter.root / "third"
            admin(server, mounter, "session", "attach", session_id, "--store", f"{third}={later}")
            wait_for_file(later / MARKER, 20, "the third store")
            assert threads_of(mounting.pid) == 1
            mounting.send_signal(signal.SIGTERM)
            _, err = mounting.communicate(timeout=60)
            assert mounting.returncode == 0, err
        finally:
            if mounting.poll() is None:
                mounting.kill()
                mounting.communicate()
    finally:
        if running.poll() is None:
            running.kill()
            running.communicate()
    assert memfs_mounts_under(mounter.tmp) == []


def test_memfs_run_whose_command_cannot_start_leaves_no_follower_behind(mounter, memfs_server):
    """The follower of `memfs run` runs while the command does: a command
    that cannot start unmounts the session's stores and leaves no session
    followed, nor its file in the runtime folder."""
    server = memfs_server
    first = admin(server, mounter, "create", "First").strip()
    item = new_session(server, mounter, f"{first}={mounter.root}/first")
    proc = memfs_run(mounter, ["no-such-command-here"])
    feed(proc, item)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 127, err
    assert status(mounter, worker_env(mounter)) == ([], [])
    assert list(mounter.runtime_dir.glob("session-*")) == []
    assert memfs_mounts_under(mounter.tmp) == []


# ------------------------------------------------------------------ where the session comes from


def test_anthropic_session_id_names_the_session_when_nothing_else_names_stores(
    mounter, memfs_server
):
    """Inside `ant beta:worker poll --on-work`, ANTHROPIC_SESSION_ID is set:
    with ANTHROPIC_WORK_SECRET, `memfs run -- CMD` mounts that session; a
    `--store` given wins over it."""
    server = memfs_server
    store = admin(server, mounter, "create", "From The Variable").strip()
    other = admin(server, mounter, "create", "Named By Flag").strip()
    item = new_session(server, mounter, f"{store}={mounter.root}/var")
    env = worker_env(
        mounter, ANTHROPIC_SESSION_ID=item["data"]["id"], ANTHROPIC_WORK_SECRET=item["secret"]
    )
    base = [sys.executable, "-m", "memfs", "run", "--cache-dir", str(mounter.cache_dir)]
    command = ["--", "sh", "-c", f"ls {mounter.root}"]
    r = subprocess.run(
        [*base, *command],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert (r.returncode, r.stdout) == (0, "var\n"), r.stderr
    env["MEMFS_TOKEN"] = server.token
    env["MEMFS_API_URL"] = server.url
    r = subprocess.run(
        [*base, "--store", f"{other}={mounter.root}/flag", *command],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert (r.returncode, r.stdout) == (0, "flag\n"), r.stderr


def test_a_session_without_a_memory_store_mounts_nothing_and_says_so(mounter, memfs_server):
    item = new_session(memfs_server, mounter)
    proc = memfs_run(mounter, ["sh", "-c", "echo the command ran"])
    out, err = proc.communicate(json.dumps(item), timeout=120)
    assert proc.returncode == 0, err
    assert out == "the command ran\n"
    assert err == f"memfs: session {item['data']['id']} has no memory store: nothing mounted\n"


# ------------------------------------------------------------------ refusals


def _refusal_cases(server: ServerProcess, mounter: Mounter, tmp_path: Path) -> dict:
    store = admin(server, mounter, "create", "Refusals").strip()
    live = new_session(server, mounter, f"{store}={mounter.root}/r")
    gone = new_session(server, mounter, f"{store}={mounter.root}/r")
    admin(server, mounter, "session", "delete", gone["data"]["id"])
    other = new_session(server, mounter)
    no_token = dict(live, secret=standard_secret({"api_base_url": server.url}))
    return {
        "deleted session": (gone, 1, f"memfs: cannot read session {gone['data']['id']} at "),
        "another session's secret": (
            dict(other, secret=live["secret"]),
            1,
            f"memfs: cannot read session {other['data']['id']} at ",
        ),
        "not a session's": (
            dict(live, data={"type": "healthcheck", "id": "hc_1"}),
            2,
            "memfs: the work item on standard input is not a session's: "
            "its data.type is 'healthcheck'",
        ),
        "no sessions token": (no_token, 2, "memfs: the work item secret has no sessions_token"),
        "no secret": (
            dict(live, secret=None),
            2,
            f"memfs: session {live['data']['id']}'s stores cannot be read without its "
            "sessions token: the work item has no secret",
        ),
        "not JSON": ("not a work item", 2, "memfs: the work item on standard input is not JSON"),
        "nothing": ("", 2, "memfs: the work item on standard input is empty"),
    }


REFUSALS = [
    "deleted session",
    "another session's secret",
    "not a session's",
    "no sessions token",
    "no secret",
    "not JSON",
    "nothing",
]


@pytest.mark.parametrize("case", REFUSALS)
def test_a_work_item_that_cannot_be_served_is_one_sentence_and_mounts_nothing(
    case, mounter, memfs_server, tmp_path
):
    item, code, sentence = _refusal_cases(memfs_server, mounter, tmp_path)[case]
    text = item if isinstance(item, str) else json.dumps(item)
    ran = tmp_path / "ran"
    proc = memfs_run(mounter, ["touch", str(ran)])
    out, err = proc.communicate(text, timeout=120)
    assert proc.returncode == code, err
    assert out == ""
    (line,) = err.splitlines()
    assert line.startswith(sentence), line
    assert not ran.exists()
    assert memfs_mounts_under(mounter.tmp) == [] and not (mounter.root / "r").exists()
    if isinstance(item, dict) and item.get("secret"):
        assert item["secret"] not in err
        with_token = item["secret"]
        try:
            token = parse_work_item_secret(with_token).sessions_token
        except Exception:
            token = None
        assert token is None or token not in err


def standard_secret(obj: dict) -> str:
    import base64

    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


# ------------------------------------------------------------------ a failing check


def test_a_session_that_cannot_be_read_mid_session_is_logged_once_and_unmounts_nothing(
    mounter, memfs_server, tmp_path
):
    """Through the fault proxy: every session read answered 503 for a while.
    The follower logs it once, the mounts stay and keep working, and once
    the session can be read again the store attached meanwhile is mounted.
    Each check is one request for the session, whatever its stores."""
    server = memfs_server
    one = admin(server, mounter, "create", "One").strip()
    two = admin(server, mounter, "create", "Two").strip()
    three = admin(server, mounter, "create", "Three").strip()
    root = mounter.root
    item = new_session(server, mounter, f"{one}={root}/one", f"{two}={root}/two")
    session_id = item["data"]["id"]
    flags = tmp_path / "flags"
    flags.mkdir()
    agent = (
        f"touch {flags}/started; while [ ! -e {flags}/write ]; do sleep 0.1; done; "
        f"echo 'while the session could not be read' > {root}/one/during.md; "
        f"touch {flags}/written; "
        f"while [ ! -e {root}/three/{MARKER} ]; do sleep 0.1; done"
    )
    with FaultProxyProcess(server.url) as proxy:
        proc = memfs_run(mounter, ["sh", "-c", agent], args=("--api-url", proxy.url))
        try:
            feed(proc, item)
            wait_for_file(flags / "started", 60, "the agent", alive=lambda: proc.poll() is None)
            session_path = f"/v1/sessions/{session_id}"
            proxy.reset()
            time.sleep(2.6)
            seen = proxy.counters().requests_by_method_path
            reads = seen.get(f"GET {session_path}", 0)
            assert 3 <= reads <= 7, seen  # one a check (each 0.5 s), not one per store
            assert [p for p in seen if "/v1/sessions" in p] == [f"GET {session_path}"]

            proxy.set(match_path="^/v1/sessions/", status=503, status_rate=1.0)
            admin(
                server, mounter, "session", "attach", session_id, "--store", f"{three}={root}/three"
            )
            time.sleep(3)  # several checks, all refused
            assert not (root / "three").exists()
            (flags / "write").touch()
            wait_for_file(
                flags / "written", 30, "the agent's write", alive=lambda: proc.poll() is None
            )
            mounter.sync(root / "one")
            assert "/during.md" in remote_files(server, one)
            proxy.reset()
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                # The agent, orphaned, may still hold the pipes: fail, never hang.
                proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    failures = [line for line in err.splitlines() if "cannot read session" in line]
    assert len(failures) == 1, err
    assert failures[0].endswith("(503 api_error); trying again in 0.5 s, the mounts stay")
    assert f"memfs: mounted {three} at {root}/three (read-write)" in err
    assert not re.search(r"unmounted .*(one|two)", err)
