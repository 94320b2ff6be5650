"""Every decision is taken on the bytes, as the reference sync takes it: a file
is changed here only when its bytes differ from the version both sides last
agreed on, and a file that already holds the store's new bytes agrees with
the store. Real mounts, a real `memfs serve`, passes driven with `memfs sync`."""

from __future__ import annotations

import os

from tests.support import conflict_files
from tests.support.faults import FaultProxyProcess
from tests.system.test_sync import memory_id, put_remote, remote_files


def versions(server, store_id: str) -> list[tuple[str, str]]:
    body = server.http().get(f"/v1/memory_stores/{store_id}/memory_versions").json()
    return [(v["operation"], v["path"]) for v in body["data"]]


def delete_remote(server, store_id: str, path: str) -> None:
    mid = memory_id(server, store_id, path)
    assert server.http().delete(f"/v1/memory_stores/{store_id}/memories/{mid}").status_code == 200


def save_as_editors_do(path, text: str) -> None:
    """`sed -i` and many editors: a new file beside it, renamed over it."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.rename(tmp, path)


def test_a_save_of_the_same_bytes_follows_a_delete_in_the_store(mounter, memfs_server):
    """`:w` with no change and `sed -i` that matches nothing leave the bytes as
    they were: another session's delete is followed, not undone."""
    store_id = memfs_server.create_store("same bytes")["id"]
    put_remote(memfs_server, store_id, "/vim.md", "as it was\n")
    put_remote(memfs_server, store_id, "/sed.md", "no match here\n")
    put_remote(memfs_server, store_id, "/kept.md", "stays")
    mnt = mounter.mount_one(store_id)
    (mnt / "vim.md").write_text((mnt / "vim.md").read_text())  # :w, O_TRUNC and the same bytes
    save_as_editors_do(mnt / "sed.md", (mnt / "sed.md").read_text())
    delete_remote(memfs_server, store_id, "/vim.md")
    delete_remote(memfs_server, store_id, "/sed.md")
    mounter.sync(mnt)
    assert sorted(p.name for p in mnt.iterdir()) == [".anthropic-memory-store", "kept.md"]
    mounter.unmount(mnt)
    assert remote_files(memfs_server, store_id) == {"/kept.md": "stays"}
    log = (mounter.cache_dir / store_id / "memfs.log").read_text()
    assert "created again" not in log


def test_a_file_holding_the_store_s_new_bytes_is_agreed_without_a_copy_or_a_fetch(
    mounter, memfs_server
):
    store_id = memfs_server.create_store("agreed")["id"]
    put_remote(memfs_server, store_id, "/c.md", "v1")
    with FaultProxyProcess(memfs_server.url) as proxy:
        mnt = mounter.mount_one(store_id, extra=("--api-url", proxy.url))
        assert (mnt / "c.md").read_text() == "v1"
        put_remote(memfs_server, store_id, "/c.md", "v2")
        (mnt / "c.md").write_text("v2")
        mid = memory_id(memfs_server, store_id, "/c.md")
        proxy.reset()
        mounter.sync(mnt)
        sent = proxy.counters().requests_by_method_path
        assert (mnt / "c.md").read_text() == "v2"
    assert not [k for k in sent if k.endswith(f"/memories/{mid}")], sent  # no fetch, no upload
    assert conflict_files(mounter.cache_dir / store_id / "conflicts") == []
    assert versions(memfs_server, store_id) == [("modified", "/c.md"), ("created", "/c.md")]
    assert mounter.status()[0]["pending"] == []
    log = (mounter.cache_dir / store_id / "memfs.log").read_text()
    assert "conflict" not in log and "WARNING" not in log


def test_an_edit_undone_before_the_pass_takes_the_store_s_change(mounter, memfs_server):
    store_id = memfs_server.create_store("undone")["id"]
    put_remote(memfs_server, store_id, "/d.md", "v1")
    mnt = mounter.mount_one(store_id)
    (mnt / "d.md").write_text("an edit, then undone")
    (mnt / "d.md").write_text("v1")
    put_remote(memfs_server, store_id, "/d.md", "theirs")
    mounter.sync(mnt)
    assert (mnt / "d.md").read_text() == "theirs"
    assert conflict_files(mounter.cache_dir / store_id / "conflicts") == []
    mounter.unmount(mnt)
    assert remote_files(memfs_server, store_id) == {"/d.md": "theirs"}


def test_a_new_file_holding_the_bytes_of_a_new_memory_at_its_path_is_agreed(mounter, memfs_server):
    """Two sessions write the same new note: one memory, no copy."""
    store_id = memfs_server.create_store("same new file")["id"]
    mnt = mounter.mount_one(store_id)
    (mnt / "notes").mkdir()
    (mnt / "notes" / "n.md").write_text("the same words")
    put_remote(memfs_server, store_id, "/notes/n.md", "the same words")
    inode = (mnt / "notes" / "n.md").stat().st_ino
    mounter.sync(mnt)
    assert (mnt / "notes" / "n.md").read_text() == "the same words"
    assert (mnt / "notes" / "n.md").stat().st_ino == inode  # the same file, not a new one
    assert conflict_files(mounter.cache_dir / store_id / "conflicts") == []
    mounter.unmount(mnt)
    assert versions(memfs_server, store_id) == [("created", "/notes/n.md")]
