"""`memfs run` the way a sandbox container runs it, without a container engine:
fresh mount and PID namespaces (`unshare --mount --pid --fork`, with its own
/proc), a tmpfs on that namespace's /mnt so the host's is untouched, the
stores under its /mnt/memory, and the agent's command as an unprivileged
user (nobody, 65534) writing into them. Then the same through the image's entrypoint script,
which drops to `MEMFS_AGENT_USER` itself. What counts is what the store holds
once the namespace is gone."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import ServerProcess, serve_accepting
from tests.support.mounts import CREDENTIAL_ENV, Mounter, memfs_mounts_under
from tests.support.running import remote_files, run_argv

ROOT = Path(__file__).resolve().parents[2]
ENTRYPOINT = ROOT / "docker" / "entrypoint.sh"
NOBODY = 65534
TOKEN = "sandbox-tok-" + secrets.token_hex(12)

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("setpriv"),
    reason="needs root, unshare and setpriv",
)

# In the new namespaces: a tmpfs over /mnt (the host's stays as it is), then the command.
NAMESPACE = [
    "unshare",
    "--mount",
    "--pid",
    "--fork",
    "--propagation",
    "private",
    "--kill-child",
    "--mount-proc",
    "--",
    "sh",
    "-c",
    'mount -t tmpfs -o mode=0755 memfs-sandbox /mnt && mkdir /mnt/memory && exec "$@"',
    "sh",
]

# The agent's work, as nobody: write into the store, and tell who it was and
# what it saw (stdout is passed through to the test).
AGENT_SCRIPT = (
    "set -e; cd /mnt/memory/sandbox-notes; "
    'echo "from the agent" > agent.md; mkdir -p notes; echo deep > notes/deep.md; '
    'echo "uid=$(id -u) gid=$(id -g) pid1=$(cat /proc/1/comm)"; '
    "stat -c 'owner=%u:%g' agent.md; "
    'env | grep -E "^(MEMFS_TOKEN|ANTHROPIC_[A-Z_]*KEY|HOME)=" || true'
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = serve_accepting(tmp_path_factory.mktemp("serve") / "store.sqlite3", [TOKEN])
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


@pytest.fixture
def store(server: ServerProcess) -> Iterator[str]:
    store_id = server.create_store("Sandbox Notes")["id"]
    yield store_id
    # The entrypoint runs as root, whose cache is /var/cache/memfs.
    shutil.rmtree(f"/var/cache/memfs/{store_id}", ignore_errors=True)


def _host_mnt() -> list[str]:
    return sorted(os.listdir("/mnt"))


def _check_the_store(server: ServerProcess, store_id: str, stdout: str) -> None:
    assert f"uid={NOBODY} gid={NOBODY}" in stdout
    assert f"owner={NOBODY}:{NOBODY}" in stdout
    assert "MEMFS_TOKEN" not in stdout and TOKEN not in stdout
    assert remote_files(server, store_id) == {
        "/agent.md": "from the agent\n",
        "/notes/deep.md": "deep\n",
    }


def test_memfs_run_in_fresh_namespaces_with_an_unprivileged_agent(mounter, server, store):
    before = _host_mnt()
    argv = [a for a in run_argv(mounter, store, Path("/unused")) if a != "--"]
    argv[argv.index("--store") + 1] = store  # under --root, at its name's slug
    argv[argv.index("--root") + 1] = "/mnt/memory"
    argv += ["--allow-other", "--uid", str(NOBODY), "--gid", str(NOBODY), "--"]
    agent = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    r = subprocess.run(
        [*NAMESPACE, *argv, *agent, "sh", "-c", AGENT_SCRIPT],
        env=mounter.env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "pid1=python" in r.stdout  # memfs run was the namespace's first process
    _check_the_store(server, store, r.stdout)
    assert _host_mnt() == before
    assert memfs_mounts_under(Path("/mnt")) == []


def test_the_entrypoint_in_fresh_namespaces_drops_to_the_agent_user(
    mounter, server, store, tmp_path
):
    before = _host_mnt()
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    # The entrypoint mounts under the default root, /mnt/memory, of the namespace.
    env = {k: v for k, v in mounter.env.items() if k not in {*CREDENTIAL_ENV, "MEMFS_ROOT"}}
    env.update(
        PATH=f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}",
        MEMFS_TOKEN=TOKEN,
        MEMFS_API_URL=server.url,
        MEMFS_STORES=store,
        MEMFS_RESOURCES=str(tmp_path / "no-resources.json"),
        MEMFS_AGENT_USER="nobody",
        TMPDIR=str(tmpdir),
    )
    r = subprocess.run(
        [*NAMESPACE, "bash", str(ENTRYPOINT), "sh", "-c", AGENT_SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    _check_the_store(server, store, r.stdout)
    assert "HOME=/nonexistent" in r.stdout  # nobody's, from the entrypoint
    assert list(tmpdir.iterdir()) == []
    assert _host_mnt() == before
    assert "Traceback" not in r.stderr and TOKEN not in r.stderr
