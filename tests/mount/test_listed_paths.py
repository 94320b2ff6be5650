"""What the store lists is checked before anything here uses it: a path that is
not a clean memory path is never shown, written or deleted, and every other
memory syncs. `memfs serve` refuses such paths, as the hosted API should; a
store that lists them anyway is played by writing them into the server's
database behind its back."""

from __future__ import annotations

import os
import sqlite3
import threading
import time

from tests.support.faults import FaultProxyProcess
from tests.system.test_sync import memory_id, put_remote, remote_files

MARKER = ".anthropic-memory-store"


def plant(server, store_id: str, path: str, content: str) -> str:
    """A memory at `path`, whatever the API's rules: created at a clean path,
    then moved in the server's database (its versions too, for the feed)."""
    placeholder = f"/planted-{abs(hash(path))}.md"
    put_remote(server, store_id, placeholder, content)
    mid = memory_id(server, store_id, placeholder)
    with sqlite3.connect(server.db_path) as db:
        db.execute("UPDATE memories SET path = ? WHERE id = ?", (path, mid))
        db.execute("UPDATE versions SET path = ? WHERE memory_id = ?", (path, mid))
    return mid


def id_at(server, store_id: str, path: str) -> str:
    with sqlite3.connect(server.db_path) as db:
        row = db.execute(
            "SELECT id FROM memories WHERE store_id = ? AND path = ?", (store_id, path)
        ).fetchone()
    return row[0]


def listed_paths(server, store_id: str) -> dict[str, str]:
    with sqlite3.connect(server.db_path) as db:
        rows = db.execute("SELECT path, content FROM memories WHERE store_id = ?", (store_id,))
        return dict(rows.fetchall())


UNCLEAN = {
    "/../evil.md": "it has a '..' segment",
    "/./dot.md": "it has a '.' segment",
    "/x/": "it ends with '/'",
    "/a//b.md": "it has an empty segment",
    "/a.md\x00shadow": "it holds a NUL character",
    "/" + "d/" * 600 + "long.md": "it is longer than 1,024 bytes",
    f"/{MARKER}/inner.md": "it is under the marker's path, which memfs keeps",
}


def test_paths_that_are_not_clean_are_never_shown_written_or_deleted(mounter, memfs_server):
    store_id = memfs_server.create_store("unclean")["id"]
    put_remote(memfs_server, store_id, "/a.md", "the real a")
    put_remote(memfs_server, store_id, "/ok.md", "fine")
    for path in UNCLEAN:
        plant(memfs_server, store_id, path, f"planted at {path!r}")
    before = listed_paths(memfs_server, store_id)

    mnt = mounter.mount_one(store_id)
    assert sorted(os.listdir(mnt)) == [MARKER, "a.md", "ok.md"]
    assert (mnt / "a.md").read_text() == "the real a"  # a NUL never reaches a lookup
    assert (mnt / MARKER).read_text() == f"version 1\n{store_id}"  # a file, not a folder
    status = mounter.status()[0]
    assert status["not_shown"] == UNCLEAN
    (mnt / "ok.md").write_text("changed here")
    (mnt / "a.md").unlink()
    (mnt / "new.md").write_text("new")
    mounter.sync(mnt)
    assert (mnt / MARKER).read_text() == f"version 1\n{store_id}"
    mounter.unmount(mnt)

    after = listed_paths(memfs_server, store_id)
    expected = {k: v for k, v in before.items() if k != "/a.md"}
    assert after == {**expected, "/ok.md": "changed here", "/new.md": "new"}
    log = (mounter.cache_dir / store_id / "memfs.log").read_text()
    assert log.count("which is not shown") == len(UNCLEAN)  # once each, across passes
    cache = mounter.cache_dir
    assert not (cache.parent / "evil.md").exists() and not (cache / "evil.md").exists()


def test_a_memory_the_store_moves_to_a_path_that_is_not_clean_leaves_the_folder(
    mounter, memfs_server
):
    """Here it is as if the store had deleted it; in the store nothing is sent for it."""
    store_id = memfs_server.create_store("moved away")["id"]
    put_remote(memfs_server, store_id, "/m.md", "mine")
    put_remote(memfs_server, store_id, "/other.md", "other")
    mnt = mounter.mount_one(store_id)
    assert (mnt / "m.md").read_text() == "mine"
    mid = memory_id(memfs_server, store_id, "/m.md")
    with sqlite3.connect(memfs_server.db_path) as db:
        db.execute("UPDATE memories SET path = '/../m.md' WHERE id = ?", (mid,))
    # A listing (the feed says nothing of a change behind the server's back) shows
    # the move: the next mount's first pass.
    mounter.unmount(mnt)
    mnt = mounter.mount_one(store_id)
    assert sorted(os.listdir(mnt)) == [MARKER, "other.md"]
    assert mounter.status()[0]["not_shown"] == {"/../m.md": "it has a '..' segment"}
    mounter.unmount(mnt)
    assert listed_paths(memfs_server, store_id) == {"/../m.md": "mine", "/other.md": "other"}


def test_a_memory_moved_while_a_listing_is_paged_is_not_taken_as_deleted(mounter, memfs_server):
    """The feed refused, the store is followed by listings of 100 a page; a
    memory moved from page 2 to page 1 between the two is on neither."""
    store_id = memfs_server.create_store("paged")["id"]
    for i in range(150):
        put_remote(memfs_server, store_id, f"/n/{i:03}.md", f"note {i}")
    moving = id_at(memfs_server, store_id, "/n/149.md")
    with FaultProxyProcess(memfs_server.url) as proxy:
        proxy.set(status=403, status_rate=1.0, match_path="/memory_versions")
        mnt = mounter.mount_one(store_id, extra=("--api-url", proxy.url))
        (mnt / "n" / "149.md").write_text("edited here")

        def move_while_paging() -> None:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                if any("page=" in t for t in proxy.counters().targets):
                    memfs_server.http().post(
                        f"/v1/memory_stores/{store_id}/memories/{moving}",
                        json={"path": "/n/000a.md"},
                    )
                    return
                time.sleep(0.02)

        mover = threading.Thread(target=move_while_paging)
        proxy.reset()
        proxy.set(delay=1.0, match_path=r"/memories\?.*page=")
        mover.start()
        mounter.sync(mnt)
        mover.join()
        proxy.reset()
        assert (mnt / "n" / "000a.md").read_text() == "edited here"
        assert not (mnt / "n" / "149.md").exists()
        mounter.unmount(mnt)
    files = remote_files(memfs_server, store_id)
    assert len(files) == 150 and files["/n/000a.md"] == "edited here"
    assert "/n/149.md" not in files
