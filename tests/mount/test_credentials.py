"""Where `memfs mount` finds its credentials and which header they travel in,
seen through real mounts of a real `memfs serve`, and that no secret shows
where other users or the agent could read it.

`memfs serve` records on every version who made it: `created_by.type` is
`api_actor` for one of its own tokens (an API key, whichever header carries
it) and `session_actor` for a sessions token it minted, which it takes only
as `Authorization: Bearer`. So a write through the mount, then
`memory_versions`, tells which credential was used, and a session's write
that the header was Bearer. `SESSION_TOKEN` below stands for a sessions
token minted for the test's store (`session_token`)."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import (
    ServerProcess,
    cmdlines_holding,
    serve_accepting,
    standard_base64_secret,
)
from tests.support.mounts import Mounter
from tests.support.running import remote_files

API_KEY = "sk-ant-api03-" + secrets.token_urlsafe(24)
SESSION_TOKEN = "sesn-tok-" + secrets.token_hex(12)
OTHER_TOKEN = "other-tok-" + secrets.token_hex(12)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    db = tmp_path_factory.mktemp("serve") / "store.sqlite3"
    server = serve_accepting(db, [API_KEY, SESSION_TOKEN, OTHER_TOKEN])
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def mounter(server: ServerProcess, tmp_path: Path) -> Iterator[Mounter]:
    m = Mounter(server, tmp_path)
    try:
        yield m
    finally:
        m.cleanup()


def _mount_args(m: Mounter, store_id: str, *extra: str) -> list[str]:
    args = ["mount", "--daemon", "--store", f"{store_id}={m.root / 's'}"]
    return args + ["--cache-dir", str(m.cache_dir), *extra]


def _actors(server: ServerProcess, store_id: str) -> list[str]:
    with server.http() as http:
        r = http.get(f"/v1/memory_stores/{store_id}/memory_versions")
    r.raise_for_status()
    return [v["created_by"]["type"] for v in r.json()["data"]]


def _secret_for(server: ServerProcess, token: str) -> str:
    return standard_base64_secret({"sessions_token": token, "api_base_url": server.url})


def session_token(server: ServerProcess, store_id: str) -> str:
    """A sessions token of a new session holding `store_id`."""
    return server.create_session(store_id)["sessions_token"]


# (environment, flags) -> the actor the server records; "URL" stands for the server's URL.
CASES = {
    "ANTHROPIC_API_KEY": ({"ANTHROPIC_API_KEY": API_KEY}, (), "api_actor"),
    "ANTHROPIC_AUTH_TOKEN": ({"ANTHROPIC_AUTH_TOKEN": SESSION_TOKEN}, (), "session_actor"),
    "MEMFS_TOKEN api key": ({"MEMFS_TOKEN": API_KEY}, (), "api_actor"),
    "MEMFS_TOKEN other": ({"MEMFS_TOKEN": SESSION_TOKEN}, (), "session_actor"),
    "token file api key": ({}, ("--token-file", "API_KEY_FILE"), "api_actor"),
    "ANTHROPIC_WORK_SECRET": ({"ANTHROPIC_WORK_SECRET": "SECRET"}, (), "session_actor"),
    "api key over auth token": (
        {"ANTHROPIC_API_KEY": API_KEY, "ANTHROPIC_AUTH_TOKEN": SESSION_TOKEN},
        (),
        "api_actor",
    ),
    "MEMFS_TOKEN over ANTHROPIC_API_KEY": (
        {"MEMFS_TOKEN": SESSION_TOKEN, "ANTHROPIC_API_KEY": API_KEY},
        (),
        "session_actor",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_header_a_credential_travels_in(case, mounter, server, tmp_path):
    variables, flags, actor = CASES[case]
    store_id = server.create_store(f"creds {case}")["id"]
    minted = session_token(server, store_id)
    env = mounter.env
    # The API's URL from the SDKs' variable (or, for the secret, from the secret itself).
    del env["MEMFS_API_URL"]
    if "ANTHROPIC_WORK_SECRET" not in variables:
        env["ANTHROPIC_BASE_URL"] = server.url
    for name, value in variables.items():
        value = minted if value == SESSION_TOKEN else value
        env[name] = _secret_for(server, minted) if value == "SECRET" else value
    key_file = tmp_path / "api-key"
    key_file.write_text(API_KEY + "\n")
    flags = tuple(str(key_file) if f == "API_KEY_FILE" else f for f in flags)
    r = mounter.memfs(*_mount_args(mounter, store_id, *flags), env=env)
    assert r.returncode == 0, r.stderr
    (mounter.root / "s" / "note.md").write_text("who wrote this?")
    mounter.sync(mounter.root / "s")
    assert _actors(server, store_id) == [actor]


REFUSED_SOURCES = ["MEMFS_TOKEN", "--token-file", "ANTHROPIC_API_KEY", "MEMFS_TOKEN_FILE"]


@pytest.mark.parametrize("source", REFUSED_SOURCES)
@pytest.mark.parametrize("where", ["path", "id", "path in the foreground"])
def test_a_refused_token_is_one_sentence_naming_where_it_came_from(
    where, source, mounter, server, tmp_path
):
    """A token the API refuses (401) at the start: one sentence naming its
    source, never the token; nothing before it claims a mount path or kept
    changes, and nothing is mounted or made. With a path the store process
    meets the refusal; without one, memfs itself asking the store's name."""
    store_id = server.create_store(f"refused {source} {where}")["id"]
    refused = "sk-ant-api03-refused-" + secrets.token_hex(8)
    store = store_id if where == "id" else f"{store_id}={mounter.root / 's'}"
    args = ["mount", "--store", store, "--root", str(mounter.root)]
    args += ["--cache-dir", str(mounter.cache_dir)]
    if where != "path in the foreground":
        args.append("--daemon")
    env = mounter.env
    token_file = tmp_path / "refused-token"
    token_file.write_text(refused)
    if source == "--token-file":
        args += ["--token-file", str(token_file)]
    elif source == "MEMFS_TOKEN_FILE":
        env[source] = str(token_file)
    else:
        env[source] = refused
    r = mounter.memfs(*args, env=env)

    assert r.returncode == 1, r.stderr
    sentence = (
        f"the API at {server.url} refused the token from {source} (401): "
        "give a valid token for this API URL"
    )
    lines = r.stderr.splitlines()
    assert lines[-1].startswith("memfs: ") and lines[-1].endswith(sentence), r.stderr
    assert "mounting it at" not in r.stderr and "local changes are kept" not in r.stderr
    assert refused not in r.stderr + r.stdout
    assert "Traceback" not in r.stderr
    assert os.listdir(mounter.root) == [] and not mounter.store_pids()


