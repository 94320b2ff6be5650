"""Both ends of the control socket in one process: a real `ControlServer` on
a Unix socket in a temporary runtime folder, asked by the real (blocking)
`ControlClient` from a worker thread, as `memfs status`, `memfs sync` and
`memfs unmount` ask a store process, and by its `stop_async`, as the
supervisor asks its stores for their final syncs."""

from __future__ import annotations

import os
import socket
import stat
from functools import partial
from pathlib import Path

import pytest
import trio

from memfs._exceptions import SyncError
from memfs.control import (
    Command,
    ControlClient,
    ControlServer,
    ErrorReply,
    Reply,
    Request,
    StatusReply,
    StopReply,
    StoreState,
    SyncReply,
    socket_path,
)
from tests.support.control import a_status


class Store:
    """A handler as a store process gives one: `stop` is answered when
    `finish()` says the final sync is done."""

    def __init__(self) -> None:
        self.asked: list[Command] = []
        self.final_sync_done = trio.Event()
        self.stop_asked = trio.Event()

    async def answer(self, request: Request) -> Reply:
        self.asked.append(request.command)
        match request.command:
            case Command.STATUS:
                return StatusReply(a_status())
            case Command.SYNC:
                return SyncReply({"pushed": 1})
            case Command.STOP:
                self.stop_asked.set()
                await self.final_sync_done.wait()
                return StopReply(["/left.md"])


@pytest.fixture
def runtime(tmp_path: Path) -> Path:
    # Unix socket paths are short (108 bytes); pytest's tmp_path can be longer.
    short = Path(f"/tmp/memfs-test-{os.getpid()}-{id(tmp_path)}")
    short.mkdir(mode=0o700)
    yield short
    for child in short.iterdir():
        child.unlink()
    short.rmdir()


def state_for(runtime: Path) -> StoreState:
    return StoreState(
        "memstore_1",
        "/mnt/memory/notes",
        os.getpid(),
        socket_path(str(runtime), "memstore_1", "/var/cache/memfs"),
    )


async def ask(state: StoreState, method: str, **kw):
    return await trio.to_thread.run_sync(partial(getattr(ControlClient(state), method), **kw))


async def test_each_command_gets_its_typed_reply(runtime: Path):
    store, state = Store(), state_for(runtime)
    async with trio.open_nursery() as nursery:
        await nursery.start(ControlServer(state.socket, store.answer).serve)
        assert await ask(state, "status") == StatusReply(a_status())
        assert await ask(state, "sync") == SyncReply({"pushed": 1})
        nursery.cancel_scope.cancel()
    assert store.asked == [Command.STATUS, Command.SYNC]


async def test_the_socket_is_the_users_alone_and_goes_with_the_server(runtime: Path):
    state = state_for(runtime)
    Path(state.socket).write_text("left by a killed process")
    async with trio.open_nursery() as nursery:
        await nursery.start(ControlServer(state.socket, Store().answer).serve)
        mode = os.stat(state.socket).st_mode
        assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
        nursery.cancel_scope.cancel()
    assert not os.path.lexists(state.socket)


async def test_a_stop_is_answered_though_the_server_is_cancelled_at_once(runtime: Path):
    """The store process answers `stop` when its final sync is done and tears
    down at once, the control server first: the answer still arrives whole."""
    store, state = Store(), state_for(runtime)
    async with trio.open_nursery() as outer:
        reply: list = []

        async def unmount() -> None:
            reply.append(await ask(state, "stop"))

        async with trio.open_nursery() as serving:
            await serving.start(ControlServer(state.socket, store.answer).serve)
            outer.start_soon(unmount)
            await store.stop_asked.wait()
            store.final_sync_done.set()
            serving.cancel_scope.cancel()
    assert reply == [StopReply(["/left.md"])]
    assert reply[0].ok is False


