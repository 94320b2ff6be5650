"""A read-only store on a real mount: every change fails with EROFS, whoever
makes it (shell, coreutils, an editor's save, a writable mmap), nothing
reaches the store, and changes made in the store still arrive after
`memfs sync`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from memfs.testing import FakeStore

EROFS_TEXT = "Read-only file system"

ATOMIC_SAVE = """
import os, sys
path = sys.argv[1]
tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".swp")
with open(tmp, "w") as f:
    f.write("saved by an editor")
os.replace(tmp, path)
"""

WRITABLE_MMAP = """
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
m = mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
m[0:1] = b"X"
m.flush()
"""


def sh(command: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["sh", "-c", command], cwd=cwd, capture_output=True, text=True, timeout=30
    )


def _memories(memfs_server, store_id: str) -> dict[str, str]:
    """Every memory of the store: path -> content."""
    return FakeStore(memfs_server, store_id).memories()


def test_every_change_to_a_read_only_store_fails_with_erofs(mounter, memfs_server, tmp_path):
    store_id = memfs_server.create_store("Team Knowledge")["id"]
    with memfs_server.http() as http:
        for path, content in {"/a.md": "alpha", "/docs/b.md": "bravo"}.items():
            r = http.post(
                f"/v1/memory_stores/{store_id}/memories", json={"path": path, "content": content}
            )
            assert r.status_code == 200, r.text
    before = _memories(memfs_server, store_id)
    outside = tmp_path / "outside.md"
    outside.write_text("from outside")
    mnt = mounter.mount_one(store_id, read_only=True)

    assert (mnt / "a.md").read_text() == "alpha"
    assert oct((mnt / "a.md").stat().st_mode & 0o222) == "0o0"
    routes = {
        "shell redirect": "echo changed > a.md",
        "shell append": "echo more >> a.md",
        "redirect to a new file": "echo new > new.md",
        "truncate": "truncate -s 0 a.md",
        "truncate a new file": "truncate -s 0 new.md",
        "mv in": f"mv {outside} moved-in.md",
        "mv out": f"mv a.md {tmp_path / 'moved-out.md'}",
        "mv within": "mv a.md docs/a.md",
        "mv a folder": "mv docs documents",
        "rm": "rm a.md",
        "rm -r": "rm -r docs",
        "rmdir": "rmdir docs",
        "touch an existing file": "touch a.md",
        "touch a new file": "touch new.md",
        "chmod": "chmod 600 a.md",
        "mkdir": "mkdir newdir",
        "ln": "ln a.md hard.md",
        "ln -s": "ln -s a.md soft.md",
        "sed -i (an editor-style save)": "sed -i s/alpha/omega/ a.md",
        "atomic save": f"{sys.executable} -c '{ATOMIC_SAVE}' a.md",
        "writable mmap": f"{sys.executable} -c '{WRITABLE_MMAP}' a.md",
        "write to the marker": "echo x > .anthropic-memory-store",
        "rm the marker": "rm -f .anthropic-memory-store",
    }
    # vim, forcing the save (`wq!` writes a file whose mode says read-only, as
    # root would), edits a copy outside fine and fails inside; its own message
    # for a refused save does not carry the errno text.
    vim = shutil.which("vim")
    assert vim, "vim is not installed (scripts/install.sh installs it)"
    save = f"{vim} -Nu NONE -n -es -c 'normal! Aedited' -c 'wq!' a.md"
    (tmp_path / "a.md").write_text("alpha")
    assert sh(save, tmp_path).returncode == 0
    assert (tmp_path / "a.md").read_text() == "alphaedited\n"
    r = sh(save, mnt)
    assert r.returncode == 1, f"vim's save into a read-only store: {r.returncode} {r.stderr!r}"

    for route, command in routes.items():
        r = sh(command, mnt)
        assert r.returncode != 0, f"{route}: {command!r} succeeded on a read-only store"
        assert EROFS_TEXT in r.stderr, f"{route}: {command!r} said {r.stderr!r}"

    assert sorted(os.listdir(mnt)) == [".anthropic-memory-store", "a.md", "docs"]
    assert os.listdir(mnt / "docs") == ["b.md"]
    assert (mnt / "a.md").read_text() == "alpha"
    assert (mnt / ".anthropic-memory-store").read_text() == f"version 1\n{store_id}"
    assert outside.read_text() == "from outside"
    assert mounter.sync(mnt).returncode == 0
    assert _memories(memfs_server, store_id) == before

    # Changes made in the store still arrive.
    with memfs_server.http() as http:
        listing = http.get(f"/v1/memory_stores/{store_id}/memories").json()["data"]
        ids = {m["path"]: m["id"] for m in listing}
        base = f"/v1/memory_stores/{store_id}/memories"
        assert http.post(f"{base}/{ids['/a.md']}", json={"content": "alpha 2"}).status_code == 200
        assert http.delete(f"{base}/{ids['/docs/b.md']}").status_code == 200
        assert http.post(base, json={"path": "/c/new.md", "content": "charlie"}).status_code == 200
    mounter.sync(mnt)
    assert (mnt / "a.md").read_text() == "alpha 2"
    assert not (mnt / "docs" / "b.md").exists()
    assert (mnt / "c" / "new.md").read_text() == "charlie"
    assert sh("echo x > c/new.md", mnt).returncode != 0

    r = mounter.unmount(mnt)
    assert r.returncode == 0, r.stderr
    assert not mnt.exists()
