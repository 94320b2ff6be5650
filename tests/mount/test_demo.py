"""`make demo`'s script, run for real as a reader runs it (scripts/demo.sh,
with its folder, mount path and port moved into the test's folder): its
mount has a runtime folder of its own, which another shell reaches by
sourcing the env file the demo writes, and its server falls back from a
taken port saying where it listens instead. Ctrl-C ends it with status 0."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.mounts import CREDENTIAL_ENV, SETTING_ENV, UNMOUNT_ALL_HERE, memfs_mounts_under

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "scripts" / "demo.sh"

pytestmark = [
    pytest.mark.fuse,
    pytest.mark.server,
    pytest.mark.skipif(
        not (ROOT / ".venv" / "bin" / "memfs").exists(),
        reason="scripts/demo.sh runs the clone's .venv/bin/memfs (make install makes it)",
    ),
]


class Demo:
    """scripts/demo.sh running in the foreground of a session of its own, as
    in a terminal; `other_env` is another shell's environment, whose own
    runtime folder is not the demo's."""

    def __init__(self, tmp: Path, port: int) -> None:
        self.tmp = tmp
        self.dir = tmp / "demo"
        self.mount_path = tmp / "mnt" / "demo"
        self.env_file = self.dir / "env"
        self.out = tmp / "demo.out"
        env = dict(os.environ)
        for name in (*CREDENTIAL_ENV, *SETTING_ENV, "MEMFS_API_URL"):
            env.pop(name, None)
        env["XDG_CONFIG_HOME"] = str(tmp / "config")
        env["MEMFS_RUNTIME_DIR"] = str(tmp / "shell-run")
        self.other_env = dict(env)
        env.update(
            MEMFS_DEMO_DIR=str(self.dir),
            MEMFS_DEMO_MOUNT=str(self.mount_path),
            MEMFS_DEMO_PORT=str(port),
        )
        with open(self.out, "w") as out:
            self.proc = subprocess.Popen(
                ["bash", str(DEMO)],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 90
        while not memfs_mounts_under(self.mount_path):
            assert self.proc.poll() is None, f"the demo exited: {self.output()}"
            assert time.monotonic() < deadline, f"the demo did not mount: {self.output()}"
            time.sleep(0.1)

    def output(self) -> str:
        return self.out.read_text()

    def in_other_shell(self, *args: str, source_env: bool = False) -> subprocess.CompletedProcess:
        """`memfs ARGS` in another shell, after `source $demo_dir/env` if asked."""
        script = 'source "$1" && shift; exec "$@"' if source_env else 'shift; exec "$@"'
        return subprocess.run(
            ["bash", "-c", script, "_", str(self.env_file), sys.executable, "-m", "memfs", *args],
            env=self.other_env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    def env_file_says(self, name: str) -> str:
        r = subprocess.run(
            ["bash", "-c", f'source "$1" && printf %s "${name}"', "_", str(self.env_file)],
            env=self.other_env,
            capture_output=True,
            text=True,
            check=True,
        )
        return r.stdout

    def ctrl_c(self) -> int:
        os.killpg(self.proc.pid, signal.SIGINT)
        return self.proc.wait(timeout=120)

    def cleanup(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(Exception):
                self.ctrl_c()
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        for point in memfs_mounts_under(self.tmp):
            subprocess.run(["fusermount3", "-uz", point], check=False)


@pytest.fixture
def start_demo(tmp_path):
    demos: list[Demo] = []

    def start(port: int = 0) -> Demo:
        demo = Demo(tmp_path, port)
        demos.append(demo)
        return demo

    try:
        yield start
    finally:
        for demo in demos:
            demo.cleanup()


def test_the_demo_mount_has_a_runtime_folder_of_its_own_that_its_env_file_names(start_demo):
    demo = start_demo()

    # Another shell, with its own runtime folder, neither sees nor ends the demo.
    assert json.loads(demo.in_other_shell("status", "--json").stdout) == []
    # `memfs unmount --all` where no other test's mount is visible (tests.support.mounts).
    here_only = ["unshare", "--mount", "--propagation", "private", "sh", "-c", UNMOUNT_ALL_HERE]
    unmount_all = subprocess.run(
        [*here_only, str(demo.tmp), sys.executable],
        env=demo.other_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert unmount_all.returncode == 0, unmount_all.stderr
    assert memfs_mounts_under(demo.mount_path) and demo.proc.poll() is None

    # Sourcing the demo's env file, as it says, reaches its mount, server and store.
    assert f"source {demo.env_file}" in demo.output()
    status = json.loads(demo.in_other_shell("status", "--json", source_env=True).stdout)
    assert [s["mount_path"] for s in status] == [str(demo.mount_path)]
    store_id = demo.env_file_says("MEMFS_DEMO_STORE")
    assert status[0]["store_id"] == store_id
    readme = demo.in_other_shell("store", "cat", store_id, "/README.md", source_env=True)
    assert readme.returncode == 0 and readme.stdout.strip(), readme.stderr
    assert (demo.mount_path / "README.md").read_text() == readme.stdout

    assert demo.ctrl_c() == 0, demo.output()
    assert not memfs_mounts_under(demo.mount_path)
    assert not demo.env_file.exists()


def test_the_demo_falls_back_from_a_taken_port_and_says_where_it_listens(start_demo):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        demo = start_demo(port)
        url = demo.env_file_says("MEMFS_API_URL")
        assert url.startswith("http://127.0.0.1:") and url != f"http://127.0.0.1:{port}"
        said = f"demo: port {port} is taken, so memfs serve listens on {url} instead"
        assert said in demo.output()
        store_id = demo.env_file_says("MEMFS_DEMO_STORE")
        listed = demo.in_other_shell("store", "ls", store_id, source_env=True)
        assert listed.returncode == 0 and "/README.md" in listed.stdout, listed.stderr
        assert demo.ctrl_c() == 0, demo.output()


def test_the_demo_moves_data_an_older_memfs_made_aside_and_starts_afresh(start_demo, tmp_path):
    older = tmp_path / "demo"
    older.mkdir(mode=0o700)
    with contextlib.closing(sqlite3.connect(older / "store.sqlite3")) as db:
        db.execute("CREATE TABLE stores (id TEXT)")
        db.execute("PRAGMA user_version = 3")
        db.commit()
    (older / "cache").mkdir()
    (older / "cache" / "left.txt").write_text("an older cache\n")

    demo = start_demo()
    out = demo.output()
    (aside,) = older.glob("older-*")
    said = f"demo: the demo's data was made by an older memfs; it is now in {aside}"
    assert said in out, out
    assert (aside / "store.sqlite3").exists()
    assert (aside / "cache" / "left.txt").read_text() == "an older cache\n"
    assert (demo.mount_path / "README.md").read_text()
    assert demo.ctrl_c() == 0, demo.output()


def test_the_demo_moves_a_cache_an_older_memfs_made_aside_and_mounts_afresh(start_demo):
    first = start_demo()
    assert first.ctrl_c() == 0, first.output()
    (journal,) = (first.dir / "cache").glob("*/journal.sqlite3")
    with contextlib.closing(sqlite3.connect(journal)) as db:
        db.execute("PRAGMA user_version = 7")
        db.commit()

    demo = start_demo()
    out = demo.output()
    (aside,) = demo.dir.glob("older-*")
    said = f"demo: the demo's cache was made by an older memfs; it is now in {aside}"
    assert said in out, out
    assert (aside / "cache" / journal.parent.name / "journal.sqlite3").exists()
    assert "move it aside" in out  # the mount's own sentence, shown as it came
    assert (demo.mount_path / "README.md").read_text()
    assert demo.ctrl_c() == 0, demo.output()
