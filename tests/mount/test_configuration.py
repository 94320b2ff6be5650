"""Configuration and logs as an operator meets them, through real mounts:
a setting from its flag, its `MEMFS_<FLAG>` variable, the config file or its
default, in that order; a bad value from any of them refused before
anything mounts; and `--log-format json` logs, every line an object."""

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

from memfs.mount import mount_table
from tests.support.mounts import Mounter, memfs_mounts_under

pytestmark = pytest.mark.fuse

RFC3339_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def _config(mounter: Mounter, text: str) -> Path:
    path = mounter.tmp / "config" / "memfs" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _mount_options(point: Path) -> str:
    for m in mount_table():
        if m.point == str(point):
            return m.options
    raise AssertionError(f"{point} is not mounted")


def test_a_setting_comes_from_its_flag_then_its_variable_then_the_file(mounter, memfs_server):
    """uid: flag, variable and file all set it (the flag wins); gid: the
    variable and the file (the variable wins); the store, the token file, the
    cache folder and --daemon: the file alone; allow-other: nobody (off)."""
    store_id = memfs_server.create_store("Configured")["id"]
    path = mounter.root / "configured"
    cache = mounter.tmp / "cache from the file"
    _config(
        mounter,
        f'store = ["{store_id}={path}"]\n'
        f'token-file = "{mounter.token_file}"\n'
        f'cache-dir = "{cache}"\n'
        "daemon = true\n"
        "uid = 1001\n"
        "gid = 1001\n"
        "final-sync-timeout = 20\n",
    )
    env = {**mounter.env, "MEMFS_UID": "1002", "MEMFS_GID": "1002"}
    r = mounter.memfs("mount", "--uid", "1003", env=env, timeout=60)
    assert r.returncode == 0, r.stderr  # returned: --daemon came from the file
    assert r.stdout == f"mounted {store_id} at {path} (read-write)\n"
    (path / "note.md").write_text("configured\n")
    st = os.stat(path)  # the defaults' owner (a new file is its maker's)
    assert (st.st_uid, st.st_gid) == (1003, 1002)
    assert "allow_other" not in _mount_options(path)
    assert (cache / store_id / "memfs.log").exists()
    assert mounter.unmount(path).returncode == 0
    with memfs_server.http() as http:
        listed = http.get(f"/v1/memory_stores/{store_id}/memories", params={"view": "full"})
    assert [(m["path"], m["content"]) for m in listed.json()["data"]] == [
        ("/note.md", "configured\n")
    ]


@pytest.mark.parametrize(
    ("source", "sentence"),
    [
        ("flag", "memfs: argument --sync-interval: 'abc' is not a number of seconds (see 'memfs mount --help')"),
        ("environment", "memfs: MEMFS_SYNC_INTERVAL=abc (environment) is not a number of seconds"),
        ("file", 'memfs: sync-interval = "abc" in {config} is not a number of seconds'),
    ],
)  # fmt: skip
def test_a_bad_value_from_any_source_is_refused_before_anything_mounts(
    source, sentence, mounter, memfs_server
):
    store_id = memfs_server.create_store("Refused")["id"]
    path = mounter.root / "refused"
    config = _config(mounter, 'sync-interval = "abc"\n' if source == "file" else "")
    env = mounter.env
    if source == "environment":
        env["MEMFS_SYNC_INTERVAL"] = "abc"
    extra = ("--sync-interval", "abc") if source == "flag" else ()
    args = ["mount", "--daemon", "--store", f"{store_id}={path}", *extra]
    args += ["--cache-dir", str(mounter.cache_dir), "--token-file", str(mounter.token_file)]
    r = mounter.memfs(*args, env=env, timeout=60)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == sentence.format(config=config) + "\n"
    assert memfs_mounts_under(mounter.tmp) == []
    assert not path.exists()
    assert not mounter.store_pids()
    assert not mounter.cache_dir.exists()


# ------------------------------------------------------------------ JSON logs


def _records(text: str) -> list[dict]:
    """Every line parsed as JSON, each with the fields every record has."""
    records = []
    for line in text.splitlines():
        record = json.loads(line)
        assert {"time", "level", "logger", "message"} <= set(record), line
        assert RFC3339_UTC.match(record["time"]), line
        assert record["level"] in ("DEBUG", "INFO", "WARNING", "ERROR"), line
        records.append(record)
    return records


def _memory_id(server, store_id: str, path: str) -> str:
    with server.http() as http:
        listed = http.get(f"/v1/memory_stores/{store_id}/memories").json()["data"]
    return next(m["id"] for m in listed if m["path"] == path)


