"""memfs beside the reference sync: what the reference added in `anthropic` 2.17
(issue 30, section 5), where a filesystem has an equal.

The SDK's worker now saves an agent's `write` or `edit` of a memory file in
the store before the file changes (`SessionMemoryStores.write_file`: the tool
call fails with `NOT_SAVED` or `NOT_CONFIRMED` unless the store confirms, and
an identical memory already in the store counts as saved), and uploads when
its session goes idle (`flush_writes`, push-only, bounded at 30 s). memfs's
equals: the write on the mount, then `memfs sync FILE` (docs/guide.md,
"Confirm a save"), which is what docs/worker.md's recipes call; and the push
at once of a followed session seen going from `running` to `idle`. Each
scenario runs on both sides as in test_reference_differential.py (the same
two sides, tests/support/twins.py); each test asserts the same store,
versions and folder, and each side's documented answer where they differ by
design, under a `DIFFERENCE` comment naming the page. docs/reference.md
tables them.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from anthropic.lib.tools._memories import MARKER_PATH, NOT_CONFIRMED, NOT_SAVED

from memfs.api import MAX_CONTENT_BYTES
from tests.support import ServerProcess
from tests.support.faults import FaultProxyProcess
from tests.support.twins import Twins, both_sides, memory_id, put_remote, remote_files


@pytest.fixture
async def twins(shared_memfs_server: ServerProcess, tmp_path: Path, caplog) -> AsyncIterator[Twins]:
    async with both_sides(shared_memfs_server, tmp_path, caplog) as pair:
        yield pair


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# ---- the idle flush ---------------------------------------------------------------


async def test_a_session_going_idle_pushes_its_local_changes_and_nothing_else(twins: Twins):
    """The agent's turn: an edit, a new file, a delete, and an edit of a memory
    another session changed meanwhile; then the session goes idle. Both push
    the edit and the new file and nothing else: no delete, no pull, and the
    memory changed on both sides keeps the store's version."""
    seed = {"/p.md": "v1", "/q.md": "v1", "/r.md": "v1", "/e.md": "v1", "/kept.md": "k"}
    await twins.start(seed, follow=True)
    twins.set_status("running")

    def turn(d: Path) -> None:
        (d / "p.md").write_text("mine")
        (d / "new").mkdir()
        (d / "new" / "s.md").write_text("new")
        (d / "r.md").unlink()
        (d / "e.md").write_text("mine")

    twins.local(turn)
    twins.remote(lambda s, sid: put_remote(s, sid, "/q.md", "theirs"))
    twins.remote(lambda s, sid: put_remote(s, sid, "/e.md", "theirs"))
    time.sleep(2.5)  # the turn's last write is older than memfs's quiet time (2 s)
    before = {**seed, "/q.md": "theirs", "/e.md": "theirs"}
    assert remote_files(twins.server, twins.ref_store) == before
    assert remote_files(twins.server, twins.mfs_store) == before  # no push yet

    await twins.idle()
    twins.assert_same(
        store={**before, "/p.md": "mine", "/new/s.md": "new"},
        folder={"p.md": "mine", "q.md": "v1", "e.md": "mine", "kept.md": "k", "new/s.md": "new"},
    )
    assert [ln for ln in twins.reference_log(logging.WARNING) if "e.md" in ln] == [
        "memory changed both locally and remotely; the flush leaves the remote version "
        f"path=e.md memory_store_id={twins.ref_store}"
    ]
    session_log = twins.mounter.cache_dir / f"session-{twins.mfs_session['id']}.log"
    assert "went idle: its stores push their local changes now" in session_log.read_text()

    await twins.sync()  # the next pass: the store's versions pulled, the conflict decided
    store = {"/p.md": "mine", "/q.md": "theirs", "/r.md": "v1", "/e.md": "theirs"}
    store |= {"/kept.md": "k", "/new/s.md": "new"}
    folder = {"p.md": "mine", "q.md": "theirs", "e.md": "theirs", "kept.md": "k"}
    twins.assert_same(store=store, folder={**folder, "new/s.md": "new"})
    # DIFFERENCE (docs/semantics.md, "Both changed a file between passes"): memfs
    # keeps the local version as a conflict copy; the reference's is gone.
    assert [(p.split("/", 1)[1], t) for p, t in twins.conflict_copies().items()] == [
        ("e.md", "mine")
    ]
    await twins.finish()
    del store["/r.md"]
    twins.assert_same(store=store)


