"""The first thing a user does: mount a store, see its files, write one, stop."""

from __future__ import annotations


def test_mount_shows_tree_and_marker_then_uploads_on_unmount(mounter, memfs_server):
    store_id = memfs_server.create_store("Smoke Test")["id"]
    http = memfs_server.http()
    r = http.post(
        f"/v1/memory_stores/{store_id}/memories", json={"path": "/notes/a.md", "content": "alpha"}
    )
    assert r.status_code == 200, r.text
    path = mounter.mount_one(store_id)
    assert (path / "notes" / "a.md").read_text() == "alpha"
    assert (path / ".anthropic-memory-store").read_text() == f"version 1\n{store_id}"
    (path / "b.md").write_text("bravo")
    mounter.unmount(path)
    assert not path.exists()
    listing = http.get(
        f"/v1/memory_stores/{store_id}/memories", params={"view": "full", "limit": 20}
    ).json()
    assert {m["path"]: m["content"] for m in listing["data"]} == {
        "/b.md": "bravo",
        "/notes/a.md": "alpha",
    }
