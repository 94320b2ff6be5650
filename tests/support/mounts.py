"""Real memfs mounts for tests: `memfs mount --daemon` against a real
`memfs serve`, driven through the CLI as an operator would, always unmounted
at teardown (first `memfs unmount --all`, then `fusermount3 -uz` for anything
left, then SIGKILL for any store process still alive)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from memfs.cli._options import CONFIG_OPTION, MOUNT_OPTIONS
from memfs.mount import mount_table
from tests.support import ServerProcess

CREDENTIAL_ENV = (
    "MEMFS_TOKEN",
    "MEMFS_WORK_ITEM_SECRET",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_WORK_SECRET",
    "ANTHROPIC_BASE_URL",
)
"""What a developer's shell may hold that would change which credentials a test's memfs uses."""
SETTING_ENV = (
    *(o.env for o in MOUNT_OPTIONS),
    CONFIG_OPTION.env,
    "MEMFS_LOG_FORMAT",
)
"""The variables of the mount settings (MEMFS_SYNC_INTERVAL...), which a shell may hold too."""


def memfs_mounts_under(root: Path) -> list[str]:
    """The memfs mount points under `root`, as paths (the mounts table's
    escapes decoded: `Café Notes`, not `Café\\040Notes`)."""
    return [
        m.point
        for m in mount_table()
        if m.source.startswith("memfs:") and m.point.startswith(str(root))
    ]


UNMOUNT_ALL_HERE = """
set -e
# In a mount namespace of its own: the other tests' memfs mounts are detached
# here only, so that `--all` cannot take them for stale ones and clean them up.
# One that another test unmounted meanwhile is gone already: only one still
# here and not detached fails this.
grep '^memfs:' /proc/self/mounts | cut -d' ' -f2 | while read -r point; do
  case "$point" in
    "$0"/*) ;;
    *) umount -l "$point" 2>/dev/null || ! cut -d' ' -f2 /proc/self/mounts | grep -qxF "$point" ;;
  esac
done
exec "$1" -m memfs unmount --all
"""


class Mounter:
    """Mounts stores of `server` under `tmp/mnt`, with its own cache and runtime folders."""

    def __init__(self, server: ServerProcess, tmp: Path) -> None:
        self.server = server
        self.tmp = tmp
        self.root = tmp / "mnt"
        self.cache_dir = tmp / "cache"
        self.runtime_dir = tmp / "run"
        self.token_file = tmp / "token"
        self.token_file.write_text(server.token)
        os.chmod(self.token_file, 0o600)
        self.root.mkdir(exist_ok=True)

    @property
    def env(self) -> dict[str, str]:
        """The caller's environment without what would change the mount: its
        credentials, its `MEMFS_<FLAG>` settings and its config file; the
        mount root is this mounter's."""
        env = dict(os.environ)
        for name in (*CREDENTIAL_ENV, *SETTING_ENV):
            env.pop(name, None)
        env["MEMFS_RUNTIME_DIR"] = str(self.runtime_dir)
        # A session's stores mount only under the root.
        env["MEMFS_ROOT"] = str(self.root)
        env["MEMFS_API_URL"] = self.server.url
        env["XDG_CONFIG_HOME"] = str(self.tmp / "config")
        return env

    def memfs(
        self,
        *args: str,
        timeout: float = 120,
        env: dict[str, str] | None = None,
        check: bool = False,
        umask: int | None = None,
    ):
        """Run the memfs command (with `umask` when given); returns the CompletedProcess (text)."""
        r = subprocess.run(
            [sys.executable, "-m", "memfs", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env or self.env,
            stdin=subprocess.DEVNULL,
            preexec_fn=None if umask is None else (lambda: os.umask(umask)),
        )
        if check and r.returncode != 0:
            raise AssertionError(
                f"memfs {' '.join(args)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}"
            )
        return r

    def mount(
        self,
        *stores: str,
        extra: tuple[str, ...] = (),
        check: bool = True,
        umask: int | None = None,
    ):
        """`memfs mount --daemon --store S ...` with this mounter's folders."""
        args = ["mount", "--daemon", "--root", str(self.root), "--cache-dir", str(self.cache_dir)]
        args += ["--token-file", str(self.token_file), "--final-sync-timeout", "20"]
        for s in stores:
            args += ["--store", s]
        return self.memfs(*args, *extra, check=check, umask=umask)

    def mount_one(
        self,
        store_id: str,
        name: str = "s",
        *,
        read_only: bool = False,
        extra: tuple[str, ...] = (),
    ) -> Path:
        path = self.root / name
        access = ":read_only" if read_only else ""
        self.mount(f"{store_id}{access}={path}", extra=extra)
        return path

    def sync(self, *paths: Path, check: bool = True):
        return self.memfs("sync", *map(str, paths), check=check)

    def unmount_all(self, env: dict[str, str] | None = None, *, check: bool = True):
        """`memfs unmount --all`, seeing no memfs mount but this mounter's: it also
        cleans up stale mounts, and another test's (killed on purpose, and about
        to be mounted again) must not be one of them."""
        argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", UNMOUNT_ALL_HERE]
        r = subprocess.run(
            [*argv, str(self.tmp), sys.executable],
            env=env or self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check and r.returncode != 0:
            raise AssertionError(f"memfs unmount --all exited {r.returncode}:\n{r.stderr}")
        return r

    def unmount(self, *paths: Path, check: bool = True, timeout: float = 120):
        return self.memfs("unmount", *map(str, paths), check=check, timeout=timeout)

    def status(self) -> list[dict]:
        import json

        return json.loads(self.memfs("status", "--json", check=True).stdout)

    def store_pids(self) -> list[int]:
        """Pids of the store processes this mounter started."""
        pids = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmd = f.read()
                with open(f"/proc/{entry}/environ", "rb") as f:
                    environ = f.read()
            except OSError:
                continue
            if (
                b"memfs.mount" in cmd
                and f"MEMFS_RUNTIME_DIR={self.runtime_dir}".encode() in environ
            ):
                pids.append(int(entry))
        return pids

    def cleanup(self) -> None:
        # The session followers of this mounter's runtime folder first, so that
        # none mounts anything again; `memfs unmount --all` would stop them,
        # but it would also clean other tests' stale mounts.
        with contextlib.suppress(Exception):
            from memfs.supervisor import stop_followers

            stop_followers(str(self.runtime_dir))
        # Only this mounter's mounts.
        mine = memfs_mounts_under(self.tmp)
        if mine:
            with contextlib.suppress(Exception):
                self.memfs("unmount", *mine, timeout=90)
        for point in memfs_mounts_under(self.tmp):
            subprocess.run(["fusermount3", "-uz", point], capture_output=True)
        deadline = time.monotonic() + 5
        while self.store_pids() and time.monotonic() < deadline:
            time.sleep(0.1)
        for pid in self.store_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for point in memfs_mounts_under(self.tmp):
            subprocess.run(["fusermount3", "-uz", point], capture_output=True)