def test_a_refused_token_mounts_nothing_from_a_cache_and_loses_nothing(mounter, server, tmp_path):
    """A cache is no reason to mount with a token the API refuses: nothing it
    writes could be uploaded. The change the cache holds waits for a valid one."""
    store_id = server.create_store("refused over a cache")["id"]
    path = mounter.mount_one(store_id)
    (path / "kept.md").write_text("written before")
    for pid in mounter.store_pids():  # the change stays in the cache alone
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while mounter.store_pids() and time.monotonic() < deadline:
        time.sleep(0.05)
    token_file = tmp_path / "refused-token"
    token_file.write_text("sk-ant-api03-refused-" + secrets.token_hex(8))
    r = mounter.memfs(*_mount_args(mounter, store_id, "--token-file", str(token_file)))
    assert r.returncode == 1 and "refused the token from --token-file (401)" in r.stderr
    assert not mounter.store_pids() and remote_files(server, store_id) == {}
    mounter.sync(mounter.mount_one(store_id))
    assert remote_files(server, store_id) == {"/kept.md": "written before"}


def test_a_work_item_secret_without_a_sessions_token_is_one_sentence(mounter, server):
    store_id = server.create_store("no sessions token")["id"]
    env = mounter.env
    env["ANTHROPIC_WORK_SECRET"] = standard_base64_secret({"api_base_url": server.url})
    r = mounter.memfs(*_mount_args(mounter, store_id), env=env)
    assert (r.returncode, r.stderr) == (2, "memfs: the work item secret has no sessions_token\n")
    assert not (mounter.root / "s").exists()


def test_no_secret_shows_in_ps_a_store_process_its_log_or_status(mounter, server, tmp_path):
    store_id = server.create_store("secrets stay hidden")["id"]
    minted = session_token(server, store_id)
    work_secret = _secret_for(server, minted)
    variables = {
        "ANTHROPIC_API_KEY": API_KEY,
        "ANTHROPIC_AUTH_TOKEN": SESSION_TOKEN,
        "ANTHROPIC_WORK_SECRET": work_secret,  # the one in use: a secret beats the host's own
        "MEMFS_SERVE_TOKEN": OTHER_TOKEN,
    }
    env = {**mounter.env, **variables}
    r = mounter.memfs(*_mount_args(mounter, store_id, "-vv"), env=env)
    assert r.returncode == 0, r.stderr
    path = mounter.root / "s"
    (path / "note.md").write_text("hidden well")
    synced = mounter.sync(path)
    status = mounter.memfs("status", "--json", check=True)

    values = [
        v.strip().encode() for v in (API_KEY, SESSION_TOKEN, OTHER_TOKEN, minted, work_secret)
    ]
    assert cmdlines_holding(values) == []
    (pid,) = mounter.store_pids()
    with open(f"/proc/{pid}/environ", "rb") as f:
        environ = f.read().split(b"\0")
    names = {item.split(b"=", 1)[0] for item in environ}
    assert names.isdisjoint({n.encode() for n in [*variables, "MEMFS_TOKEN"]}), names
    assert not any(v in item for item in environ for v in values)
    log = (mounter.cache_dir / store_id / "memfs.log").read_bytes()
    assert b" DEBUG " in log, "the store logs at DEBUG, where a leak would be likeliest"
    said = [r.stdout, r.stderr, synced.stdout, synced.stderr, status.stdout, status.stderr]
    for text in [log, *(s.encode() for s in said)]:
        assert not any(v in text for v in values)
    assert _actors(server, store_id) == ["session_actor"]  # the secret's minted token


