"""`memfs store session ...` as the person who starts a worker's session
types it: a real process against a real `memfs serve`, reading what it
prints (the work item JSON a worker's poll would hand out) and its exit
status, then using the work item's secret as the worker would."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from memfs.api import ANTHROPIC_VERSION, BETA, parse_work_item_secret
from tests.contract.test_contract_cli import StoreCommand
from tests.contract.test_contract_cli import store_cmd as store_cmd  # the fixture
from tests.support import ServerProcess


def work_item_of(stdout: str) -> dict:
    (line,) = stdout.splitlines()
    return json.loads(line)


def agent(server: ServerProcess, work_item: dict) -> httpx.Client:
    """The worker's client: the secret's token as Bearer, at the secret's URL."""
    secret = parse_work_item_secret(work_item["secret"])
    assert secret.api_base_url == server.url
    headers = {
        "authorization": f"Bearer {secret.sessions_token}",
        "anthropic-version": ANTHROPIC_VERSION,
        "anthropic-beta": BETA,
    }
    return httpx.Client(base_url=secret.api_base_url, headers=headers, timeout=10.0)


def test_session_create_prints_a_work_item_whose_secret_reaches_its_stores(
    store_cmd: StoreCommand, shared_memfs_server: ServerProcess
):
    notes = store_cmd.ok("create", "Team Notes").strip()
    docs = store_cmd.ok("create", "Docs").strip()
    other = store_cmd.ok("create", "Not Attached").strip()
    result = store_cmd(
        "-vv",
        "session",
        "create",
        "--store",
        notes,
        "--store",
        f"{docs}:read_only=/mnt/memory/reference",
        "--environment-id",
        "env_cli",
    )
    assert result.returncode == 0, result.stderr
    item = work_item_of(result.stdout)
    assert set(item) == {"id", "environment_id", "data", "secret"}
    assert item["id"].startswith("work_") and item["environment_id"] == "env_cli"
    assert item["data"]["type"] == "session" and item["data"]["id"].startswith("sesn_")
    token = parse_work_item_secret(item["secret"]).sessions_token
    assert token not in result.stderr and item["secret"] not in result.stderr

    with agent(shared_memfs_server, item) as worker:
        r = worker.post(f"/v1/memory_stores/{notes}/memories", json={"path": "/a", "content": "1"})
        assert r.status_code == 200, r.text
        r = worker.post(f"/v1/memory_stores/{docs}/memories", json={"path": "/a", "content": "1"})
        assert r.status_code == 403
        assert worker.get(f"/v1/memory_stores/{other}/memories").status_code == 403
        r = worker.get(
            f"/v1/sessions/{item['data']['id']}/resources",
            headers={"anthropic-beta": "managed-agents-2026-04-01"},
        )
        listed = [(x["memory_store_id"], x["access"], x["mount_path"]) for x in r.json()["data"]]
    assert listed == [
        (notes, "read_write", "/mnt/memory/team-notes"),
        (docs, "read_only", "/mnt/memory/reference"),
    ]


def test_a_session_without_stores_is_a_work_item_too(store_cmd: StoreCommand):
    item = work_item_of(store_cmd.ok("session", "create"))
    shown = store_cmd.ok("session", "show", item["data"]["id"])
    assert shown == ""


def test_session_show_attach_detach_and_delete(
    store_cmd: StoreCommand, shared_memfs_server: ServerProcess
):
    first = store_cmd.ok("create", "First").strip()
    late = store_cmd.ok("create", "Late").strip()
    item = work_item_of(store_cmd.ok("session", "create", "--store", first))
    session_id = item["data"]["id"]
    (line,) = store_cmd.ok("session", "show", session_id).splitlines()
    resource_id, store, access, path = line.split("\t")
    assert resource_id.startswith("sesrsc_")
    assert (store, access, path) == (first, "read_write", "/mnt/memory/first")

    attached = store_cmd.ok("session", "attach", session_id, "--store", f"{late}:read_only")
    assert attached.split("\t")[0] == "attached"
    assert attached.strip().split("\t")[2:] == [late, "read_only", "/mnt/memory/late"]
    shown = json.loads(store_cmd.ok("session", "show", session_id, "--json"))
    assert shown["id"] == session_id
    assert [r["memory_store_id"] for r in shown["resources"]] == [first, late]

    with agent(shared_memfs_server, item) as worker:
        assert worker.get(f"/v1/memory_stores/{late}/memories").status_code == 200
        assert store_cmd.ok("session", "detach", session_id, late) == f"detached\t{late}\n"
        assert worker.get(f"/v1/memory_stores/{late}/memories").status_code == 403
        assert store_cmd.ok("session", "delete", session_id) == f"deleted\t{session_id}\n"
        assert worker.get(f"/v1/memory_stores/{first}/memories").status_code == 401
    gone = store_cmd("session", "show", session_id)
    assert gone.returncode == 1 and gone.stderr.startswith("memfs: not found: no session")


@pytest.mark.parametrize(
    "args, status, words",
    [
        (["session", "create", "--store", ":read_only"], 2, "names no store id"),
        (
            ["session", "create", "--store", "memstore_x:admin"],
            2,
            "must be read_only or read_write",
        ),
        (["session", "create", "--store", "memstore_nothere"], 1, "no memory store"),
        (["session", "attach", "sesn_nothere", "--store", "STORE"], 1, "no session"),
        (["session", "detach", "sesn_nothere", "STORE"], 1, "no session"),
        (["session", "create", *(["--store", "STORE"] * 2)], 1, "attached to this session already"),
        (["session"], 2, "required"),
    ],
)
def test_session_mistakes_are_one_sentence(store_cmd: StoreCommand, args, status, words):
    store = store_cmd.ok("create", "mistakes").strip()
    result = store_cmd(*(store if a == "STORE" else a for a in args))
    assert result.returncode == status, result.stderr
    assert result.stdout == ""
    (sentence,) = result.stderr.splitlines()
    assert sentence.startswith("memfs: ") and words in sentence


def test_a_sessions_token_cannot_start_sessions_from_the_cli(
    store_cmd: StoreCommand, shared_memfs_server: ServerProcess, tmp_path: Path
):
    store = store_cmd.ok("create", "theirs").strip()
    item = work_item_of(store_cmd.ok("session", "create", "--store", store))
    token_file = tmp_path / "sessions-token"
    token_file.write_text(parse_work_item_secret(item["secret"]).sessions_token)
    result = store_cmd("session", "create", "--store", store, "--token-file", str(token_file))
    assert result.returncode == 1
    assert result.stderr.startswith("memfs: the token may not do this (403): a sessions token")


def test_a_work_item_secret_in_the_environment_is_the_store_command_s_credential(
    store_cmd: StoreCommand,
):
    """`memfs store --help` names the work item secret's variables, and a
    worker's secret in MEMFS_WORK_ITEM_SECRET, with no token or URL beside it,
    reaches the session's store."""
    assert "MEMFS_WORK_ITEM_SECRET" in store_cmd.ok("--help").replace("\n", " ")
    notes = store_cmd.ok("create", "Secret Notes").strip()
    store_cmd.ok("put", notes, "/a.md", "-", stdin=b"from the secret\n")
    item = work_item_of(store_cmd.ok("session", "create", "--store", notes))
    env = {k: v for k, v in store_cmd.env.items() if k not in ("MEMFS_TOKEN", "MEMFS_API_URL")}
    worker = StoreCommand(store_cmd.url, {**env, "MEMFS_WORK_ITEM_SECRET": item["secret"]})
    assert worker.ok("cat", notes, "/a.md") == "from the secret\n"
