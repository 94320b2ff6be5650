"""Secrets and isolation, on a real mount made by root and probed by another
user (`nobody`, through `tests.support.otheruser`), as an agent running
beside a root memfs would: it cannot reach the control sockets (so it cannot
stop the mount or trigger a sync), cannot list the runtime folder, cannot
read the cache (journal, contents, conflict copies, log), the processes'
environments or a mount made without `--allow-other`; and no secret is in
any file memfs keeps.

The folders sit in a folder everyone may pass through, as `/run` and
`/var/cache` are: only memfs's own modes keep the other user out."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memfs.testing import FakeStore
from tests.support import cmdlines_holding, conflict_files, serve_accepting
from tests.support.mounts import Mounter
from tests.support.otheruser import available, run_as_other

pytestmark = pytest.mark.skipif(available() is not None, reason=str(available()))

TOKEN = "isolation-tok-" + secrets.token_hex(12)

PROBE = r"""
import errno, json, os, socket, sys
out = {}
for kind, path in json.loads(sys.argv[1]):
    try:
        if kind == "list":
            os.listdir(path)
        elif kind == "read":
            with open(path, "rb") as f:
                f.read(1)
        elif kind == "connect":
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(path)
        elif kind == "stat":
            os.stat(path)
        out[path] = "allowed"
    except OSError as e:
        out[path] = errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps(out))
"""


@pytest.fixture
def open_base() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="memfs-isolation-"))
    os.chmod(base, 0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def server(tmp_path):
    server = serve_accepting(tmp_path / "store.sqlite3", [TOKEN])
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def mounter(server, open_base):
    m = Mounter(server, open_base)
    try:
        yield m
    finally:
        m.cleanup()


def foreground_mount(mounter: Mounter, store_id: str, path: Path, log: Path) -> subprocess.Popen:
    """`memfs mount` in the foreground (a supervisor stays), the token in MEMFS_TOKEN."""
    args = ["mount", "--root", str(mounter.root), "--cache-dir", str(mounter.cache_dir)]
    args += ["--sync-interval", "3600", "--store", f"{store_id}={path}", "-vv"]
    with open(log, "wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "memfs", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env={**mounter.env, "MEMFS_TOKEN": TOKEN},
        )
    deadline = time.monotonic() + 60
    while not mounter.status():
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, "the mount did not come up"
        time.sleep(0.1)
    return proc


def test_another_user_can_neither_reach_nor_read_a_root_mount(mounter, server, tmp_path):
    store_id = server.create_store("isolated")["id"]
    path = mounter.root / "s"
    log = tmp_path / "mount.log"
    supervisor = foreground_mount(mounter, store_id, path, log)
    try:
        (path / "note.md").write_text("base")
        mounter.sync(path)
        FakeStore(server, store_id).put("/note.md", "theirs")
        (path / "note.md").write_text("mine, kept as a conflict copy")
        mounter.sync(path)
        [copy] = conflict_files(mounter.cache_dir / store_id / "conflicts")
        [before] = mounter.status()
        passes, pid = before["passes"], before["pid"]

        # The memfs commands, run by the other user against root's runtime folder.
        other_env = {"PATH": "/usr/bin:/bin", "HOME": "/"}
        other_env["MEMFS_RUNTIME_DIR"] = str(mounter.runtime_dir)
        commands = [
            ["status"],
            ["status", "--json"],
            ["sync"],
            ["sync", str(path)],
            ["unmount", str(path)],
            ["unmount", "--all"],
        ]
        for args in commands:
            r = run_as_other([sys.executable, "-m", "memfs", *args], env=other_env)
            said = f"memfs {' '.join(args)}: {r.returncode} {r.stdout!r} {r.stderr!r}"
            assert r.returncode != 0, said
            assert r.stdout == "" and "Traceback" not in r.stderr, said
            assert r.stderr.startswith("memfs: ") and r.stderr.count("\n") == 1, said
            assert str(mounter.runtime_dir) in r.stderr, said

        # Everything else it could try by hand.
        probes = [("list", mounter.runtime_dir), ("list", mounter.cache_dir), ("list", path)]
        probes += [("stat", path / "note.md"), ("read", copy)]
        probes += [("read", f"/proc/{p}/environ") for p in (supervisor.pid, pid)]
        for folder in (mounter.cache_dir, mounter.runtime_dir):
            for root, dirs, files in os.walk(folder):
                probes += [("list", os.path.join(root, d)) for d in dirs]
                for name in files:
                    full = os.path.join(root, name)
                    probes.append(("connect" if name.endswith(".sock") else "read", full))
        assert any(kind == "connect" for kind, _ in probes)
        assert any(str(p).endswith(".sqlite3") or "journal" in str(p) for _, p in probes), probes
        listed = [(kind, str(p)) for kind, p in probes]
        r = run_as_other([sys.executable, "-c", PROBE, json.dumps(listed)])
        assert r.returncode == 0, r.stderr
        answers = json.loads(r.stdout)
        assert set(answers) == {p for _, p in listed}
        assert {p: a for p, a in answers.items() if a != "EACCES"} == {}

        # Nothing happened: no pass ran, the mount and its processes live on.
        [after] = mounter.status()
        assert (after["passes"], after["pid"]) == (passes, pid)
        assert supervisor.poll() is None
        assert (path / "note.md").read_text() == "theirs"

        # And no secret in any file memfs keeps, readable or not.
        for folder in (mounter.cache_dir, mounter.runtime_dir):
            for root, _dirs, files in os.walk(folder):
                for name in files:
                    full = os.path.join(root, name)
                    if not name.endswith(".sock"):
                        with open(full, "rb") as f:
                            assert TOKEN.encode() not in f.read(), full
        with open(f"/proc/{pid}/environ", "rb") as f:
            assert TOKEN.encode() not in f.read()
        assert cmdlines_holding([TOKEN.encode()]) == []
        assert TOKEN not in mounter.memfs("status", "--json", check=True).stdout
    finally:
        if supervisor.poll() is None:
            supervisor.send_signal(signal.SIGTERM)
        code = supervisor.wait(60)
    assert code == 0
    said = log.read_text()
    assert " DEBUG " in said and TOKEN not in said
