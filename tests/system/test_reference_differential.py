"""memfs beside the reference sync, scenario by scenario (issue 20, section 9).

Each scenario of the decision table (decide by bytes, the wipe rule and
`log_only`, the end of a session) runs twice, on two stores of one `memfs
serve` seeded alike: once with the SDK's own sync, `SessionMemoryStores` of
the Python SDK (`anthropic.lib.tools._memories`), on a plain folder, driven
as the SDK's `EnvironmentWorker` drives it (a client holding the session's
sessions token, `download` of the session it fetched, `sync_if_due` once the
interval is over, `finish` and `flush_writes` at the end); once with memfs on
a real mount (`memfs sync` for a pass, `memfs unmount` for the final sync).
The same remote and local actions go to both, and each test asserts the same
state: the store's contents by path and the operations of its versions, and
the folder's files.

The only differences allowed are memfs's documented improvements, each
asserted in the test it shows up in under a `DIFFERENCE` comment that names
the page promising it; any other difference fails the test.
docs/reference.md tables them all.
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import anthropic
import pytest
from anthropic.lib.tools._memories import MARKER_PATH, SessionMemoryStores

from memfs.api import SESSIONS_BETA
from tests.support import ServerProcess, conflict_files
from tests.support.mounts import Mounter
from tests.system.test_sync import memory_id, put_remote, remote_files

REFERENCE_LOG = "anthropic.lib.tools.agent_toolset"
SYNC_INTERVAL = 5.0
"""The reference's interval (its floor); memfs's periodic passes are pushed out of
the test's way (`PASSES_ASKED_FOR`): every pass is one the test asks for."""
PASSES_ASKED_FOR = ("--sync-interval", "3600", "--write-behind", "no")