def test_memfs_store_takes_the_same_sources(server):
    base = {k: v for k, v in os.environ.items() if not k.startswith(("MEMFS_", "ANTHROPIC_"))}

    def store(*args: str, stdin: str = "", **env: str) -> str:
        r = subprocess.run(
            [sys.executable, "-m", "memfs", "store", *args],
            input=stdin,
            capture_output=True,
            text=True,
            env={**base, **env},
            timeout=60,
        )
        assert r.returncode == 0, r.stderr
        return r.stdout

    sdk = {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": API_KEY}
    store_id = store("create", "by the SDK's variables", **sdk).strip()
    store("put", store_id, "/a.md", stdin="1", **sdk)
    as_memfs = {"MEMFS_API_URL": server.url, "MEMFS_TOKEN": API_KEY}
    store("put", store_id, "/a.md", stdin="2", **as_memfs)
    store("put", store_id, "/a.md", "--auth", "bearer", stdin="3", **as_memfs)
    minted = session_token(server, store_id)
    bearer = {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_AUTH_TOKEN": minted}
    store("put", store_id, "/a.md", stdin="4", **bearer)
    # --auth x-api-key sends the sessions token where memfs serve does not take one.
    keyed = subprocess.run(
        [sys.executable, "-m", "memfs", "store", "put", store_id, "/a.md", "--auth", "x-api-key"],
        input="5",
        capture_output=True,
        text=True,
        env={**base, "MEMFS_API_URL": server.url, "MEMFS_TOKEN": minted},
        timeout=60,
    )
    assert keyed.returncode == 1 and "refused the token (401)" in keyed.stderr
    log = json.loads(store("log", store_id, "--json", **sdk))
    assert [v["created_by"]["type"] for v in reversed(log)] == [
        "api_actor",
        "api_actor",
        "api_actor",
        "session_actor",
    ]


WRONG_KEY = "sk-ant-api03-" + "wrong" * 5
WRONG_AUTH_TOKEN = "sk-ant-oat01-" + "wrong" * 5
SECRET_SOURCES = [
    "--secret-file",
    "MEMFS_WORK_ITEM_SECRET",
    "ANTHROPIC_WORK_SECRET",
    "--work-item",
    "the config file",
]


@pytest.mark.parametrize("source", SECRET_SOURCES)
def test_on_a_worker_host_the_secret_beats_the_hosts_own_sdk_credentials(
    source, mounter, server, tmp_path
):
    """A worker host exports ANTHROPIC_API_KEY and ANTHROPIC_AUTH_TOKEN for its
    own SDK client (here wrong ones, which the server refuses). With a work
    item secret from any source, memfs never sends them: the mount works on
    the secret's sessions token, and what it writes is recorded as the
    session's session_actor."""
    store_id = server.create_store(f"worker host {source}")["id"]
    path = mounter.root / "s"
    session = _session_of(server, store_id, path)
    secret = _secret_for(server, session["sessions_token"])
    env = {**mounter.env, "ANTHROPIC_API_KEY": WRONG_KEY, "ANTHROPIC_AUTH_TOKEN": WRONG_AUTH_TOKEN}
    del env["MEMFS_API_URL"]  # the URL comes from the secret
    args = ["mount", "--daemon", "--cache-dir", str(mounter.cache_dir)]
    if source == "--work-item":
        item = server.work_item(session)
        item["secret"] = secret
        item_file = tmp_path / "work-item.json"
        item_file.write_text(json.dumps(item))
        args += ["--work-item", str(item_file)]
    else:
        args += ["--store", f"{store_id}={path}"]
        secret_file = tmp_path / "secret"
        secret_file.write_text(secret)
        if source == "--secret-file":
            args += ["--secret-file", str(secret_file)]
        elif source == "the config file":
            config = Path(env["XDG_CONFIG_HOME"]) / "memfs" / "config.toml"
            config.parent.mkdir(parents=True)
            config.write_text(f'secret-file = "{secret_file}"\n')
        else:
            env[source] = secret
    r = mounter.memfs(*args, env=env)
    assert r.returncode == 0, r.stderr
    (path / "note.md").write_text("written on a worker host")
    mounter.sync(path)
    with server.http() as http:
        versions = http.get(f"/v1/memory_stores/{store_id}/memory_versions").json()["data"]
    assert [v["created_by"] for v in versions] == [
        {"type": "session_actor", "session_id": session["id"]}
    ]
    said = r.stdout + r.stderr
    assert WRONG_KEY not in said and session["sessions_token"] not in said


def _session_of(server: ServerProcess, store_id: str, path: Path) -> dict:
    """A session of `server` holding `store_id` read-write, mounted at `path`."""
    resource = {"type": "memory_store", "memory_store_id": store_id, "mount_path": str(path)}
    with server.http() as http:
        r = http.post(
            "/v1/sessions",
            json={"resources": [resource]},
            headers={"anthropic-beta": "managed-agents-2026-04-01"},
        )
    r.raise_for_status()
    return r.json()
