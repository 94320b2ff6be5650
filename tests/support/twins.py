"""The two sides of the differential tests (tests/system/test_reference_differential*.py):
one scenario played on the SDK's own memory sync, `SessionMemoryStores` of the
Python SDK (`anthropic.lib.tools._memories`) on a plain folder, driven as the
SDK's `EnvironmentWorker` drives it, and on memfs on a real mount; each side's
store, versions and folder read back for the tests to compare. docs/reference.md
says what is compared and tables every scenario."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import anthropic
import anyio
from anthropic.lib.tools._memories import (
    MARKER_PATH,
    MEMORY_FLUSH_TIMEOUT,
    MemoryWriteError,
    SessionMemoryStores,
)

from memfs.api import SESSIONS_BETA, encode_work_item_secret
from tests.support import ServerProcess, conflict_files
from tests.support.mounts import Mounter
from tests.system.test_sync import memory_id, put_remote, remote_files

__all__ = [
    "MARKER_PATH",
    "PASSES_ASKED_FOR",
    "REFERENCE_LOG",
    "SYNC_INTERVAL",
    "Saved",
    "State",
    "Twins",
    "both_sides",
    "delete_remote",
    "files_in",
    "memory_id",
    "put_remote",
    "remote_files",
    "versions",
]

REFERENCE_LOG = "anthropic.lib.tools.agent_toolset"
SYNC_INTERVAL = 5.0
"""The reference's interval (its floor); memfs's periodic passes are pushed out of
the test's way (`PASSES_ASKED_FOR`): every pass is one the test asks for."""
PASSES_ASKED_FOR = ("--sync-interval", "3600", "--write-behind", "no")
SESSION_CHECK = "0.5"
"""Seconds between two reads of the session memfs follows (`start(follow=True)`);
`Twins.idle` waits for the push at most 15 s: about 30 of them."""


def delete_remote(server: ServerProcess, store_id: str, path: str) -> None:
    """Another session deletes the memory at `path`."""
    mid = memory_id(server, store_id, path)
    r = server.http().delete(f"/v1/memory_stores/{store_id}/memories/{mid}")
    assert r.status_code == 200, r.text


def versions(server: ServerProcess, store_id: str) -> Counter[tuple[str, str]]:
    """Every version the store recorded, as (operation, path), in any order."""
    out: Counter[tuple[str, str]] = Counter()
    page = None
    with server.http() as http:
        while True:
            params = {"limit": 100, **({"page": page} if page else {})}
            body = http.get(f"/v1/memory_stores/{store_id}/memory_versions", params=params).json()
            out.update((v["operation"], v["path"]) for v in body["data"])
            page = body.get("next_page")
            if not page:
                return out


def files_in(folder: Path) -> dict[str, str]:
    """Every file under `folder` but the marker, relative path -> text. Folders
    left empty are not counted: a store holds no folders."""
    out = {}
    for dirpath, _dirs, names in os.walk(folder):
        for name in names:
            rel = (Path(dirpath) / name).relative_to(folder).as_posix()
            if rel != MARKER_PATH:
                out[rel] = (Path(dirpath) / name).read_text()
    return out


def errno_of(action: Callable[[Path], object], folder: Path) -> int | None:
    try:
        action(folder)
    except OSError as e:
        return e.errno
    return None


@dataclass
class Saved:
    """One agent's write of a memory file, on each side."""

    reference: str | None
    """The reference's `write_file`: None when it saved, else its `MemoryWriteError`
    (the tool call's error, `NOT_SAVED: ...` or `NOT_CONFIRMED: ...`)."""
    memfs_errno: int | None
    """The write on the mount: the errno it raised (None: none)."""
    memfs: dict
    """`memfs sync --json FILE`'s object for the file (`outcome`, `memory_id`...)."""
    memfs_status: int
    """Its exit status."""


@dataclass
class State:
    store: dict[str, str]
    versions: Counter[tuple[str, str]]
    folder: dict[str, str] | None
    """None once the session ended (memfs's mount is gone)."""