# ---- the two sides ---------------------------------------------------------------


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
        self.ended = False

    # -- the start of a session

    async def start(
        self, seed: dict[str, str], *, read_only: bool = False, deletions: str = "enabled"
    ) -> None:
        """Two stores holding `seed`; the reference downloads one for a session
        of its own, memfs mounts the other, each as `read_only` says, with
        `--sync-deletions deletions` (the reference's `sync_deletions`)."""
        server = self.server
        self.ref_store = server.create_store("reference")["id"]
        self.mfs_store = server.create_store("memfs")["id"]
        for store_id in (self.ref_store, self.mfs_store):
            for path, text in seed.items():
                put_remote(server, store_id, path, text)
        resource = {
            "type": "memory_store",
            "memory_store_id": self.ref_store,
            "access": "read_only" if read_only else "read_write",
            "mount_path": str(self.ref_folder),
        }
        with server.http() as http:
            r = http.post(
                "/v1/sessions",
                json={"resources": [resource]},
                headers={"anthropic-beta": SESSIONS_BETA},
            )
        assert r.status_code == 200, r.text
        self.session = r.json()
        self.deletions = deletions
        await self._download()
        self.mnt = self.mounter.mount_one(
            self.mfs_store,
            read_only=read_only,
            extra=(*PASSES_ASKED_FOR, "--sync-deletions", deletions),
        )

    async def _download(self) -> None:
        """What the SDK's worker does with a work item: a client on the
        session's token, the session fetched, its stores downloaded."""
        self.client = anthropic.AsyncAnthropic(
            base_url=self.server.url,
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


@pytest.fixture
async def twins(shared_memfs_server: ServerProcess, tmp_path: Path, caplog) -> AsyncIterator[Twins]:
    mounter = Mounter(shared_memfs_server, tmp_path)
    pair = Twins(shared_memfs_server, mounter, tmp_path, caplog)
    try:
        yield pair
    finally:
        mounter.cleanup()
        await pair.close_reference()


def save_as_editors_do(path: Path, text: str) -> None:
    """`sed -i` and many editors: a new file beside it, renamed over it."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.rename(tmp, path)


# ---- section 1: decide by bytes -------------------------------------------------


async def test_a_save_of_the_same_bytes_then_a_remote_delete(twins: Twins):
    """`:w` with no change and `sed -i` that matches nothing: the delete of
    another session is followed, on both sides."""
    await twins.start({"/vim.md": "as it was\n", "/sed.md": "no match\n", "/kept.md": "stays"})

    def same_bytes(d: Path) -> None:
        (d / "vim.md").write_text((d / "vim.md").read_text())
        save_as_editors_do(d / "sed.md", (d / "sed.md").read_text())

    twins.local(same_bytes)
    twins.remote(lambda s, sid: delete_remote(s, sid, "/vim.md"))
    twins.remote(lambda s, sid: delete_remote(s, sid, "/sed.md"))
    await twins.sync()
    twins.assert_same(store={"/kept.md": "stays"}, folder={"kept.md": "stays"})
    await twins.finish()
    twins.assert_same(store={"/kept.md": "stays"})
    assert not [line for line in twins.reference_log() if "re-creating" in line]
    assert "created again" not in twins.memfs_log()


async def test_a_local_file_already_holding_the_store_s_new_bytes_is_agreed(twins: Twins):
    """An edited file and a new one, each holding exactly what another session
    wrote: adopted silently, nothing uploaded (no version of ours)."""
    await twins.start({"/c.md": "v1"})
    twins.remote(lambda s, sid: put_remote(s, sid, "/c.md", "v2"))
    twins.remote(lambda s, sid: put_remote(s, sid, "/n.md", "the same words"))

    def same_as_theirs(d: Path) -> None:
        (d / "c.md").write_text("v2")
        (d / "n.md").write_text("the same words")

    twins.local(same_as_theirs)
    await twins.sync()
    ref, _ = twins.assert_same(
        store={"/c.md": "v2", "/n.md": "the same words"},
        folder={"c.md": "v2", "n.md": "the same words"},
    )
    assert ref.versions == Counter(
        {("created", "/c.md"): 1, ("modified", "/c.md"): 1, ("created", "/n.md"): 1}
    )
    assert twins.conflict_copies() == {}
    assert twins.reference_log(logging.WARNING) == []
    assert "WARNING" not in twins.memfs_log()
    await twins.finish()
    twins.assert_same(store={"/c.md": "v2", "/n.md": "the same words"})


async def test_an_edit_undone_before_the_pass_takes_the_store_s_change(twins: Twins):
    await twins.start({"/d.md": "v1"})

    def edit_and_undo(d: Path) -> None:
        (d / "d.md").write_text("an edit, then undone")
        (d / "d.md").write_text("v1")

    twins.local(edit_and_undo)
    twins.remote(lambda s, sid: put_remote(s, sid, "/d.md", "theirs"))
    await twins.sync()
    twins.assert_same(store={"/d.md": "theirs"}, folder={"d.md": "theirs"})
    assert twins.conflict_copies() == {}
    await twins.finish()
    twins.assert_same(store={"/d.md": "theirs"})


async def test_both_sides_changed_the_store_wins(twins: Twins):
    await twins.start({"/e.md": "v1"})
    twins.local(lambda d: (d / "e.md").write_text("mine"))
    twins.remote(lambda s, sid: put_remote(s, sid, "/e.md", "theirs"))
    await twins.sync()
    twins.assert_same(store={"/e.md": "theirs"}, folder={"e.md": "theirs"})
    # DIFFERENCE (docs/semantics.md, "Both changed a file between passes"): memfs
    # keeps the local version as a conflict copy outside the mount; the reference
    # warns and the local version is gone.
    assert [line for line in twins.reference_log(logging.WARNING) if "e.md" in line] == [
        "memory changed both locally and remotely; keeping the remote version path=e.md "
        f"memory_store_id={twins.ref_store}"
    ]
    (copy,) = twins.conflict_copies().items()
    assert copy[0].endswith("/e.md") and copy[1] == "mine"
    await twins.finish()
    twins.assert_same(store={"/e.md": "theirs"})


async def test_a_local_edit_against_a_remote_delete_re_creates_the_memory(twins: Twins):
    await twins.start({"/f.md": "v1", "/kept.md": "k"})
    twins.local(lambda d: (d / "f.md").write_text("mine"))
    twins.remote(lambda s, sid: delete_remote(s, sid, "/f.md"))
    await twins.sync()
    ref, _ = twins.assert_same(
        store={"/f.md": "mine", "/kept.md": "k"}, folder={"f.md": "mine", "kept.md": "k"}
    )
    assert ref.versions[("created", "/f.md")] == 2
    await twins.finish()
    twins.assert_same(store={"/f.md": "mine", "/kept.md": "k"})


# ---- section 2: deletes, the wipe rule, log_only -------------------------------


async def test_a_local_delete_waits_for_the_window_and_the_final_sync_waives_it(
    twins: Twins,
):
    await twins.start({"/g.md": "g", "/h.md": "h"})
    twins.local(lambda d: (d / "g.md").unlink())
    for _ in range(2):  # the first pass that sees it missing, and one less than 30 s later
        await twins.sync()
        twins.assert_same(store={"/g.md": "g", "/h.md": "h"}, folder={"h.md": "h"})
    await twins.finish()
    twins.assert_same(store={"/h.md": "h"})


async def test_deleting_a_and_b_while_writing_a_summary_is_not_a_wipe(twins: Twins):
    await twins.start({"/a.md": "a", "/b.md": "b"})

    def sum_up(d: Path) -> None:
        (d / "a.md").unlink()
        (d / "b.md").unlink()
        (d / "summary.md").write_text("a and b, summed up")

    twins.local(sum_up)
    await twins.sync()
    twins.assert_same(
        store={"/a.md": "a", "/b.md": "b", "/summary.md": "a and b, summed up"},
        folder={"summary.md": "a and b, summed up"},
    )
    await twins.finish()
    twins.assert_same(store={"/summary.md": "a and b, summed up"})
    assert not [line for line in twins.reference_log() if "gone at once" in line]
    assert "looks like a wipe" not in twins.memfs_log()


WIPED = {"/a.md": "a", "/b.md": "b", "/n/c.md": "c"}


def delete_every_file(d: Path) -> None:
    for rel in files_in(d):
        (d / rel).unlink()


async def test_deleting_every_file_is_a_wipe_and_the_files_come_back(twins: Twins):
    await twins.start(WIPED)
    twins.local(delete_every_file)
    await twins.sync()
    twins.assert_same(store=WIPED, folder={k.lstrip("/"): v for k, v in WIPED.items()})
    assert [line for line in twins.reference_log() if "every memory file is gone" in line]
    assert "looks like a wipe" in twins.memfs_log()
    await twins.finish()
    twins.assert_same(store=WIPED)


async def test_log_only_is_a_dry_run_with_the_window_and_the_wipe_rule(twins: Twins):
    await twins.start(WIPED, deletions="log_only")
    twins.local(lambda d: (d / "a.md").unlink())
    await twins.sync()
    twins.assert_same(store=WIPED, folder={"b.md": "b", "n/c.md": "c"})
    twins.local(delete_every_file)  # what is left: now no file at all, a wipe
    await twins.sync()
    twins.assert_same(store=WIPED, folder={k.lstrip("/"): v for k, v in WIPED.items()})
    twins.local(lambda d: (d / "b.md").unlink())
    await twins.finish()  # the window waived: the dry run says it would delete b
    twins.assert_same(store=WIPED)
    assert [ln for ln in twins.reference_log() if "log-only: sync would delete" in ln] == [
        f"log-only: sync would delete this memory on the server path=b.md "
        f"memory_store_id={twins.ref_store}"
    ]
    assert twins.memfs_log().count("memfs would delete it now (deletions: log_only)") == 1
    assert "/b.md was deleted here; not deleted in the store" in twins.memfs_log()


# ---- section 3: the end of a session --------------------------------------------


def forty() -> dict[str, str]:
    return {f"/n/{i:02}.md": f"note {i}" for i in range(40)}


async def test_the_final_sync_sends_one_pass_s_cap_of_deletes(twins: Twins):
    """40 memories, 30 deleted just before the end: max(8, min(50, 40/4)) = 10
    deletes go out, the first ten by path on both sides."""
    await twins.start(forty())
    twins.local(lambda d: [(d / "n" / f"{i:02}.md").unlink() for i in range(30)])
    status, stderr = await twins.finish()
    left = {f"/n/{i:02}.md": f"note {i}" for i in range(10, 40)}
    twins.assert_same(store=left)
    assert [ln for ln in twins.reference_log(logging.WARNING) if "delete cap" in ln] == [
        f"delete cap reached: sent 10 deletes, held 20 for later syncs "
        f"memory_store_id={twins.ref_store}"
    ]
    # DIFFERENCE (docs/semantics.md, "The end of a session"): memfs names each
    # delete it held back (the stop exits 1) and keeps it pending in the cache,
    # and the next mount of the store with that cache sends it, a cap at a time.
    # The reference's held deletes die with its folder: its next session
    # downloads those 20 memories again.
    assert status == 1
    assert stderr.splitlines() == [
        f"memfs: not uploaded from {twins.mnt}: /n/{i:02}.md (deleted)" for i in range(10, 30)
    ]
    await twins.next_session()
    ref, mfs = twins.states()
    assert ref.folder == {k.lstrip("/"): v for k, v in left.items()}
    assert mfs.folder == {f"n/{i:02}.md": f"note {i}" for i in range(30, 40)}
    await twins.finish()
    ref, mfs = twins.states()
    assert ref.store == left  # nothing deleted: the folder was whole
    assert len(mfs.store) == 30 - 8  # n is 30 now: the floor, 8


async def test_a_stop_that_writers_may_outlive_uploads_and_sends_no_fresh_delete(
    twins: Twins,
):
    await twins.start({"/a.md": "v1", "/b.md": "b"})

    def work(d: Path) -> None:
        (d / "a.md").write_text("mine")
        (d / "b.md").unlink()
        (d / "c.md").write_text("new")

    twins.local(work)
    await twins.stop()
    store = {"/a.md": "mine", "/b.md": "b", "/c.md": "new"}
    twins.assert_same(store=store)
    # DIFFERENCE (docs/semantics.md, "The end of a session"): the delete memfs held
    # back stays pending in its cache, and the next mount sends it; the reference
    # forgets it, and its next session downloads b again.
    await twins.next_session()
    ref, mfs = twins.states()
    assert ref.folder == {"a.md": "mine", "b.md": "b", "c.md": "new"}
    assert mfs.folder == {"a.md": "mine", "c.md": "new"}
    await twins.finish()
    ref, mfs = twins.states()
    assert ref.store == store
    assert mfs.store == {"/a.md": "mine", "/c.md": "new"}


async def test_a_read_only_store_pulls_and_never_pushes(twins: Twins):
    await twins.start({"/a.md": "v1", "/b.md": "v1", "/c.md": "v1"}, read_only=True)
    # DIFFERENCE (docs/semantics.md, "What is refused": EROFS): memfs refuses
    # every change to a read-only store; the reference's plain folder takes them,
    # and only its sync declines to push them.
    assert twins.local(lambda d: (d / "a.md").write_text("mine")) == (None, errno.EROFS)
    assert twins.local(lambda d: (d / "b.md").unlink()) == (None, errno.EROFS)
    assert twins.local(lambda d: (d / "new.md").write_text("new")) == (None, errno.EROFS)
    await twins.sync()
    ref, mfs = twins.states()
    assert ref.store == mfs.store == {"/a.md": "v1", "/b.md": "v1", "/c.md": "v1"}
    assert ref.folder == {"a.md": "mine", "c.md": "v1", "new.md": "new"}  # kept, not pushed
    assert mfs.folder == {"a.md": "v1", "b.md": "v1", "c.md": "v1"}
    # Another session's changes reach both; the reference's folder then shows the
    # store's versions too, but for its never-pushed new file.
    twins.remote(lambda s, sid: put_remote(s, sid, "/a.md", "v2"))
    twins.remote(lambda s, sid: put_remote(s, sid, "/b.md", "v2"))
    twins.remote(lambda s, sid: delete_remote(s, sid, "/c.md"))
    await twins.sync()
    store = {"/a.md": "v2", "/b.md": "v2"}
    ref, mfs = twins.states()
    assert ref.store == mfs.store == store and ref.versions == mfs.versions
    assert ref.folder == {"a.md": "v2", "b.md": "v2", "new.md": "new"}
    assert mfs.folder == {"a.md": "v2", "b.md": "v2"}
    await twins.finish()
    twins.assert_same(store=store)


# ---- beyond the sections: the other rows, and what else differs -----------------


async def test_the_plain_rows_push_pull_and_restore(twins: Twins):
    """Changed here: pushed; changed there: pulled; new here: created; deleted
    here but changed there: the store's version comes back."""
    await twins.start({"/p.md": "v1", "/q.md": "v1", "/r.md": "v1"})

    def work(d: Path) -> None:
        (d / "p.md").write_text("mine")
        (d / "new" / "s.md").parent.mkdir()
        (d / "new" / "s.md").write_text("new")
        (d / "r.md").unlink()

    twins.local(work)
    twins.remote(lambda s, sid: put_remote(s, sid, "/q.md", "theirs"))
    twins.remote(lambda s, sid: put_remote(s, sid, "/r.md", "theirs too"))
    await twins.sync()
    store = {"/p.md": "mine", "/q.md": "theirs", "/r.md": "theirs too", "/new/s.md": "new"}
    twins.assert_same(store=store, folder={k.lstrip("/"): v for k, v in store.items()})
    await twins.finish()
    twins.assert_same(store=store)


async def test_a_local_rename_is_a_move(twins: Twins):
    await twins.start({"/old.md": "moving", "/kept.md": "k"})
    twins.local(lambda d: os.rename(d / "old.md", d / "new.md"))
    await twins.sync()
    ref, mfs = twins.states()
    assert ref.folder == mfs.folder == {"new.md": "moving", "kept.md": "k"}
    # DIFFERENCE (docs/semantics.md, "Renames are moves of the same memory"): memfs
    # moves the memory at once, keeping its id and history; the reference creates
    # the new path and deletes the old one as a delete, after the window: until
    # then the store holds both.
    assert ref.store == {"/old.md": "moving", "/new.md": "moving", "/kept.md": "k"}
    assert mfs.store == {"/new.md": "moving", "/kept.md": "k"}
    await twins.finish()
    ref, mfs = twins.states()
    assert ref.store == mfs.store == {"/new.md": "moving", "/kept.md": "k"}
    assert ref.versions - mfs.versions == Counter(
        {("created", "/new.md"): 1, ("deleted", "/old.md"): 1}
    )
    assert mfs.versions - ref.versions == Counter({("modified", "/new.md"): 1})


async def test_a_wipe_while_another_session_adds_a_memory(twins: Twins):
    await twins.start({"/a.md": "a", "/b.md": "b"})
    twins.local(delete_every_file)
    twins.remote(lambda s, sid: put_remote(s, sid, "/c.md", "theirs"))
    await twins.sync()
    everything = {"/a.md": "a", "/b.md": "b", "/c.md": "theirs"}
    twins.assert_same(store=everything, folder={"a.md": "a", "b.md": "b", "c.md": "theirs"})
    await twins.finish()
    twins.assert_same(store=everything)


async def test_the_cap_counts_the_memories_last_synced(twins: Twins):
    """40 memories; 30 deleted and 20 new files written just before the end."""
    await twins.start(forty())

    def replace(d: Path) -> None:
        for i in range(30):
            (d / "n" / f"{i:02}.md").unlink()
        for i in range(20):
            (d / f"new-{i:02}.md").write_text(f"new {i}")

    twins.local(replace)
    await twins.finish()
    new = {f"/new-{i:02}.md": f"new {i}" for i in range(20)}
    twins.assert_same(store={**{f"/n/{i:02}.md": f"note {i}" for i in range(10, 40)}, **new})
