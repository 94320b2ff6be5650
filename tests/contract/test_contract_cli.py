"""`memfs store` as a new user drives it: a real process against a real
`memfs serve`, reading what it prints and its exit status."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ServerProcess
from tests.support.mounts import CREDENTIAL_ENV


class StoreCommand:
    def __init__(self, url: str, env: dict[str, str]) -> None:
        self.url = url
        self.env = env

    def __call__(
        self, *args: str, stdin: bytes = b"", env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        full_env = {**self.env, **(env or {})}
        result = subprocess.run(
            [sys.executable, "-m", "memfs", "store", *args],
            input=stdin.decode("utf-8", "surrogateescape"),
            capture_output=True,
            text=True,
            env=full_env,
            timeout=60,
        )
        assert "Traceback" not in result.stderr, result.stderr
        return result

    def ok(self, *args: str, stdin: bytes = b"") -> str:
        result = self(*args, stdin=stdin)
        assert result.returncode == 0, result.stderr
        return result.stdout


@pytest.fixture
def store_cmd(shared_memfs_server: ServerProcess, tmp_path: Path) -> StoreCommand:
    env = {
        k: v
        for k, v in os.environ.items()
        if (not k.startswith("MEMFS_") or k == "MEMFS_LOG_LEVEL") and k not in CREDENTIAL_ENV
    }
    env["MEMFS_API_URL"] = shared_memfs_server.url
    env["MEMFS_TOKEN"] = shared_memfs_server.token
    return StoreCommand(shared_memfs_server.url, env)


def test_a_session_with_memfs_store(store_cmd: StoreCommand, tmp_path: Path):
    store_id = store_cmd.ok("create", "CLI Notes", "--description", "for the test").strip()
    assert store_id.startswith("memstore_")
    listing = store_cmd.ok("list").splitlines()
    assert any(line.split("\t")[:2] == [store_id, "CLI Notes"] for line in listing)

    note = tmp_path / "note.md"
    note.write_text("# Title\nbody\n")
    assert store_cmd.ok("put", store_id, "/notes/note.md", str(note)).startswith("created\t")
    store_cmd.ok("put", store_id, "/notes/piped.md", "-", stdin="piped é\n".encode())
    store_cmd.ok("put", store_id, "/top.md", stdin=b"no file argument")
    assert store_cmd.ok("put", store_id, "/top.md", stdin=b"second").startswith("updated\t")
    assert store_cmd.ok("put", store_id, "/top.md", stdin=b"second").startswith("unchanged\t")

    ls = [line.split("\t") for line in store_cmd.ok("ls", store_id).splitlines()]
    assert ls == [
        ["/notes/note.md", str(len("# Title\nbody\n"))],
        ["/notes/piped.md", str(len("piped é\n".encode()))],
        ["/top.md", "6"],
    ]
    assert store_cmd.ok("ls", store_id, "/notes/").splitlines() == [
        "/notes/note.md\t13",
        "/notes/piped.md\t9",
    ]
    assert store_cmd.ok("cat", store_id, "/notes/note.md") == "# Title\nbody\n"
    assert store_cmd.ok("cat", store_id, "/notes/piped.md") == "piped é\n"

    assert store_cmd.ok("rm", store_id, "/notes/note.md").startswith("deleted\t")
    gone = store_cmd("cat", store_id, "/notes/note.md")
    assert gone.returncode == 1
    assert gone.stderr == f"memfs: no memory at /notes/note.md in store {store_id}\n"

    log = [line.split("\t") for line in store_cmd.ok("log", store_id).splitlines()]
    assert [(op, path) for _, op, path, _ in log] == [
        ("deleted", "/notes/note.md"),
        ("modified", "/top.md"),
        ("created", "/top.md"),
        ("created", "/notes/piped.md"),
        ("created", "/notes/note.md"),
    ]
    assert [len(sha) for *_, sha in log] == [1, 12, 12, 12, 12]  # a delete has no content: "-"
    one = store_cmd.ok("log", store_id, "/notes/note.md").splitlines()
    assert [line.split("\t")[1] for line in one] == ["deleted", "created"]

    as_json = json.loads(store_cmd.ok("ls", store_id, "--json"))
    assert [m["path"] for m in as_json] == ["/notes/piped.md", "/top.md"]


def test_token_from_a_file(store_cmd: StoreCommand, shared_memfs_server, tmp_path: Path):
    token_file = tmp_path / "token"
    token_file.write_text(shared_memfs_server.token + "\n")
    result = store_cmd("--token-file", str(token_file), "list", env={"MEMFS_TOKEN": ""})
    assert result.returncode == 0, result.stderr


def test_error_sentences_and_exit_statuses(store_cmd: StoreCommand, tmp_path: Path):
    no_token = store_cmd("list", env={"MEMFS_TOKEN": ""})
    assert (no_token.returncode, no_token.stderr) == (
        2,
        "memfs: no token: pass --token-file FILE or set MEMFS_TOKEN\n",
    )
    missing_file = store_cmd("--token-file", str(tmp_path / "absent"), "list")
    assert missing_file.returncode == 2
    assert missing_file.stderr.startswith("memfs: cannot read the token file")

    wrong = store_cmd("list", env={"MEMFS_TOKEN": "not-the-token"})
    assert (wrong.returncode, wrong.stderr) == (
        1,
        f"memfs: the store at {store_cmd.url} refused the token (401)\n",
    )
    assert "not-the-token" not in wrong.stderr + wrong.stdout

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    down = f"http://127.0.0.1:{closed_port}"
    unreachable = store_cmd("list", "--api-url", down)
    assert unreachable.returncode == 1
    assert unreachable.stderr.startswith(f"memfs: cannot reach {down}: connection refused")

    store_id = store_cmd.ok("create", "errors").strip()
    binary = tmp_path / "binary"
    binary.write_bytes(b"\xff\xfe\x00")
    not_text = store_cmd("put", store_id, "/b", str(binary))
    assert not_text.returncode == 2
    assert "is not UTF-8 text" in not_text.stderr

    bad_path = store_cmd("put", store_id, "relative", stdin=b"x")
    assert bad_path.returncode == 2
    assert bad_path.stderr == "memfs: path must start with '/'\n"

    no_store = store_cmd("ls", "memstore_nope")
    assert no_store.returncode == 1
    assert no_store.stderr.startswith("memfs: not found:")
    assert len(no_store.stderr.splitlines()) == 1
