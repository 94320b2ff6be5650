"""What `memfs` says about arguments it cannot take: a usage error (exit 2)
in one sentence that names the closest command or flag it knows and never
repeats a value that looks like a token (a store id or a path it shows).
argparse would take `--tok` for `--token-file` (prefix matching) and echo
what it could not use; memfs turns both off. No server is needed: every
case fails while parsing, before any request."""

from __future__ import annotations

import contextlib
import os
import secrets
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

SECRET = "sk-ant-api03-FAKE-not-a-real-key-7f3c9a"


def _memfs(
    *args: str, tmp: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    given = env or {}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMFS_", "ANTHROPIC_"))}
    env["MEMFS_RUNTIME_DIR"] = str(tmp / "run")
    env.update(given)
    return subprocess.run(
        [sys.executable, "-m", "memfs", *args],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=20,
    )


CASES = {
    # argv -> words the one sentence must hold
    "store --token": (["store", "--token", SECRET, "list"], ["--token is not taken"]),
    "store --token=": (["store", f"--token={SECRET}", "list"], ["--token is not taken"]),
    "store list --token": (["store", "list", "--token", SECRET], ["--token is not taken"]),
    "store --tok": (["store", "--tok", SECRET, "list"], ["unrecognized argument --tok"]),
    "store --token-fil": (["store", "--token-fil", SECRET, "list"], ["--token-fil"]),
    "store ls --api": (["store", "ls", "memstore_x", "--api", SECRET], ["--api"]),
    "mount --tok": (["mount", "--tok", SECRET], ["unrecognized", "--tok"]),
    "mount --tok=": (["mount", f"--tok={SECRET}"], ["unrecognized", "--tok"]),
    "mount --token-fi": (["mount", "--store", "memstore_x", "--token-fi", SECRET], ["--token-fi"]),
    "mount --secret-f": (["mount", "--secret-f", SECRET], ["--secret-f"]),
    "mount stray value": (["mount", "--store", "memstore_x", SECRET], ["1 unrecognized argument"]),
    "memfs --token mount": (["--token", SECRET, "mount"], ["unrecognized argument --token"]),
    "memfs -t": ([f"-t{SECRET}", "status"], ["-t"]),
    "serve --tok": (["serve", "--port", "0", "--tok", SECRET], ["--tok"]),
    "mount --sync-interval": (
        ["mount", "--store", "memstore_x", "--sync-interval", SECRET],
        ["argument --sync-interval: … (not shown in case it is a secret) is not a number"],
    ),
    "serve --port": (["serve", "--port", SECRET], ["--port: invalid int value: … (not shown"]),
    "unknown command": ([SECRET], ["invalid choice", "mount"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_no_argument_that_may_be_a_secret_is_echoed(case, tmp_path):
    argv, words = CASES[case]
    if argv[0] == "serve":
        argv = [*argv, "--db", str(tmp_path / "db.sqlite3")]
    try:
        r = _memfs(*argv, tmp=tmp_path)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"memfs {case} ran instead of refusing its arguments: {e}")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert SECRET not in r.stdout + r.stderr
    assert SECRET[:12] not in r.stdout + r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("memfs: "), r.stderr
    for word in words:
        assert word in lines[0], r.stderr


def test_an_unknown_flag_is_named_and_its_value_counted(tmp_path):
    r = _memfs("mount", "--tok", SECRET, "--also", tmp=tmp_path)
    assert r.returncode == 2
    assert r.stderr == (
        "memfs: unrecognized arguments --tok, --also and 1 more argument, "
        "not shown in case it is a secret (see 'memfs --help')\n"
    )


@pytest.mark.parametrize(
    ("argv", "sentence"),
    [
        (["mout"], "argument COMMAND: invalid choice 'mout'; did you mean 'mount'? (choose from "),
        (["store", "lst"], "argument ACTION: invalid choice 'lst'; did you mean 'list'?"),
        (["store", "session", "shw"], "invalid choice 'shw'; did you mean 'show'?"),
        (
            ["mount", "--stor", "memstore_abc"],
            "unrecognized arguments --stor (did you mean --store?), 'memstore_abc' (see ",
        ),
        (["serve", "--prot", "5"], "unrecognized arguments --prot (did you mean --port?), '5'"),
        (["unmount", "--al"], "unrecognized argument --al (did you mean --all?) (see "),
        (["run", "--sesion", "sesn_x"], "unrecognized argument --sesion (did you mean --session?)"),
    ],
)
def test_a_mistyped_command_or_flag_is_answered_with_the_closest_one(argv, sentence, tmp_path):
    r = _memfs(*argv, tmp=tmp_path)
    assert r.returncode == 2, r.stderr
    (line,) = r.stderr.splitlines()
    assert line.startswith("memfs: ") and sentence in line, line


def test_unmount_with_paths_and_all_is_refused_before_anything_stops(tmp_path):
    r = _memfs("unmount", "--all", "/mnt/memory/notes", tmp=tmp_path)
    assert (r.returncode, r.stderr) == (
        2,
        "memfs: give the mount paths to unmount or --all, not both\n",
    )


def test_a_store_id_or_a_path_is_shown_and_only_what_looks_like_a_token_hidden(tmp_path):
    r = _memfs("mount", "--store", "memstore_x", "memstore_y", tmp=tmp_path)
    assert (r.returncode, r.stderr) == (
        2,
        "memfs: unrecognized argument 'memstore_y' (see 'memfs --help')\n",
    )
    r = _memfs("mount", "--store", "memstore_abcDEF123:rw=/mnt/x", tmp=tmp_path)
    assert (r.returncode, r.stderr) == (
        2,
        "memfs: argument --store: 'memstore_abcDEF123:rw=/mnt/x' has access 'rw': it must be"
        " read_only or read_write (see 'memfs mount --help')\n",
    )
    token = secrets.token_hex(20)
    r = _memfs("mount", "--store", "memstore_x", "/tmp/there", token, tmp=tmp_path)
    assert r.returncode == 2
    assert r.stderr == (
        "memfs: unrecognized argument '/tmp/there' and 1 more argument, "
        "not shown in case it is a secret (see 'memfs --help')\n"
    )


def test_a_setting_that_may_be_a_secret_is_not_echoed_from_a_variable_or_the_config_file(
    tmp_path,
):
    r = _memfs("mount", "--store", "memstore_x", tmp=tmp_path, env={"MEMFS_SYNC_INTERVAL": SECRET})
    assert (r.returncode, r.stderr) == (
        2,
        "memfs: MEMFS_SYNC_INTERVAL=… (not shown in case it is a secret) (environment) "
        "is not a number of seconds\n",
    )
    config = tmp_path / "config.toml"
    config.write_text(f'sync-interval = "{SECRET}"\n')
    config.chmod(0o600)
    r = _memfs("mount", "--store", "memstore_x", tmp=tmp_path, env={"MEMFS_CONFIG": str(config)})
    assert (r.returncode, r.stderr) == (
        2,
        f"memfs: sync-interval = … (not shown in case it is a secret) in {config} "
        "is not a number of seconds\n",
    )
    r = _memfs("mount", "--store", "memstore_x", tmp=tmp_path, env={"MEMFS_SYNC_INTERVAL": "3"})
    assert "MEMFS_SYNC_INTERVAL=3 (environment) must be at least 5 seconds" in r.stderr


def test_full_flag_names_still_work(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("tok")
    # Parsing succeeds; the mount then fails for want of a store, as a usage error.
    r = _memfs("mount", "--token-file", str(token_file), tmp=tmp_path)
    assert (r.returncode, r.stderr) == (
        2,
        "memfs: no store to mount: give --store ID or --resources FILE\n",
    )


@pytest.mark.parametrize(
    ("argv", "sentence"),
    [
        (
            ["--work-item", "-", "--session", "sesn_x"],
            "give --work-item or --session, not both: the work item names its session",
        ),
        (
            ["--store", "memstore_x", "--work-item", "-"],
            "--store and --resources name the stores, --work-item and --session take them "
            "from a session: give one or the other",
        ),
        (["--work-item", "/no/such/work-item.json"], "cannot read the work item file"),
        (["--work-item", "-"], "the work item on standard input is empty"),
        (["--session", "sesn_x"], "session sesn_x's stores cannot be read without"),
        (["--session", "../x"], "argument --session: '../x' is not a session id"),
    ],
)
def test_a_work_item_or_session_that_cannot_be_used_is_one_sentence(argv, sentence, tmp_path):
    r = _memfs("mount", *argv, tmp=tmp_path)
    assert r.returncode == 2, r.stderr
    (line,) = r.stderr.splitlines()
    assert line.startswith(f"memfs: {sentence}"), line


DEEP_JSON = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    ("argv", "env", "said"),
    [
        (
            ["store", "--api-url", "http://x:abc", "list"],
            {"MEMFS_TOKEN": "tok"},
            "the API URL 'http://x:abc' is not a URL: Invalid port: 'abc'",
        ),
        (["store", "--api-url", "http://", "list"], {"MEMFS_TOKEN": "tok"}, "names no host"),
        (
            ["store", "--api-url", "http://" + "a" * 70 + ".example", "list"],
            {"MEMFS_TOKEN": "tok"},
            "is not a URL: encoding with 'idna' codec failed",
        ),
        (
            ["store", "--api-url", f"http://user:{SECRET}@127.0.0.1:1", "list"],
            {"MEMFS_TOKEN": "tok"},
            "the API URL holds a user or password: give the token in a file",
        ),
        (
            ["store", "--api-url", "http://127.0.0.1:1", "list"],
            {"MEMFS_TOKEN": f"{SECRET}\nsecond-line"},
            "the token is not one line of letters, digits and signs",
        ),
        (
            ["store", "--api-url", "http://127.0.0.1:1", "create", "notes-\udcff"],
            {"MEMFS_TOKEN": "tok"},
            "a value given is not UTF-8 text",
        ),
        (
            ["mount", "--resources", "{tmp}/deep.json"],
            {},
            "deep.json is not JSON: maximum recursion",
        ),
        (["mount", "--resources", "{tmp}/empty.json"], {}, "empty.json names no memory store"),
        (["store", "ls", ""], {"MEMFS_TOKEN": "tok"}, "argument STORE_ID: '' is not an id of"),
        (["store", "session", "show", ""], {"MEMFS_TOKEN": "tok"}, "SESSION_ID: '' is not an id"),
        (["store", "cat", "a/b", "/x.md"], {"MEMFS_TOKEN": "tok"}, "'a/b' is not an id of the API"),
        (
            ["serve", "--port", "0", "--db", "{tmp}/s.db", "--token", ""],
            {},
            "--token gives no token, only blanks or commas",
        ),
        (
            ["serve", "--port", "0", "--db", "{tmp}/s.db"],
            {"MEMFS_SERVE_TOKEN": " , "},
            "MEMFS_SERVE_TOKEN gives no token, only blanks or commas",
        ),
        (
            ["serve", "--port", "0", "--db", "{tmp}/other.db"],
            {"MEMFS_SERVE_TOKEN": "tok"},
            "other.db: it is another program's database: give a file of its own",
        ),
        (["serve", "--port", "0", "--host", " "], {}, "--host is empty: give it a value, or"),
        (["serve", "--port", "0", "--db", ""], {}, "--db is empty: give it a value, or leave"),
    ],
    ids=[
        "bad port",
        "no host",
        "a host label too long",
        "a password in the URL",
        "two-line token",
        "not UTF-8",
        "deep JSON",
        "no store in resources",
        "empty store id",
        "empty session id",
        "slash in an id",
        "empty --token",
        "blank MEMFS_SERVE_TOKEN",
        "another program's database",
        "empty --host",
        "empty --db",
    ],
)
def test_bad_input_is_one_sentence_and_exit_2_never_a_traceback(argv, env, said, tmp_path):
    (tmp_path / "deep.json").write_text(DEEP_JSON)
    (tmp_path / "empty.json").write_text('[{"type": "file"}]')
    with contextlib.closing(sqlite3.connect(tmp_path / "other.db")) as db:
        db.execute("CREATE TABLE notes (text)")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    r = _memfs(*argv, tmp=tmp_path, env=env)
    assert r.returncode == 2, r.stderr
    (line,) = r.stderr.splitlines()
    assert line.startswith("memfs: ") and said in line, line
    assert SECRET[:12] not in r.stderr


def test_a_put_from_a_closed_standard_input_is_refused_in_one_sentence(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMFS_", "ANTHROPIC_"))}
    env.update(MEMFS_RUNTIME_DIR=str(tmp_path / "run"), MEMFS_TOKEN="tok")
    argv = ["store", "--api-url", "http://127.0.0.1:1", "put", "memstore_x", "/a.md", "-"]
    r = subprocess.run(
        [sys.executable, "-m", "memfs", *argv],
        capture_output=True,
        text=True,
        env=env,
        preexec_fn=lambda: os.close(0),
        timeout=20,
    )
    assert r.returncode == 2, r.stderr
    (line,) = r.stderr.splitlines()
    assert line.startswith("memfs: cannot read -: "), line
