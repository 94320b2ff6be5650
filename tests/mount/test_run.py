"""`memfs run [mount options] -- COMMAND`: real mounts of a real `memfs serve`,
real commands (sh, python), and what a caller sees: the exit status, stdout
and stderr, and what the store holds once `memfs run` has returned."""

from __future__ import annotations

import contextlib
import os
import pty
import select
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests.support.faults import FaultProxyProcess
from tests.support.mounts import memfs_mounts_under
from tests.support.running import remote_files, run_argv, wait_for_file


@pytest.fixture
def store(memfs_server) -> str:
    return memfs_server.create_store("run")["id"]


def _run(mounter, argv: list[str], *, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        argv, env=mounter.env, capture_output=True, text=True, timeout=timeout, **kw
    )


@pytest.mark.parametrize(
    ("script", "status"),
    [("exit 0", 0), ("exit 3", 3), ("kill -KILL $$", 128 + signal.SIGKILL)],
    ids=["exit-0", "exit-3", "sigkill"],
)
def test_the_command_s_status_and_writes_come_through(script, status, mounter, memfs_server, store):
    path = mounter.root / "s"
    write = f"echo 'from the command' > {path}/notes.md"
    r = _run(mounter, [*run_argv(mounter, store, path), "sh", "-c", f"{write}; {script}"])
    assert r.returncode == status, r.stderr
    assert "Traceback" not in r.stderr
    # No sync pass had come due (every 15 s): only the final sync uploaded it.
    assert remote_files(memfs_server, store) == {"/notes.md": "from the command\n"}
    assert memfs_mounts_under(mounter.tmp) == [] and not path.exists()
    assert mounter.store_pids() == []


def test_a_store_the_command_unmounts_itself_is_no_failure(mounter, memfs_server, store):
    """The command unmounts its store (`memfs unmount PATH`, whose final sync
    uploads everything): nothing is left behind, so `memfs run` says nothing
    of a final sync and exits with the command's 0, not 75."""
    path = mounter.root / "s"
    unmount = f"{sys.executable} -m memfs unmount {path}"
    script = f"echo 'then unmounted' > {path}/notes.md && {unmount} && exit 0"
    r = _run(mounter, [*run_argv(mounter, store, path), "sh", "-c", script])
    assert r.returncode == 0, r.stderr
    assert "final sync" not in r.stderr, r.stderr
    assert remote_files(memfs_server, store) == {"/notes.md": "then unmounted\n"}


def test_stdin_and_stdout_are_the_command_s(mounter, store):
    path = mounter.root / "s"
    command = ["sh", "-c", 'cat; ls -A "$0"; echo on-stderr >&2', str(path)]
    r = _run(mounter, [*run_argv(mounter, store, path), *command], input="typed\nlines\n")
    assert r.returncode == 0, r.stderr
    # Nothing of memfs's own on stdout: it is the command's alone.
    assert r.stdout == "typed\nlines\n.anthropic-memory-store\n"
    assert r.stderr.endswith("on-stderr\n")


