"""A model-based test: random sequences of file operations applied to a memfs
mount and to a plain local folder side by side (the folder is the model),
comparing contents, listings, sizes and errnos after every step; and steps
where another writer changes the store between passes, after which the mount
must show what the decision table says (the store's version).

A short run in `make test`; `make soak` runs it long (HYPOTHESIS_PROFILE=soak).
"""

from __future__ import annotations

import itertools
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    rule,
)

settings.register_profile(
    "ci",
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
settings.register_profile(
    "soak",
    max_examples=400,
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")

NAMES = st.sampled_from(["a.md", "b.md", "c", "d.txt", "notes"])
DATA = st.binary(min_size=0, max_size=300).map(lambda b: b.replace(b"\0", b"."))
OFFSETS = st.integers(min_value=0, max_value=400)


def outcome(fn, *args):
    """What an operation did: ("ok", value) or ("errno", code)."""
    try:
        return ("ok", fn(*args))
    except OSError as e:
        return ("errno", e.errno)


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every entry under root: a file's content, None for a folder."""
    out: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        for d in dirnames:
            out[os.path.normpath(os.path.join(rel, d))] = None
        for f in filenames:
            with open(os.path.join(dirpath, f), "rb") as fh:
                out[os.path.normpath(os.path.join(rel, f))] = fh.read()
    return out


class MountMatchesALocalFolder(RuleBasedStateMachine):
    """Set up by the test: `mounter`, `memfs_server`, `store_id`, `mount`, `scratch`."""

    env: dict = {}
    counter = itertools.count()
    paths = Bundle("paths")

    @initialize(target=paths)
    def fresh_folders(self):
        n = next(self.counter)
        self.mnt = Path(self.env["mount"]) / f"case{n}"
        self.ref = Path(self.env["scratch"]) / f"case{n}"
        self.mnt.mkdir()
        self.ref.mkdir()
        self.open_files: list[tuple[int, int]] = []
        return multiple("a.md", "dir/b.md", "dir")

    def teardown(self):
        for a, b in getattr(self, "open_files", []):
            os.close(a)
            os.close(b)

    def both(self, fn, rel: str, *args):
        got = outcome(fn, self.mnt / rel, *args)
        want = outcome(fn, self.ref / rel, *args)
        assert got == want, (fn.__name__, rel, args, got, want)
        return got

    # ---- operations on both sides ---------------------------------------

    @rule(target=paths, parent=st.sampled_from(["", "dir", "dir/sub"]), name=NAMES)
    def make_path(self, parent, name):
        return f"{parent}/{name}".lstrip("/")

    @rule(rel=paths, data=DATA)
    def write_whole(self, rel, data):
        def write(p, d):
            with open(p, "wb") as f:
                f.write(d)

        self.both(write, rel, data)

    @rule(rel=paths, offset=OFFSETS, data=DATA)
    def write_at(self, rel, offset, data):
        def pwrite(p, off, d):
            fd = os.open(p, os.O_WRONLY)
            try:
                return os.pwrite(fd, d, off)
            finally:
                os.close(fd)

        self.both(pwrite, rel, offset, data)

    @rule(rel=paths, data=DATA)
    def append(self, rel, data):
        def app(p, d):
            with open(p, "ab") as f:
                f.write(d)

        self.both(app, rel, data)

    @rule(rel=paths, size=OFFSETS)
    def truncate(self, rel, size):
        self.both(os.truncate, rel, size)

    @rule(rel=paths)
    def read(self, rel):
        def read(p):
            with open(p, "rb") as f:
                return f.read()

        self.both(read, rel)

    @rule(rel=paths)
    def mkdir(self, rel):
        self.both(os.mkdir, rel)

    @rule(rel=paths)
    def rmdir(self, rel):
        self.both(os.rmdir, rel)

    @rule(rel=paths)
    def unlink(self, rel):
        self.both(os.unlink, rel)

    @rule(rel=paths)
    def unlink_while_open(self, rel):
        a = outcome(os.open, self.mnt / rel, os.O_RDWR)
        b = outcome(os.open, self.ref / rel, os.O_RDWR)
        assert (a[0], b[0]) in (("ok", "ok"), ("errno", "errno")), (rel, a, b)
        if a[0] == "errno":
            assert a == b
            return
        self.open_files.append((a[1], b[1]))
        self.both(os.unlink, rel)

    @rule(data=DATA)
    def write_to_an_unlinked_open_file(self, data):
        if not self.open_files:
            return
        a, b = self.open_files[-1]
        assert os.pwrite(a, data, 0) == os.pwrite(b, data, 0)
        assert os.pread(a, 1000, 0) == os.pread(b, 1000, 0)

    @rule(src=paths, dst=paths)
    def rename(self, src, dst):
        got = outcome(os.rename, self.mnt / src, self.mnt / dst)
        want = outcome(os.rename, self.ref / src, self.ref / dst)
        assert got == want, ("rename", src, dst, got, want)

    @rule(rel=paths)
    def fsync(self, rel):
        def sync(p):
            fd = os.open(p, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

        self.both(sync, rel)

    @rule(rel=paths)
    def stat_size(self, rel):
        def size(p):
            st = os.stat(p)
            return st.st_size if os.path.isfile(p) else "folder"

        self.both(size, rel)

    # ---- another writer on the store, between passes --------------------------

    @rule(rel=paths, data=DATA.filter(lambda d: d.isascii()))
    def another_writer_changes_a_file(self, rel, data):
        """A file the store holds, changed there: after the next pass the mount
        shows the store's version, whatever was done here since (the store wins)."""
        mnt, ref = self.mnt / rel, self.ref / rel
        if not mnt.is_file() or self.open_files:
            return
        self.env["mounter"].sync(Path(self.env["mount"]))
        store_path = "/" + os.path.relpath(mnt, self.env["mount"])
        text = data.decode()
        changed = put_remote(self.env["memfs_server"], self.env["store_id"], store_path, text)
        self.env["mounter"].sync(Path(self.env["mount"]))
        if changed:  # else the local file stands (it may be one the store refused)
            ref.write_bytes(text.encode())

    # ---- after every step ---------------------------------------------------

    @invariant()
    def same_tree(self):
        if not hasattr(self, "mnt"):
            return
        assert snapshot(self.mnt) == snapshot(self.ref)


def put_remote(server, store_id: str, path: str, content: str) -> bool:
    """Write `content` at `path` in the store; False when the store held it
    already (a no-op update: nothing changed there, so there is nothing to pull)."""
    with server.http() as http:
        r = http.post(
            f"/v1/memory_stores/{store_id}/memories", json={"path": path, "content": content}
        )
        if r.status_code == 409:
            mid = r.json()["error"]["conflicting_memory_id"]
            url = f"/v1/memory_stores/{store_id}/memories/{mid}"
            held = http.get(url, params={"view": "full"})
            assert held.status_code == 200, held.text
            if held.json()["content"] == content:
                return False
            r = http.post(url, json={"content": content})
    assert r.status_code == 200, r.text
    return True


@pytest.mark.slow
def test_a_mount_behaves_like_a_local_folder(mounter, memfs_server, tmp_path):
    store_id = memfs_server.create_store("model")["id"]
    mount = mounter.mount_one(store_id, extra=("--sync-interval", "3600", "--write-behind", "no"))
    scratch = tmp_path / "reference"
    scratch.mkdir()
    MountMatchesALocalFolder.env = {
        "mounter": mounter,
        "memfs_server": memfs_server,
        "store_id": store_id,
        "mount": str(mount),
        "scratch": str(scratch),
    }
    machine = settings(settings.get_profile(PROFILE))(MountMatchesALocalFolder)
    machine.TestCase().runTest()
    # Everything the mount holds reaches the store, byte for byte.
    expected = {
        "/" + p: c.decode() for p, c in snapshot(mount).items() if c is not None and c.isascii()
    }
    assert mounter.unmount(mount, check=False).returncode in (0, 1)
    shutil.rmtree(scratch)
    with memfs_server.http() as http:
        page, stored = None, {}
        while True:
            params = {"view": "full", "limit": 20, **({"page": page} if page else {})}
            body = http.get(f"/v1/memory_stores/{store_id}/memories", params=params).json()
            stored.update({m["path"]: m["content"] for m in body["data"]})
            page = body.get("next_page")
            if not page:
                break
    for path, content in expected.items():
        if not path.endswith("/.anthropic-memory-store"):
            assert stored.get(path) == content, path
