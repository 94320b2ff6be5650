"""The environment of memfs's children (memfs._children), and the launch line
that hands a store process its spec: real processes, nothing mounted."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict

import pytest

from memfs._children import NOTIFY_ENV, SECRET_ENV, STORE_MODULE, child_env, start_process
from memfs.control import StoreLaunch, StoreSpec
from memfs.supervisor import CREDENTIAL_SOURCES


def _spec(**overrides) -> StoreSpec:
    fields = dict(
        store_id="memstore_a",
        mount_path="/mnt/memory/a",
        api_url="http://127.0.0.1:9",
        token="tok-secret",
        cache_dir="/tmp/cache",
        runtime_dir="/tmp/run",
    )
    fields.update(overrides)
    return StoreSpec(**fields)


def test_a_store_process_whose_stdin_ends_first_exits_without_a_word(tmp_path):
    with open(tmp_path / "stderr", "w") as stderr:
        proc = start_process(STORE_MODULE, child_env(), stderr)
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0
    assert proc.stdout.read() == ""
    proc.stdout.close()
    assert (tmp_path / "stderr").read_text() == ""


def test_a_log_file_that_cannot_be_opened_is_the_one_sentence_of_the_answer(tmp_path):
    proc = start_process(STORE_MODULE, child_env())
    missing = tmp_path / "gone" / "memfs.log"
    proc.stdin.write(StoreLaunch(_spec(), str(missing)).to_json() + "\n")
    proc.stdin.close()
    assert proc.wait(timeout=30) == 1
    answer = proc.stdout.read()
    proc.stdout.close()
    assert answer == f"ERROR cannot open the log file {missing}: No such file or directory\n"


def test_no_child_gets_a_secret_or_systemds_socket():
    assert set(CREDENTIAL_SOURCES) <= set(SECRET_ENV)
    environ = {name: "s3cret" for name in SECRET_ENV}
    environ.update({NOTIFY_ENV: "/run/systemd/notify", "PATH": "/usr/bin", "HOME": "/root"})
    assert child_env(environ) == {"PATH": "/usr/bin", "HOME": "/root"}


def _environ_names(pid: int) -> set[bytes]:
    """The names of a process's environment, once it has one: /proc shows none
    while the process is still being started."""
    deadline = time.monotonic() + 10
    while True:
        with open(f"/proc/{pid}/environ", "rb") as f:
            names = {item.split(b"=", 1)[0] for item in f.read().split(b"\0")} - {b""}
        if names or time.monotonic() > deadline:
            return names
        time.sleep(0.01)


def test_store_processes_start_without_secrets(monkeypatch):
    monkeypatch.setenv("MEMFS_TOKEN", "tok-in-env")
    monkeypatch.setenv(NOTIFY_ENV, "/run/notify")
    proc = start_process(STORE_MODULE, child_env())
    try:
        names = _environ_names(proc.pid)
        assert b"MEMFS_TOKEN" not in names and NOTIFY_ENV.encode() not in names
        assert b"PATH" in names
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
        proc.stdout.close()


def test_a_launch_reads_back_as_itself():
    launch = StoreLaunch(_spec(read_only=True), "/c/a/memfs.log")
    again = StoreLaunch.from_json(launch.to_json())
    assert again == launch
    assert StoreLaunch.from_json(json.dumps({"spec": asdict(_spec())})) == (
        StoreLaunch(_spec(), None)
    )
    assert "tok-secret" not in repr(launch)


def test_the_deletions_mode_travels_as_its_word_and_arrives_as_the_enum():
    from memfs.api import Deletions

    line = StoreLaunch(_spec(sync_deletions=Deletions.DISABLED)).to_json()
    assert json.loads(line)["spec"]["sync_deletions"] == "disabled"
    assert StoreLaunch.from_json(line).spec.sync_deletions is Deletions.DISABLED


@pytest.mark.parametrize(
    "line",
    [
        "[]",
        '{"log_file": "memfs.log"}',
        '{"spec": "memstore_a"}',
        '{"spec": {"store_id": "memstore_a"}}',
        '{"spec": SPEC, "log_file": 7}',
        '{"spec": SPEC_NEVER}',
        "not json",
    ],
)
def test_what_is_no_launch_is_refused(line):
    never = {**asdict(_spec()), "sync_deletions": "never"}
    line = line.replace("SPEC_NEVER", json.dumps(never)).replace(
        "SPEC", json.dumps(asdict(_spec()))
    )
    with pytest.raises((ValueError, TypeError)):
        StoreLaunch.from_json(line)


def test_the_level_and_format_reach_the_store_process_before_it_logs(tmp_path):
    """The level and format come in the store process's environment: a bad spec
    is answered, and the log file named in the launch got what the level allows
    (the failed start is said at DEBUG: the supervisor says it to the user)."""
    log_file = tmp_path / "memfs.log"
    env = {**child_env(), "MEMFS_LOG_LEVEL": "DEBUG", "MEMFS_LOG_FORMAT": "json"}
    proc = start_process(STORE_MODULE, env)
    spec = _spec(cache_dir=str(tmp_path / "cache"), runtime_dir=str(tmp_path / "run"))
    proc.stdin.write(StoreLaunch(spec, str(log_file)).to_json() + "\n")
    proc.stdin.flush()
    answer = proc.stdout.readline()
    while answer.startswith("WAITING "):  # an attempt of the start the API did not answer
        answer = proc.stdout.readline()
    proc.stdin.close()
    proc.wait(timeout=60)
    proc.stdout.close()
    assert answer.startswith("ERROR "), answer
    records = [json.loads(line) for line in log_file.read_text().splitlines()]
    assert [r["level"] for r in records if r.get("event") == "store_failed"] == ["DEBUG"], records
    assert oct(os.stat(log_file).st_mode & 0o777) == "0o600"


def test_a_store_process_gone_before_its_spec_is_a_mount_error_with_its_status(monkeypatch):
    """A store process that could not even start memfs (here: one that exits 3
    at once) is named with its exit status."""
    import subprocess
    import sys

    from memfs._exceptions import MountError
    from memfs.supervisor import Supervisor, _supervisor

    def dead(module, env, stderr=None):
        proc = subprocess.Popen(
            [sys.executable, "-c", "import sys; sys.exit(3)"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        proc.wait()
        return proc

    monkeypatch.setattr(_supervisor, "start_process", dead)
    supervisor = Supervisor([_spec()], daemon=False)
    with pytest.raises(MountError) as refused:
        supervisor.start_all()
    assert str(refused.value) == (
        "store memstore_a could not be mounted at /mnt/memory/a: the store process exited (3)"
    )


def test_importing_memfs_loads_the_exceptions_alone():
    """`import memfs` loads no HTTP client (the commands that need none start
    without it); the wire types still come from `memfs` on use."""
    import subprocess
    import sys

    probe = (
        "import sys, memfs\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('memfs'))\n"
        "assert loaded == ['memfs', 'memfs._exceptions', 'memfs._version'], loaded\n"
        "from memfs import Memory, MemfsError, Page\n"
        "import memfs.api\n"
        "assert Memory is memfs.api.Memory and Page is memfs.api.Page\n"
    )
    subprocess.run([sys.executable, "-c", probe], check=True, timeout=60)


def test_status_sync_and_unmount_load_neither_trio_nor_httpx(tmp_path):
    """The commands that only talk to running store processes start fast:
    the control socket's server end (on trio) is not loaded with its client."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from memfs.cli import main\n"
        "for argv in (['status'], ['sync'], ['unmount', sys.argv[1]]):\n"
        "    main(argv)\n"
        "loaded = {'trio', 'httpx'} & set(sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    env = {**os.environ, "MEMFS_RUNTIME_DIR": str(tmp_path / "run")}
    command = [sys.executable, "-c", probe, str(tmp_path / "nothing")]
    ran = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
    assert ran.returncode == 0, ran.stderr


def test_what_a_command_prints_into_a_pipe_arrives_before_it_exits(tmp_path):
    """What the program printed into a pipe (block-buffered) arrives, and its
    exit status is the command's."""
    import subprocess
    import sys

    env = {**os.environ, "MEMFS_RUNTIME_DIR": str(tmp_path / "run")}
    listed = subprocess.run(
        [sys.executable, "-m", "memfs", "status", "--json"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert (listed.returncode, listed.stdout, listed.stderr) == (0, "[]\n", "")
    refused = subprocess.run(
        [sys.executable, "-m", "memfs", "unmount", str(tmp_path / "nothing")],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert refused.returncode == 1
    assert refused.stderr.startswith("memfs: ") and refused.stderr.endswith("\n")