# ---- an agent's save, confirmed ---------------------------------------------------


async def test_an_identical_memory_already_in_the_store_counts_as_saved(twins: Twins):
    """Another session created n.md and changed c.md; the agent writes exactly
    those bytes. The reference's create meets a 409, lists the store and finds
    the same bytes (its edit's update is answered 200: nothing changes);
    `memfs sync FILE` answers saved with that memory's id and sha. No version
    of ours, no conflict copy."""
    await twins.start({"/c.md": "v1", "/kept.md": "k"})
    twins.remote(lambda s, sid: put_remote(s, sid, "/n.md", "the same words"))
    twins.remote(lambda s, sid: put_remote(s, sid, "/c.md", "v2"))

    for rel, text in (("n.md", "the same words"), ("c.md", "v2")):
        saved = await twins.save(rel, text)
        assert saved.reference is None, saved.reference
        assert saved.memfs_errno is None
        assert (saved.memfs_status, saved.memfs["outcome"]) == (0, "saved")
        assert saved.memfs["memory_id"] == memory_id(twins.server, twins.mfs_store, f"/{rel}")
        assert saved.memfs["sha256"] == sha256(text)

    store = {"/c.md": "v2", "/kept.md": "k", "/n.md": "the same words"}
    ref, _ = twins.assert_same(
        store=store, folder={"c.md": "v2", "kept.md": "k", "n.md": store["/n.md"]}
    )
    assert ref.versions == Counter(
        {("created", "/c.md"): 1, ("modified", "/c.md"): 1, ("created", "/kept.md"): 1}
        | {("created", "/n.md"): 1}
    )
    assert twins.conflict_copies() == {}
    await twins.sync()
    twins.assert_same(store=store, folder={"c.md": "v2", "kept.md": "k", "n.md": store["/n.md"]})
    assert twins.reference_log(logging.WARNING) == []
    assert twins.conflict_copies() == {}
    await twins.finish()
    twins.assert_same(store=store)


@pytest.mark.parametrize("rel", ["e.md", "n.md"], ids=["changed", "created"])
async def test_a_save_the_store_overrules_leaves_its_version_in_the_file(twins: Twins, rel: str):
    """Another session changed e.md, or created n.md, with other bytes; the agent
    writes it. The reference's save meets a 409 and lists other bytes: the tool
    call fails with NOT_SAVED and the folder is synced, so the file shows the
    store's version. memfs's `memfs sync FILE` answers overruled: the store's
    version is in the file, the agent's edit kept as a conflict copy."""
    await twins.start({"/e.md": "v1"})
    twins.remote(lambda s, sid: put_remote(s, sid, f"/{rel}", "theirs"))
    saved = await twins.save(rel, "mine")
    assert saved.reference is not None and saved.reference.startswith(f"{NOT_SAVED}: ")
    assert saved.reference.endswith(". Read the file again before you retry.")
    assert saved.memfs_errno is None
    assert (saved.memfs_status, saved.memfs["outcome"]) == (3, "overruled")
    # DIFFERENCE (docs/guide.md, "Confirm a save"): memfs wrote the file first and
    # keeps the agent's edit as a conflict copy; the reference never wrote it,
    # and the edit lives on only in the failed tool call.
    assert Path(saved.memfs["kept_copy"]).read_text() == "mine"
    assert list(twins.conflict_copies().values()) == ["mine"]

    store = {"/e.md": "v1", f"/{rel}": "theirs"}
    twins.assert_same(store=store, folder={k.lstrip("/"): v for k, v in store.items()})
    saved = await twins.save(rel, "mine, on the store's version")  # the agent redoes its change
    assert saved.reference is None, saved.reference
    assert (saved.memfs_status, saved.memfs["outcome"]) == (0, "saved")
    store[f"/{rel}"] = "mine, on the store's version"
    twins.assert_same(store=store, folder={k.lstrip("/"): v for k, v in store.items()})
    await twins.finish()
    twins.assert_same(store=store)


