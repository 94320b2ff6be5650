"""A store that holds what no local folder can show: a name over 255 bytes
(the contract limits paths, not names) and a memory at the marker's path.
The mount shows everything else, keeps in step, and never deletes or changes
what it cannot show."""

from __future__ import annotations

from tests.mount.test_fs_semantics import put, store_contents

MARKER = ".anthropic-memory-store"


def test_memories_no_folder_can_show_are_left_alone_in_the_store(mounter, memfs_server):
    store_id = memfs_server.create_store("hostile store")["id"]
    long_name = "/" + "y" * 256 + ".md"
    put(memfs_server, store_id, long_name, "a name over 255 bytes")
    put(memfs_server, store_id, "/" + MARKER, "not the marker")
    put(memfs_server, store_id, "/deep/" + "z" * 300, "deep and long")
    put(memfs_server, store_id, "/ok.md", "fine")
    before = store_contents(memfs_server, store_id)

    mnt = mounter.mount_one(store_id)
    assert (mnt / "ok.md").read_text() == "fine"
    assert (mnt / MARKER).read_text() == f"version 1\n{store_id}"
    assert sorted(p.name for p in mnt.iterdir()) == [MARKER, "ok.md"]  # no folder for /deep/zzz…
    (mnt / "ok.md").write_text("changed here")
    (mnt / "new.md").write_text("new")
    status = mounter.status()[0]
    assert status["files"] == 2  # ok.md and new.md
    assert status["not_shown"] == {
        long_name: "a name over 255 bytes",
        "/deep/" + "z" * 300: "a name over 255 bytes",
        "/" + MARKER: "the marker's path, which memfs keeps",
    }
    human = mounter.memfs("status", check=True).stdout
    assert f"  not shown: {long_name}\n    a name over 255 bytes\n" in human
    mounter.sync(mnt)  # a second pass says nothing again
    mounter.unmount(mnt)
    after = store_contents(memfs_server, store_id)
    assert after == {**before, "/ok.md": "changed here", "/new.md": "new"}
    log = (mounter.cache_dir / store_id / "memfs.log").read_text()
    assert log.count("with a name over 255 bytes that no folder here can show") == 2
    assert log.count("the marker's path; it is not shown") == 1