async def test_a_process_that_ends_without_answering_is_a_sync_error(runtime: Path):
    store, state = Store(), state_for(runtime)
    async with trio.open_nursery() as outer:
        errors: list[SyncError] = []

        async def unmount() -> None:
            with pytest.raises(SyncError) as caught:
                await ask(state, "stop")
            errors.append(caught.value)

        async with trio.open_nursery() as serving:
            await serving.start(ControlServer(state.socket, store.answer).serve)
            outer.start_soon(unmount)
            await store.stop_asked.wait()
            serving.cancel_scope.cancel()  # torn down before its final sync was done
    assert [str(e) for e in errors] == ["the memfs process of /mnt/memory/notes gave no answer"]


async def test_a_process_that_is_gone_cannot_be_reached(runtime: Path):
    with pytest.raises(SyncError) as caught:
        await ask(state_for(runtime), "status")
    assert str(caught.value).startswith("cannot reach the memfs process of /mnt/memory/notes: ")


def _exchange(path: str, data: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(path)
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
        return answer


async def test_the_server_names_a_command_it_does_not_know_and_drops_garbage(runtime: Path):
    store, state = Store(), state_for(runtime)
    async with trio.open_nursery() as nursery:
        await nursery.start(ControlServer(state.socket, store.answer).serve)
        exchange = partial(trio.to_thread.run_sync, _exchange, state.socket)
        assert await exchange(b'{"cmd": "reboot"}\n') == (
            b'{"ok": false, "error": "unknown command \'reboot\'"}\n'
        )
        assert await exchange(b"") == b'{"ok": false, "error": "unknown command None"}\n'
        assert await exchange(b"not json\n") == b""
        assert await exchange(b'{"cmd": "sync"}\n') == b'{"ok": true, "report": {"pushed": 1}}\n'
        nursery.cancel_scope.cancel()
    assert store.asked == [Command.SYNC]


async def test_an_error_reply_reaches_the_client_as_one(runtime: Path):
    state = state_for(runtime)

    async def failing(request: Request) -> Reply:
        return ErrorReply("cannot reach http://127.0.0.1:9: connection refused")

    async with trio.open_nursery() as nursery:
        await nursery.start(ControlServer(state.socket, failing).serve)
        assert await ask(state, "sync") == ErrorReply(
            "cannot reach http://127.0.0.1:9: connection refused"
        )
        nursery.cancel_scope.cancel()


async def test_the_supervisors_stop_in_trio_gets_the_final_syncs_answer(runtime: Path):
    """`stop_async`: the supervisor asks all its stores for their final
    syncs at once, from one trio program."""
    store, state = Store(), state_for(runtime)
    async with trio.open_nursery() as nursery:
        await nursery.start(ControlServer(state.socket, store.answer).serve)
        store.final_sync_done.set()
        assert await ControlClient(state).stop_async(timeout=5) == StopReply(["/left.md"])
        nursery.cancel_scope.cancel()
    assert store.asked == [Command.STOP]


async def test_the_supervisors_stop_in_trio_fails_as_the_blocking_one_does(runtime: Path):
    """Gone, not answering in time, or ending without an answer: the same
    SyncError as `memfs unmount` gets."""
    state = state_for(runtime)
    with pytest.raises(SyncError) as caught:
        await ControlClient(state).stop_async(timeout=5)
    assert str(caught.value).startswith("cannot reach the memfs process of /mnt/memory/notes: ")

    store = Store()
    async with trio.open_nursery() as nursery:
        await nursery.start(ControlServer(state.socket, store.answer).serve)
        errors = []
        for stop in (ControlClient(state).stop_async, partial(ask, state, "stop")):
            with pytest.raises(SyncError) as caught:
                await stop(timeout=0.5)
            errors.append(str(caught.value))
        assert errors == ["cannot reach the memfs process of /mnt/memory/notes: timed out"] * 2
        nursery.cancel_scope.cancel()

    store = Store()
    async with trio.open_nursery() as outer:

        async def unmount() -> None:
            with pytest.raises(SyncError) as caught:
                await ControlClient(state).stop_async(timeout=5)
            errors.append(str(caught.value))

        async with trio.open_nursery() as serving:
            await serving.start(ControlServer(state.socket, store.answer).serve)
            outer.start_soon(unmount)
            await store.stop_asked.wait()
            serving.cancel_scope.cancel()  # torn down before its final sync was done
    assert errors[-1] == "the memfs process of /mnt/memory/notes gave no answer"