def test_sigterm_goes_to_the_command_first_then_the_final_sync(
    mounter, memfs_server, store, tmp_path
):
    """As `docker stop` does: SIGTERM to memfs. The command traps it and writes
    one more file into the mount, which only a final sync after it can upload."""
    path = mounter.root / "s"
    ready = tmp_path / "ready"
    script = (
        f"trap 'echo stopped > {path}/on-term.md; exit 0' TERM; "
        f"echo early > {path}/early.md; touch {ready}; "
        "while :; do sleep 0.1; done"
    )
    proc = subprocess.Popen(
        [*run_argv(mounter, store, path), "sh", "-c", script],
        env=mounter.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for_file(ready, 60, "the command to start", lambda: proc.poll() is None)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert remote_files(memfs_server, store) == {"/early.md": "early\n", "/on-term.md": "stopped\n"}
    assert memfs_mounts_under(mounter.tmp) == []


def test_files_the_final_sync_leaves_behind_are_named_and_exit_75(
    mounter, memfs_server, store, tmp_path
):
    path = mounter.root / "s"
    ready, go = tmp_path / "ready", tmp_path / "go"
    script = f"echo kept > {path}/left.md; touch {ready}; while [ ! -e {go} ]; do sleep 0.05; done"
    with FaultProxyProcess(memfs_server.url) as proxy:
        argv = run_argv(mounter, store, path, "--final-sync-timeout", "3", api_url=proxy.url)
        proc = subprocess.Popen(
            [*argv, "sh", "-c", script],
            env=mounter.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_for_file(ready, 60, "the command to start", lambda: proc.poll() is None)
            proxy.set(down=True)  # the store is out when the command ends
            go.touch()
            _, err = proc.communicate(timeout=90)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 75, err
    assert f"memfs: not uploaded from {path}: /left.md\n" in err
    assert "Traceback" not in err
    assert remote_files(memfs_server, store) == {}
    assert memfs_mounts_under(mounter.tmp) == []
    # The cache kept it: the next run uploads it.
    r = _run(mounter, [*run_argv(mounter, store, path), "true"])
    assert r.returncode == 0, r.stderr
    assert remote_files(memfs_server, store) == {"/left.md": "kept\n"}


def test_a_failing_command_keeps_its_status_when_files_are_left_behind(
    mounter, memfs_server, store, tmp_path
):
    path = mounter.root / "s"
    with FaultProxyProcess(memfs_server.url) as proxy:
        argv = run_argv(mounter, store, path, "--final-sync-timeout", "2", api_url=proxy.url)
        control = f"{proxy.url}/__faults__"
        script = (
            f"echo x > {path}/x.md; "
            f"{sys.executable} -c \"import httpx; httpx.post('{control}', json={{'down': True}})\"; "
            "exit 4"
        )
        r = _run(mounter, [*argv, "sh", "-c", script])
    assert r.returncode == 4, r.stderr
    assert f"memfs: not uploaded from {path}: /x.md\n" in r.stderr


@pytest.mark.parametrize(
    ("command", "status", "sentence"),
    [
        (["no-such-command-here"], 127, "cannot run no-such-command-here: command not found"),
        (["{tmp}/notes.txt"], 126, "cannot run {tmp}/notes.txt: permission denied"),
    ],
    ids=["not-found", "not-executable"],
)
def test_a_command_that_cannot_start_is_a_sentence_after_the_unmount(
    command, status, sentence, mounter, store, tmp_path
):
    (tmp_path / "notes.txt").write_text("echo a file without its x bits\n")
    command = [c.format(tmp=tmp_path) for c in command]
    sentence = sentence.format(tmp=tmp_path)
    path = mounter.root / "s"
    r = _run(mounter, [*run_argv(mounter, store, path), *command])
    assert r.returncode == status
    assert r.stderr.strip().splitlines()[-1] == f"memfs: {sentence}"
    assert "Traceback" not in r.stderr
    assert memfs_mounts_under(mounter.tmp) == [] and mounter.store_pids() == []


def test_the_command_can_live_in_the_store(mounter, memfs_server, store):
    """The command is looked for once the stores are mounted."""
    path = mounter.root / "s"
    http = memfs_server.http()
    r = http.post(
        f"/v1/memory_stores/{store}/memories",
        json={"path": "/hello.sh", "content": "echo hello from the store\n"},
    )
    assert r.status_code == 200, r.text
    r = _run(mounter, [*run_argv(mounter, store, path), "sh", f"{path}/hello.sh"])
    assert (r.returncode, r.stdout) == (0, "hello from the store\n"), r.stderr


@pytest.mark.parametrize(
    ("args", "sentence"),
    [
        (["--daemon", "--", "true"], "memfs run takes no --daemon"),
        ([], "no command to run: give it after --"),
    ],
    ids=["daemon", "no-command"],
)
def test_usage_mistakes_are_one_sentence(args, sentence, mounter, store):
    path = mounter.root / "s"
    argv = [a for a in run_argv(mounter, store, path) if a != "--"]
    r = _run(mounter, [*argv, *args])
    assert r.returncode == 2
    assert r.stderr.startswith(f"memfs: {sentence}") and len(r.stderr.splitlines()) == 1
    assert memfs_mounts_under(mounter.tmp) == []


def test_no_credential_variable_reaches_the_command(mounter, store):
    path = mounter.root / "s"
    env = {**mounter.env, "ANTHROPIC_API_KEY": "sk-ant-api03-not-for-the-agent"}
    r = subprocess.run(
        [*run_argv(mounter, store, path), "sh", "-c", "env"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "ANTHROPIC_API_KEY" not in r.stdout and "not-for-the-agent" not in r.stdout
    assert f"MEMFS_RUNTIME_DIR={mounter.runtime_dir}" in r.stdout


COUNTER = """
import signal, sys, time
count = 0
def on_int(signum, frame):
    global count
    count += 1
    print(f"INT {count}", flush=True)
signal.signal(signal.SIGINT, on_int)
print("ready", flush=True)
while count < 2:
    time.sleep(0.05)
time.sleep(0.5)
sys.exit(5)
"""


def _read_until(fd: int, text: bytes, seen: bytearray, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while text not in seen:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"no {text!r} in {bytes(seen)!r}")
        if select.select([fd], [], [], left)[0]:
            try:
                seen += os.read(fd, 4096)
            except OSError:  # EIO: the terminal's last process closed it
                raise AssertionError(f"no {text!r} in {bytes(seen)!r}")


def test_on_a_terminal_ctrl_c_reaches_the_command_once_and_a_kill_is_passed_on(
    mounter, store, tmp_path
):
    """Ctrl-C goes to the terminal's foreground group, the command included:
    memfs must not send it a second one. A SIGINT sent to memfs alone is passed on."""
    path = mounter.root / "s"
    argv = [*run_argv(mounter, store, path), sys.executable, "-c", COUNTER]
    env = mounter.env
    pid, fd = pty.fork()
    if pid == 0:  # the child: memfs run on a terminal of its own
        os.execve(argv[0], argv, env)
    seen = bytearray()
    try:
        _read_until(fd, b"ready", seen, 60)
        os.write(fd, b"\x03")
        _read_until(fd, b"INT 1", seen, 10)
        time.sleep(1.0)
        with pytest.raises(AssertionError):
            _read_until(fd, b"INT 2", seen, 0.5)
        os.kill(pid, signal.SIGINT)  # kill(2) to memfs itself
        _read_until(fd, b"INT 2", seen, 10)
        _, wait_status = os.waitpid(pid, 0)
    finally:
        with_pid = [p for p in [pid] if _alive(p)]
        for p in with_pid:
            os.kill(p, signal.SIGKILL)
            os.waitpid(p, 0)
        os.close(fd)
    assert os.waitstatus_to_exitcode(wait_status) == 5, bytes(seen)
    assert b"INT 3" not in seen
    assert memfs_mounts_under(mounter.tmp) == []


def _alive(pid: int) -> bool:
    try:
        return os.waitpid(pid, os.WNOHANG) == (0, 0)
    except ChildProcessError:
        return False


@contextlib.contextmanager
def _under_systemd(argv: list[str], env: dict[str, str], address: str):
    """Start `argv` as a `Type=notify` unit would (NOTIFY_SOCKET at `address`),
    wait for READY=1, hand over the process; then SIGTERM it and expect
    STOPPING=1 and its exit (killed, whatever happens, if it outlives the test)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(address)
        sock.settimeout(60)
        env = {**env, "NOTIFY_SOCKET": address}
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            assert sock.recv(1024) == b"READY=1"
            yield proc
            proc.send_signal(signal.SIGTERM)
            assert sock.recv(1024) == b"STOPPING=1"
            proc.wait(90)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.mark.parametrize("command", ["run", "mount"])
def test_systemd_hears_ready_and_stopping(command, mounter, store, tmp_path):
    """`Type=notify`: READY=1 once the store is mounted, STOPPING=1 when the
    final sync begins; the command and the store processes never see the socket."""
    path = mounter.root / "s"
    address = str(tmp_path / "notify.sock")
    ready = tmp_path / "ready"
    argv = run_argv(mounter, store, path)
    if command == "run":
        check = f'echo "${{NOTIFY_SOCKET:-unset}}" > {ready}; sleep 300'
        argv += ["sh", "-c", check]
    else:
        argv = [a for a in argv if a != "--"]
        argv[3] = "mount"
    with _under_systemd(argv, mounter.env, address) as proc:
        assert (path / ".anthropic-memory-store").exists()
        if command == "run":
            wait_for_file(ready, 30, "the command to start")
            time.sleep(0.2)
            assert ready.read_text() == "unset\n"
        (store_pid,) = mounter.store_pids()
        with open(f"/proc/{store_pid}/environ", "rb") as f:
            assert b"NOTIFY_SOCKET" not in f.read()
    assert proc.returncode == (128 + signal.SIGTERM if command == "run" else 0)
    assert memfs_mounts_under(mounter.tmp) == []


def test_a_sigterm_the_moment_systemd_hears_ready_still_stops_with_the_final_sync(
    mounter, store, tmp_path
):
    """systemd may stop a unit as soon as it is ready: a foreground `memfs mount`
    catches SIGTERM from before it says READY=1, so the stop always goes
    through its final sync (STOPPING=1, exit 0), never the default death."""
    path = mounter.root / "s"
    address = str(tmp_path / "notify.sock")
    argv = [a for a in run_argv(mounter, store, path) if a != "--"]
    argv[3] = "mount"
    with _under_systemd(argv, mounter.env, address) as proc:
        pass  # SIGTERM the moment READY=1 is heard
    assert proc.returncode == 0
    assert memfs_mounts_under(mounter.tmp) == []
