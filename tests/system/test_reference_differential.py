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
docs/reference.md tables them all; the scenarios the reference's 2.17 added are in
test_reference_differential_saves.py, on the same two sides (tests/support/twins.py).
"""

from __future__ import annotations

import errno
import logging
import os
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support import ServerProcess
from tests.support.twins import Twins, both_sides, delete_remote, files_in, put_remote


@pytest.fixture
async def twins(shared_memfs_server: ServerProcess, tmp_path: Path, caplog) -> AsyncIterator[Twins]:
    async with both_sides(shared_memfs_server, tmp_path, caplog) as pair:
        yield pair


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