def test_a_store_process_writes_its_daemon_log_as_json(mounter, memfs_server):
    store_id = memfs_server.create_store("JSON log")["id"]
    path = mounter.mount_one(store_id, extra=("--log-format", "json"))
    (path / "c.md").write_text("one\n")
    mounter.sync(path)
    memory_id = _memory_id(memfs_server, store_id, "/c.md")
    with memfs_server.http() as http:
        r = http.post(
            f"/v1/memory_stores/{store_id}/memories/{memory_id}", json={"content": "theirs\n"}
        )
        r.raise_for_status()
    (path / "c.md").write_text("mine\n")
    mounter.sync(path)
    assert (path / "c.md").read_text() == "theirs\n"
    assert mounter.unmount(path).returncode == 0
    text = (mounter.cache_dir / store_id / "memfs.log").read_text()
    records = _records(text)
    assert {r.get("store_id") for r in records} == {store_id}, text
    conflict = [r for r in records if r.get("event") == "conflict_copy"]
    assert len(conflict) == 1 and conflict[0]["path"] == "/c.md", text
    assert conflict[0]["level"] == "WARNING" and conflict[0]["logger"] == "memfs.sync"
    assert conflict[0]["message"].startswith("conflict on /c.md: changed here and in the store")
    events = [r.get("event") for r in records]
    assert events.index("mounted") < events.index("unmounted")
    assert memfs_server.token not in text


def test_a_foreground_mount_writes_only_json_on_stderr(mounter, memfs_server):
    store_id = memfs_server.create_store("JSON stderr")["id"]
    path = mounter.root / "fg"
    env = {**mounter.env, "MEMFS_LOG_FORMAT": "json"}
    stderr_path = mounter.tmp / "stderr"
    args = [sys.executable, "-m", "memfs", "-v", "mount", "--store", f"{store_id}={path}"]
    args += ["--cache-dir", str(mounter.cache_dir), "--token-file", str(mounter.token_file)]
    with open(stderr_path, "w") as stderr:
        proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
            text=True,
        )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == f"mounted {store_id} at {path} (read-write)\n"
        (path / "n.md").write_text("from the foreground\n")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=90) == 0
    deadline = time.monotonic() + 5
    while memfs_mounts_under(mounter.tmp) and time.monotonic() < deadline:
        time.sleep(0.1)
    text = stderr_path.read_text()
    records = _records(text)
    mine = [r for r in records if r["logger"] == "memfs"]  # the supervisor's, at -v
    assert any("the token comes from --token-file" in r["message"] for r in mine), text
    stores = [r for r in records if r["logger"].startswith(("memfs.mount", "memfs.sync"))]
    assert stores and all(r["store_id"] == store_id for r in stores), text
    assert "final sync" in " ".join(r["message"] for r in stores)
    assert memfs_server.token not in text


def test_a_refusal_in_a_json_log_is_a_json_record(mounter, memfs_server):
    env = {**mounter.env, "MEMFS_LOG_FORMAT": "json"}
    r = mounter.memfs("unmount", str(mounter.root / "nothing"), env=env)
    assert r.returncode == 1
    (record,) = _records(r.stderr)
    assert record["event"] == "command_failed"
    assert record["message"] == f"no memfs mount is running at {mounter.root / 'nothing'}"


def test_a_small_cache_size_evicts_clean_files_which_still_read_back(mounter, memfs_server):
    """`--cache-size 4K`: the cache folder keeps clean contents of about that
    much, the least recently used going first, and a file whose content went
    is fetched from the store again when it is read."""
    from memfs.testing import FakeStore

    store_id = memfs_server.create_store("small cache")["id"]
    stored = {f"/n{i}.md": f"{i}".encode() * 3000 for i in range(6)}
    for path, content in stored.items():
        FakeStore(memfs_server, store_id).put(path, content.decode())
    mnt = mounter.mount_one(store_id, extra=("--cache-size", "4K"))
    files = mounter.cache_dir / store_id / "files"
    for _ in range(2):
        for path, content in stored.items():
            assert (mnt / path.lstrip("/")).read_bytes() == content
        deadline = time.monotonic() + 20
        while len(list(files.iterdir())) > 1:  # only the one read last fits
            assert time.monotonic() < deadline, sorted(p.name for p in files.iterdir())
            time.sleep(0.2)
    mounter.unmount(mnt)


@pytest.mark.parametrize("memory", ["1K", "8M"])
def test_a_file_read_again_shows_every_change_whatever_the_cache_memory(
    mounter, memfs_server, memory
):
    """`--cache-memory`: the contents of the files closed last are kept in memory
    up to that many bytes (a larger one is read from its cache file); what a
    file shows never lags behind a change, pulled from the store at the same
    size or made here while it was closed."""
    from memfs.testing import FakeStore

    store_id = memfs_server.create_store("memory")["id"]
    store = FakeStore(memfs_server, store_id)
    mnt = mounter.mount_one(store_id, extra=("--cache-memory", memory))
    small, large = mnt / "small.md", mnt / "large.md"
    small.write_text("one\n")
    large.write_text("x" * 3000)
    assert (small.read_text(), large.read_text()) == ("one\n", "x" * 3000)
    mounter.sync(mnt)
    store.put("/small.md", "two\n")
    store.put("/large.md", "y" * 3000)
    mounter.sync(mnt)
    assert (small.read_text(), large.read_text()) == ("two\n", "y" * 3000)
    os.truncate(small, 2)
    assert small.read_text() == "tw"
    mounter.unmount(mnt)
    assert store.memories() == {"/small.md": "tw", "/large.md": "y" * 3000}
