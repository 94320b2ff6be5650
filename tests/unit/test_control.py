"""The control protocol and the state files as bytes: what travels on a
store process's control socket and what lies in the runtime folder are
promised shapes (`memfs status --json` and `memfs sync --json` print them),
so they are checked byte for byte here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import fields

import pytest

from memfs.api import Confirmation
from memfs.control import (
    Command,
    ErrorReply,
    PushFilesReply,
    Request,
    StateFile,
    StatusReply,
    StopReply,
    StoreState,
    StoreStatus,
    SyncReply,
    read_state,
    running_stores,
    socket_path,
    state_path,
)
from memfs.control._protocol import UnknownCommand, decode_reply, encode_reply
from memfs.control._runtime import runtime_name
from tests.support.control import a_status

STATUS_FIELDS = [
    "store_id",
    "name",
    "mount_path",
    "read_only",
    "pid",
    "files",
    "cached",
    "prefetched",
    "pending",
    "refused",
    "sync_mode",
    "store_full",
    "sync_mode_reason",
    "passes",
    "last_pass",
    "last_error",
    "requests",
    "fuse_requests",
    # Added with issue 9 (fields are only ever added, at the end):
    "access",
    "memories",
    "cached_bytes",
    "dirty",
    "pending_deletes",
    "conflict_copies",
    "next_pass_at",
    "bytes_up",
    "bytes_down",
    "not_shown",
    "cache_damage",
    "lost_changes",
    "cache_disk_full",
]


@pytest.mark.parametrize("command", [c for c in Command if c is not Command.PUSH_FILES])
def test_a_request_is_one_line_naming_its_command(command):
    assert Request(command).encode() == b'{"cmd": "' + command.value.encode() + b'"}\n'
    assert Request.decode(Request(command).encode()) == Request(command)


def test_a_request_may_name_who_asks_and_a_name_unfit_for_a_log_is_dropped():
    asked = Request(Command.STOP, by="memfs unmount")
    assert asked.encode() == b'{"cmd": "stop", "by": "memfs unmount"}\n'
    assert Request.decode(asked.encode()) == asked
    for by in ("two\nlines", "x" * 101, 7):
        data = json.dumps({"cmd": "stop", "by": by}).encode()
        assert Request.decode(data) == Request(Command.STOP)


def test_the_commands_are_status_sync_stop_metrics_push_files_and_push_now():
    assert [c.value for c in Command] == [
        "status",
        "sync",
        "stop",
        "metrics",
        "push_files",
        "push_now",
    ]


def test_push_files_names_its_memory_paths_and_its_timeout():
    asked = Request(Command.PUSH_FILES, paths=("/a.md", "/d/b.md"), timeout=30.0)
    assert asked.encode() == (
        b'{"cmd": "push_files", "paths": ["/a.md", "/d/b.md"], "timeout": 30.0}\n'
    )
    assert Request.decode(asked.encode()) == asked
    for bad in (
        {"cmd": "push_files", "timeout": 30},
        {"cmd": "push_files", "paths": ["a.md"], "timeout": 30},
        {"cmd": "push_files", "paths": "/a.md", "timeout": 30},
        {"cmd": "push_files", "paths": ["/a.md"], "timeout": 0},
        {"cmd": "push_files", "paths": ["/a.md"], "timeout": True},
    ):
        with pytest.raises(ValueError):
            Request.decode(json.dumps(bad).encode())


def test_a_push_files_reply_keeps_each_file_s_confirmation():
    files = [
        Confirmation("/a.md", "saved", "mem_1", "ab" * 32),
        Confirmation("/b.md", "overruled", "mem_2", "cd" * 32, kept_copy="/c/b.md"),
    ]
    data = encode_reply(PushFilesReply(files))
    assert json.loads(data)["files"][1] == {
        "path": "/b.md",
        "outcome": "overruled",
        "memory_id": "mem_2",
        "sha256": "cd" * 32,
        "reason": None,
        "kept_copy": "/c/b.md",
    }
    assert decode_reply(data, PushFilesReply) == PushFilesReply(files)


@pytest.mark.parametrize(
    ("data", "sentence"),
    [
        (b'{"cmd": "nope"}\n', "unknown command 'nope'"),
        (b'{"cmd": 3}\n', "unknown command 3"),
        (b"{}\n", "unknown command None"),
        (b"", "unknown command None"),
    ],
)
def test_an_unknown_command_is_named_in_its_answer(data, sentence):
    with pytest.raises(UnknownCommand) as caught:
        Request.decode(data)
    assert str(caught.value) == sentence


@pytest.mark.parametrize("data", [b"not json\n", b'["status"]\n', b'"status"\n'])
def test_bytes_that_are_no_request_are_refused(data):
    with pytest.raises(ValueError) as caught:
        Request.decode(data)
    assert not isinstance(caught.value, UnknownCommand)


def test_replies_on_the_wire():
    status = a_status()
    assert json.loads(encode_reply(StatusReply(status))) == {
        "ok": True,
        "status": status.to_json(),
    }
    assert encode_reply(SyncReply({"pushed": 2})) == b'{"ok": true, "report": {"pushed": 2}}\n'
    assert encode_reply(StopReply([])) == b'{"ok": true, "not_uploaded": []}\n'
    assert encode_reply(StopReply(["/a.md"])) == b'{"ok": false, "not_uploaded": ["/a.md"]}\n'
    assert encode_reply(ErrorReply("the store is down")) == (
        b'{"ok": false, "error": "the store is down"}\n'
    )


def test_the_status_prints_its_fields_in_their_order():
    assert [f.name for f in fields(StoreStatus)] == STATUS_FIELDS
    assert list(a_status().to_json()) == STATUS_FIELDS


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (StatusReply(a_status()), StatusReply),
        (SyncReply({"pushed": 1, "error": None}), SyncReply),
        (StopReply(["/a.md"]), StopReply),
        (StopReply([]), StopReply),
        (StopReply([], "the token may not use store memstore_1 (403)"), StopReply),
    ],
)
def test_a_reply_reads_back_as_itself(reply, kind):
    assert decode_reply(encode_reply(reply), kind) == reply


@pytest.mark.parametrize("kind", [StatusReply, SyncReply, StopReply])
def test_an_error_reads_back_as_an_error_whatever_was_asked(kind):
    assert decode_reply(b'{"ok": false, "error": "no"}\n', kind) == ErrorReply("no")


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (b"", StopReply),
        (b'{"ok": true}\n', StopReply),
        (b'{"ok": true, "report": {}}\n', StatusReply),
        (b'{"ok": true, "status": {"store_id": "x"}}\n', StatusReply),
        (b"[1]\n", SyncReply),
    ],
)
def test_what_is_no_reply_is_refused(data, kind):
    with pytest.raises(ValueError):
        decode_reply(data, kind)


def a_state(tmp_path, **changes) -> StoreState:
    values = dict(
        store_id="memstore_1",
        mount_path="/mnt/memory/notes",
        pid=os.getpid(),
        socket=socket_path(str(tmp_path), "memstore_1", "/var/cache/memfs"),
    )
    values.update(changes)
    return StoreState(**values)


def test_the_state_file_on_disk(tmp_path):
    state = a_state(tmp_path)
    file = StateFile(state_path(str(tmp_path), "memstore_1", "/var/cache/memfs"))
    name = runtime_name("memstore_1", "/var/cache/memfs")
    assert file.path == str(tmp_path / f"{name}.json")
    file.write(state.to_json())
    assert (tmp_path / f"{name}.json").read_text() == (
        f'{{"store_id": "memstore_1", "mount_path": "/mnt/memory/notes", "pid": {os.getpid()}, '
        f'"socket": "{tmp_path}/{name}.sock", "stopping": false}}'
    )
    assert os.listdir(tmp_path) == [f"{name}.json"]
    assert read_state(file.path) == state
    file.write(a_state(tmp_path, stopping=True).to_json())
    assert read_state(file.path).stopping is True
    file.remove()
    file.remove()
    assert os.listdir(tmp_path) == []


def test_the_runtime_name_is_one_per_store_and_cache_folder(tmp_path):
    (tmp_path / "cache").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "cache")
    name = runtime_name("memstore_1", str(tmp_path / "cache"))
    assert name.startswith("memstore_1-")
    assert runtime_name("memstore_1", str(tmp_path / "link")) == name
    assert runtime_name("memstore_1", str(tmp_path / "cache") + "/") == name
    assert runtime_name("memstore_1", str(tmp_path / "other")) != name
    assert runtime_name("memstore_2", str(tmp_path / "cache")) != name


def test_a_state_file_counts_only_while_its_process_lives(tmp_path):
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True
    )
    dead_pid = int(gone.stdout)
    StateFile(state_path(str(tmp_path), "memstore_live", "/c")).write(
        a_state(tmp_path, store_id="memstore_live").to_json()
    )
    StateFile(state_path(str(tmp_path), "memstore_dead", "/c")).write(
        a_state(tmp_path, store_id="memstore_dead", pid=dead_pid).to_json()
    )
    (tmp_path / "memstore_list.json").write_text("[1, 2]")
    (tmp_path / "memstore_half.json").write_text('{"store_id": "x"')
    (tmp_path / "memstore_live.sock").write_text("")
    assert read_state(state_path(str(tmp_path), "memstore_dead", "/c")) is None
    assert read_state(str(tmp_path / "memstore_list.json")) is None
    assert read_state(str(tmp_path / "missing.json")) is None
    assert [s.store_id for s in running_stores(str(tmp_path))] == ["memstore_live"]
    assert running_stores(str(tmp_path / "no such folder")) == []


def test_a_state_file_of_an_older_memfs_without_stopping_reads(tmp_path):
    path = tmp_path / "memstore_1.json"
    path.write_text(
        json.dumps({"store_id": "s", "mount_path": "/m", "pid": os.getpid(), "socket": "/x"})
    )
    assert read_state(str(path)) == StoreState("s", "/m", os.getpid(), "/x", stopping=False)


def test_a_state_file_counts_no_more_once_its_process_ended_unreaped(tmp_path):
    """A store process that has exited but is not yet reaped (a zombie) runs
    no more: `memfs status` does not list it."""
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    os.waitid(os.P_PID, ended.pid, os.WEXITED | os.WNOWAIT)
    path = tmp_path / "memstore_ended.json"
    path.write_text(a_state(tmp_path, store_id="memstore_ended", pid=ended.pid).to_json())
    try:
        assert read_state(str(path)) is None
        assert running_stores(str(tmp_path)) == []
    finally:
        ended.wait()