class Twins:
    """One scenario on both sides: `reference` (store `ref_store`, folder
    `ref_folder`) and memfs (store `mfs_store`, mount `mnt`)."""

    def __init__(self, server: ServerProcess, mounter: Mounter, tmp: Path, caplog) -> None:
        self.server = server
        self.mounter = mounter
        self.tmp = tmp
        self.caplog = caplog
        caplog.set_level(logging.INFO, logger=REFERENCE_LOG)
        self.client: anthropic.AsyncAnthropic | None = None
        self.reference: SessionMemoryStores | None = None
        self.ref_folder = tmp / "reference" / "s"
        self.session: dict = {}
        self.mfs_session: dict = {}
        self.api_url = server.url
        self.ended = False

    # -- the start of a session

    async def start(
        self,
        seed: dict[str, str],
        *,
        read_only: bool = False,
        deletions: str = "enabled",
        follow: bool = False,
        api_url: str | None = None,
    ) -> None:
        """Two stores holding `seed`; the reference downloads one for a session
        of its own, memfs mounts the other, each as `read_only` says, with
        `--sync-deletions deletions` (the reference's `sync_deletions`).
        `follow`: memfs mounts a session of its own holding its store, from
        the work item a worker's poll hands out, and follows it while it runs
        (`--work-item`), as on a worker host; else it mounts the store (`--store`).
        `api_url`: both sides reach the server there (a fault proxy in front of it)."""
        server = self.server
        self.api_url = api_url or server.url
        self.ref_store = server.create_store("reference")["id"]
        self.mfs_store = server.create_store("memfs")["id"]
        for store_id in (self.ref_store, self.mfs_store):
            for path, text in seed.items():
                put_remote(server, store_id, path, text)
        self.session = self._new_session(self.ref_store, self.ref_folder, read_only)
        self.deletions = deletions
        await self._download()
        if not follow:
            self.mnt = self.mounter.mount_one(
                self.mfs_store,
                read_only=read_only,
                extra=(*PASSES_ASKED_FOR, "--sync-deletions", deletions, "--api-url", self.api_url),
            )
            return
        self.mnt = self.mounter.root / "s"
        self.mfs_session = self._new_session(self.mfs_store, self.mnt, read_only)
        env = {**self.mounter.env, "MEMFS_SESSION_CHECK_INTERVAL": SESSION_CHECK}
        del env["MEMFS_API_URL"]  # the work item's secret names the server
        args = ["mount", "--daemon", "--work-item", "-", "--cache-dir", str(self.mounter.cache_dir)]
        args += ["--final-sync-timeout", "20", *PASSES_ASKED_FOR, "--sync-deletions", deletions]
        r = subprocess.run(
            [sys.executable, "-m", "memfs", *args],
            input=json.dumps(self._work_item(self.mfs_session)),
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr

    def _work_item(self, session: dict) -> dict:
        """The work item a worker's poll hands out for `session`, its secret
        naming `api_url`."""
        secret = encode_work_item_secret(session["sessions_token"], self.api_url)
        return {**self.server.work_item(session), "secret": secret}

    def _new_session(self, store_id: str, mount_path: Path, read_only: bool) -> dict:
        resource = {
            "type": "memory_store",
            "memory_store_id": store_id,
            "access": "read_only" if read_only else "read_write",
            "mount_path": str(mount_path),
        }
        with self.server.http() as http:
            r = http.post(
                "/v1/sessions",
                json={"resources": [resource]},
                headers={"anthropic-beta": SESSIONS_BETA},
            )
        assert r.status_code == 200, r.text
        session: dict = r.json()
        return session

    async def _download(self) -> None:
        """What the SDK's worker does with a work item: a client on the
        session's token, the session fetched, its stores downloaded."""
        self.client = anthropic.AsyncAnthropic(
            base_url=self.api_url,
            auth_token=self.session["sessions_token"],
            max_retries=0,
        )
        self.reference = SessionMemoryStores(
            self.client,
            workdir=self.tmp / "work",
            sync_interval=SYNC_INTERVAL,
            sync_deletions=self.deletions,  # type: ignore[arg-type]
        )
        session = await self.client.beta.sessions.retrieve(self.session["id"])
        await self.reference.download(session)

    async def next_session(self) -> None:
        """The store's next session: the reference's folder is disposed of and
        downloaded again, memfs mounts again with the same cache."""
        assert self.ended
        await self.close_reference()
        await self._download()
        self.mnt = self.mounter.mount_one(
            self.mfs_store,
            extra=(*PASSES_ASKED_FOR, "--sync-deletions", self.deletions),
        )
        self.ended = False

    # -- what happens during a session

    def local(self, action: Callable[[Path], object]) -> tuple[int | None, int | None]:
        """`action(folder)` on the reference's folder, then on the mount: the
        errno each raised (None: none)."""
        return errno_of(action, self.ref_folder), errno_of(action, self.mnt)

    def remote(self, action: Callable[[ServerProcess, str], object]) -> None:
        """`action(server, store_id)` on each store: another session's change."""
        action(self.server, self.ref_store)
        action(self.server, self.mfs_store)

    async def save(self, rel: str, text: str, *sync_args: str) -> Saved:
        """The agent's `write` of `text` to the memory file `rel`: through the
        reference's `write_file` (what the SDK's file tools call for a file in a
        memory store's folder, the store first), and on the mount, then
        `memfs sync --json FILE` (what docs/worker.md's recipes call)."""
        assert self.reference is not None
        refused = None
        try:
            saved = await self.reference.write_file(
                self.ref_folder / rel, text, None, lock=anyio.Lock()
            )
            assert saved, "write_file found no store folder holding the file"
        except MemoryWriteError as e:
            refused = str(e)
        write_errno = errno_of(lambda d: (d / rel).write_text(text), self.mnt)
        r = self.mounter.memfs("sync", "--json", *sync_args, str(self.mnt / rel))
        assert r.stderr == "", r.stderr
        (answer,) = json.loads(r.stdout)
        return Saved(refused, write_errno, answer, r.returncode)

    def set_status(self, status: str) -> None:
        """Both sessions go to `status`, as the hosted API moves them while the
        agent works. Returns once memfs's follower has read its session since."""
        now = time.time()
        for session in (self.session, self.mfs_session):
            self.server.set_session_status(session["id"], status)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            records = json.loads(self.mounter.memfs("status", "--json", check=True).stdout)
            (record,) = [r for r in records if r.get("session_id") == self.mfs_session["id"]]
            if (record["checked_at"] or 0) > now:
                return
            time.sleep(0.1)
        raise AssertionError(f"memfs's follower did not read session {self.mfs_session['id']}")

    async def idle(self) -> None:
        """Both sessions go from `running` to `idle`: the SDK's worker flushes
        (`flush_writes`, bounded at `MEMORY_FLUSH_TIMEOUT`, as its `on_idle`
        does); memfs's follower sees it and has the store push at once. Returns
        once memfs's store holds what the reference's does (or 15 s passed, and
        the test's comparison says what differs)."""
        assert self.reference is not None
        for session in (self.session, self.mfs_session):
            self.server.set_session_status(session["id"], "idle")
        with anyio.move_on_after(MEMORY_FLUSH_TIMEOUT):
            await self.reference.flush_writes()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if remote_files(self.server, self.mfs_store) == remote_files(
                self.server, self.ref_store
            ):
                break
            await anyio.sleep(0.1)
        await anyio.sleep(1)  # two more checks: nothing else comes

    async def sync(self) -> None:
        """One pass each: the reference's cadence is due, memfs is asked."""
        assert self.reference is not None
        self.reference._last_sync -= SYNC_INTERVAL
        await self.reference.sync_if_due()
        self.mounter.sync(self.mnt)

    async def finish(self) -> tuple[int, str]:
        """The end of the session: the reference's `finish`, then the flush the
        worker runs after it; `memfs unmount`. Its exit status and stderr."""
        assert self.reference is not None
        await self.reference.finish()
        await self.reference.flush_writes()
        r = self.mounter.unmount(self.mnt, check=False)
        self.ended = True
        return r.returncode, r.stderr

    async def stop(self) -> None:
        """A stop that writers may outlive: the worker's teardown after a session
        that did not end cleanly (`flush_writes` alone: uploads, no deletes, no
        pulls); SIGTERM to memfs's store process."""
        assert self.reference is not None
        await self.reference.flush_writes()
        (pid,) = self.mounter.store_pids()
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while self.mounter.store_pids() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not self.mounter.store_pids()
        self.ended = True

    async def close_reference(self) -> None:
        if self.reference is not None:
            await self.reference.dispose()
            self.reference = None
        if self.client is not None:
            await self.client.close()
            self.client = None

    # -- what each side shows

    def states(self) -> tuple[State, State]:
        def state(store_id: str, folder: Path) -> State:
            return State(
                remote_files(self.server, store_id),
                versions(self.server, store_id),
                None if self.ended else files_in(folder),
            )

        return state(self.ref_store, self.ref_folder), state(self.mfs_store, self.mnt)

    def assert_same(
        self, *, store: dict[str, str], folder: dict[str, str] | None = None
    ) -> tuple[State, State]:
        """Both sides hold `store` and show `folder` (unless the session ended),
        and their stores recorded the same versions."""
        ref, mfs = self.states()
        assert ref.store == store, "the reference's store"
        assert mfs.store == store, "memfs's store"
        assert ref.versions == mfs.versions
        if not self.ended:
            assert ref.folder == folder, "the reference's folder"
            assert mfs.folder == folder, "memfs's mount"
        return ref, mfs

    def reference_log(self, level: int = logging.INFO) -> list[str]:
        return [
            r.getMessage()
            for r in self.caplog.records
            if r.name == REFERENCE_LOG and r.levelno >= level
        ]

    def memfs_log(self) -> str:
        return (self.mounter.cache_dir / self.mfs_store / "memfs.log").read_text()

    def conflict_copies(self) -> dict[str, str]:
        """memfs's conflict copies, path under the conflicts folder -> text."""
        folder = self.mounter.cache_dir / self.mfs_store / "conflicts"
        return {p.relative_to(folder).as_posix(): p.read_text() for p in conflict_files(folder)}


@contextlib.asynccontextmanager
async def both_sides(server: ServerProcess, tmp_path: Path, caplog) -> AsyncIterator[Twins]:
    """The `twins` fixture of each differential test module: everything mounted
    is unmounted and the reference's folder disposed of at the end."""
    mounter = Mounter(server, tmp_path)
    pair = Twins(server, mounter, tmp_path, caplog)
    try:
        yield pair
    finally:
        mounter.cleanup()
        await pair.close_reference()