async def test_a_content_the_store_cannot_hold_is_refused_before_the_store_changes(
    twins: Twins,
):
    """A content past the store's 102,400 bytes, and the store's marker: the
    reference's save fails with NOT_SAVED (the store's 413; its own check of the
    marker), and memfs refuses the write itself (EFBIG, EPERM), which `memfs
    sync FILE` then answers as refused. The store is left as it was."""
    await twins.start({"/a.md": "v1"})
    saved = await twins.save("a.md", "x" * (MAX_CONTENT_BYTES + 1))
    assert (
        saved.reference
        == f"{NOT_SAVED}: content is 102401 bytes; a memory holds at most 102400 bytes"
    )
    assert saved.memfs_errno == errno.EFBIG
    assert (saved.memfs_status, saved.memfs["outcome"]) == (65, "refused")
    assert saved.memfs["reason"] == (
        "a write past 102,400 bytes was refused (EFBIG): it is pushed once it is written "
        "again within the limit"
    )

    saved = await twins.save(MARKER_PATH, "version 1\nsomething else")
    assert saved.reference == f"{NOT_SAVED}: this file marks the folder as a memory store."
    assert saved.memfs_errno == errno.EPERM
    assert (saved.memfs_status, saved.memfs["outcome"]) == (65, "refused")
    assert saved.memfs["reason"] == "the store's marker: it is never a memory"

    ref, mfs = twins.states()
    assert ref.store == mfs.store == {"/a.md": "v1"} and ref.versions == mfs.versions
    # DIFFERENCE (docs/semantics.md, "What is refused": EFBIG): the SDK's write
    # tool opens the file with O_TRUNC, then writes; memfs refuses the write, and
    # the file keeps what it had before it: nothing. The reference never opened
    # it. The store keeps its version either way, and memfs does not upload the
    # emptied file (the stop names it as not uploaded).
    assert ref.folder == {"a.md": "v1"}
    assert mfs.folder == {"a.md": ""}
    assert await twins.finish() == (1, f"memfs: not uploaded from {twins.mnt}: /a.md\n")
    twins.assert_same(store={"/a.md": "v1"})


async def test_a_save_the_store_does_not_confirm_is_left_for_a_retry(
    twins: Twins, shared_memfs_server: ServerProcess
):
    """The store answers the save with a 503 (both sides reach it through a fault
    proxy). The reference's tool call fails with NOT_CONFIRMED and the file is
    left as it was; `memfs sync FILE` answers not-confirmed (exit 75) and the
    file stays pending. The store is left as it was; the agent's retry saves."""
    with FaultProxyProcess(shared_memfs_server.url) as proxy:
        await twins.start({"/a.md": "v1"}, api_url=proxy.url)
        proxy.set(status=503, status_rate=1.0, match_method="POST", match_path="/memories")
        saved = await twins.save("a.md", "mine", "--confirm-timeout", "5")
        assert saved.reference == f"{NOT_CONFIRMED}: injected 503 by the fault proxy"
        assert saved.memfs_errno is None
        assert (saved.memfs_status, saved.memfs["outcome"]) == (75, "not_confirmed")
        assert saved.memfs["reason"].startswith("the store answered 503: injected 503")
        ref, mfs = twins.states()
        assert ref.store == mfs.store == {"/a.md": "v1"} and ref.versions == mfs.versions
        # DIFFERENCE (docs/guide.md, "Confirm a save"): memfs wrote the file first;
        # it stays pending, and a later pass pushes it. The reference never wrote it.
        assert ref.folder == {"a.md": "v1"}
        assert mfs.folder == {"a.md": "mine"}
        proxy.reset()
        saved = await twins.save("a.md", "mine")  # the agent's retry
        assert saved.reference is None, saved.reference
        assert (saved.memfs_status, saved.memfs["outcome"]) == (0, "saved")
        twins.assert_same(store={"/a.md": "mine"}, folder={"a.md": "mine"})
        await twins.finish()
        twins.assert_same(store={"/a.md": "mine"})
