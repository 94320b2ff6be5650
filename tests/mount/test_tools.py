"""Real tools inside a real mount: git, an editor's save, grep -r over 1,000
files, cp -r and tar, each against a real `memfs serve` store."""

from __future__ import annotations

import filecmp
import os
import subprocess
import time
from pathlib import Path

import httpx

from tests.mount.test_fs_semantics import put, store_contents
from tests.support.faults import FaultProxyProcess


def run(*cmd: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}"
    return r.stdout


def same_trees(a: Path, b: Path) -> bool:
    cmp = filecmp.dircmp(a, b)
    if cmp.left_only or cmp.right_only or cmp.funny_files:
        return False
    _, mismatch, errors = filecmp.cmpfiles(a, b, cmp.common_files, shallow=False)
    if mismatch or errors:
        return False
    return all(same_trees(a / d, b / d) for d in cmp.common_dirs)


def make_tree(root: Path) -> None:
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "README.md").write_text("# project\n")
    (root / "src" / "main.py").write_text("print('hi')\n" * 50)
    (root / "src" / "pkg" / "__init__.py").write_text("")
    (root / "docs" / "notes.txt").write_text("ünïcödé notes\n" * 100)


def test_git_init_add_commit_log(mounted, mounter, memfs_server, tmp_path):
    store_id, mnt = mounted
    env = {
        **os.environ,
        "HOME": str(tmp_path),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "A",
        "GIT_AUTHOR_EMAIL": "a@example.com",
        "GIT_COMMITTER_NAME": "A",
        "GIT_COMMITTER_EMAIL": "a@example.com",
    }
    repo = mnt / "repo"
    repo.mkdir()
    run("git", "init", "-q", "-b", "main", cwd=repo, env=env)
    (repo / "notes.md").write_text("first\n")
    run("git", "add", "notes.md", cwd=repo, env=env)
    run("git", "commit", "-q", "-m", "first note", cwd=repo, env=env)
    with open(repo / "notes.md", "a") as f:
        f.write("second\n")
    run("git", "commit", "-q", "-am", "second note", cwd=repo, env=env)
    assert run("git", "log", "--format=%s", cwd=repo, env=env).split("\n")[:2] == [
        "second note",
        "first note",
    ]
    assert run("git", "status", "--porcelain", cwd=repo, env=env) == ""
    assert run("git", "show", "HEAD~1:notes.md", cwd=repo, env=env) == "first\n"
    run("git", "fsck", "--no-progress", cwd=repo, env=env)
    # git's objects and index are binary: the store takes only UTF-8 text. It
    # refuses them for their content, which is said once when refused (a
    # WARNING of the store's log), not at the stop, whose exit status stays 0.
    stopped = mounter.unmount(mnt, check=False)
    assert (stopped.returncode, stopped.stderr) == (0, "")
    log = (mounter.cache_dir / store_id / "memfs.log").read_text()
    assert "/repo/.git/index is not uploaded: its content is not UTF-8" in log
    stored = store_contents(memfs_server, store_id)
    assert stored["/repo/notes.md"] == "first\nsecond\n"
    assert stored["/repo/.git/HEAD"] == "ref: refs/heads/main\n"


def test_editor_style_save_is_one_update_of_the_same_memory(mounter, memfs_server):
    store_id = memfs_server.create_store("editor")["id"]
    put(memfs_server, store_id, "/doc.md", "draft 1\n")
    mnt = mounter.mount_one(store_id)
    with memfs_server.http() as http:
        before = http.get(f"/v1/memory_stores/{store_id}/memories").json()["data"]
    target = mnt / "doc.md"
    for n in (2, 3):
        tmp = mnt / f".doc.md.{n}.tmp"
        with open(tmp, "w") as f:
            f.write(f"draft {n}\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.rename(tmp, target)
        assert target.read_text() == f"draft {n}\n"
        assert sorted(os.listdir(mnt)) == [".anthropic-memory-store", "doc.md"]
        mounter.sync(mnt)
    with memfs_server.http() as http:
        after = http.get(f"/v1/memory_stores/{store_id}/memories").json()["data"]
        versions = http.get(
            f"/v1/memory_stores/{store_id}/memory_versions", params={"limit": 20}
        ).json()["data"]
    assert [m["id"] for m in after] == [m["id"] for m in before]
    assert [v["operation"] for v in versions] == ["modified", "modified", "created"]
    assert store_contents(memfs_server, store_id) == {"/doc.md": "draft 3\n"}
    mounter.unmount(mnt)


def test_grep_r_over_a_thousand_files(mounter, memfs_server):
    """100 files come from the store (fetched on first read), 900 are written
    here; the local ones are removed before the stop, so they never cost a request."""
    store_id = memfs_server.create_store("grep")["id"]

    def content(i: int) -> str:
        return f"line one\n{'NEEDLE' if i % 100 == 7 else 'hay'} {i}\n"

    seeded = {f"/remote/f{i:04}.md": content(i) for i in range(100)}
    with httpx.Client(base_url=memfs_server.url, headers=memfs_server.headers()) as http:
        for path, text in seeded.items():
            r = http.post(
                f"/v1/memory_stores/{store_id}/memories", json={"path": path, "content": text}
            )
            assert r.status_code == 200, r.text
    mnt = mounter.mount_one(store_id)
    for i in range(100, 1000):
        folder = mnt / "local" / f"d{i % 9}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i:04}.md").write_text(content(i))
    started = time.monotonic()
    found = run("grep", "-rl", "NEEDLE", ".", cwd=mnt).split()
    first = time.monotonic() - started
    started = time.monotonic()
    counts = run("grep", "-rc", "line one", ".", cwd=mnt)
    second = time.monotonic() - started
    assert counts.count(":1\n") == 1000
    assert sorted(found) == sorted(
        ["./remote/f0007.md"] + [f"./local/d{i % 9}/f{i:04}.md" for i in range(107, 1000, 100)]
    )
    print(f"grep -r over 1,000 files: first {first:.2f} s, again {second:.2f} s")
    run("rm", "-r", "local", cwd=mnt)
    assert sorted(os.listdir(mnt)) == [".anthropic-memory-store", "remote"]
    mounter.unmount(mnt)
    assert store_contents(memfs_server, store_id) == seeded


def test_grep_r_over_a_cached_mount_costs_no_request(mounter, memfs_server):
    """Once the prefetch has brought every content, reading the whole tree is
    served by the cache: no request reaches the store (counted at the proxy and
    by the store process's client), however often it is read."""
    store_id = memfs_server.create_store("cached grep")["id"]
    for i in range(60):
        put(
            memfs_server,
            store_id,
            f"/d{i % 6}/f{i:02}.md",
            f"{'NEEDLE' if i % 20 == 3 else 'hay'}\n",
        )
    with FaultProxyProcess(memfs_server.url) as proxy:
        # No pass runs while the tree is read (an idle pass costs one request).
        extra = ("--api-url", proxy.url, "--sync-interval", "3600")
        mnt = mounter.mount_one(store_id, extra=extra)
        deadline = time.monotonic() + 30
        while not mounter.status()[0]["prefetched"]:
            assert time.monotonic() < deadline, "the prefetch did not finish"
            time.sleep(0.1)
        at_proxy = proxy.state()["counters"]["requests_seen"]
        by_client = mounter.status()[0]["requests"]
        for _ in range(2):
            found = run("grep", "-rl", "NEEDLE", ".", cwd=mnt).split()
            assert sorted(found) == ["./d1/f43.md", "./d3/f03.md", "./d5/f23.md"]
            assert run("grep", "-rc", "hay", ".", cwd=mnt).count(":1\n") == 57
        assert proxy.state()["counters"]["requests_seen"] == at_proxy
        assert mounter.status()[0]["requests"] == by_client
        mounter.unmount(mnt)


def test_cp_r_and_tar_round_trips(mounted, mounter, memfs_server, tmp_path):
    store_id, mnt = mounted
    original = tmp_path / "original"
    make_tree(original)

    run("cp", "-r", str(original), str(mnt / "copied"))
    assert same_trees(original, mnt / "copied")
    run("cp", "-r", str(mnt / "copied"), str(tmp_path / "out"))
    assert same_trees(original, tmp_path / "out")

    run("tar", "-cf", str(tmp_path / "from-mount.tar"), "-C", str(mnt), "copied")
    (tmp_path / "untarred").mkdir()
    run("tar", "-xf", str(tmp_path / "from-mount.tar"), "-C", str(tmp_path / "untarred"))
    assert same_trees(original, tmp_path / "untarred" / "copied")
    run("tar", "-cf", str(tmp_path / "to-mount.tar"), "-C", str(original), ".")
    (mnt / "untarred").mkdir()
    run("tar", "-xpf", str(tmp_path / "to-mount.tar"), "-C", str(mnt / "untarred"))
    assert same_trees(original, mnt / "untarred")
    assert (mnt / "untarred" / "README.md").stat().st_mtime_ns == (
        (original / "README.md").stat().st_mtime_ns // 1_000_000_000 * 1_000_000_000
    )

    mounter.unmount(mnt)
    stored = store_contents(memfs_server, store_id)
    expected = {}
    for f in original.rglob("*"):
        if f.is_file():
            rel = "/" + f.relative_to(original).as_posix()
            expected["/copied" + rel] = expected["/untarred" + rel] = f.read_text()
    assert stored == expected


def test_tar_xattrs_extracts_every_file_into_a_mount(mounted, mounter, memfs_server, tmp_path):
    """GNU tar with --xattrs makes a file that has extended attributes with
    mknod(S_IFREG), sets them, then writes it: every file arrives, whole,
    though the attributes memfs does not keep are refused (tar warns)."""
    store_id, mnt = mounted
    source = tmp_path / "source"
    source.mkdir()
    (source / "plain.md").write_text("plain\n")
    (source / "noted.md").write_text("noted\n")
    os.setxattr(source / "noted.md", "user.comment", b"a note")
    os.mknod(mnt / "made.md", 0o100644)
    assert (mnt / "made.md").read_text() == ""
    run("tar", "--xattrs", "-cf", str(tmp_path / "x.tar"), "-C", str(source), ".")
    (mnt / "out").mkdir()
    subprocess.run(["tar", "--xattrs", "-xf", str(tmp_path / "x.tar"), "-C", str(mnt / "out")])
    assert same_trees(source, mnt / "out")
    mounter.unmount(mnt)
    stored = store_contents(memfs_server, store_id)
    assert stored == {"/made.md": "", "/out/plain.md": "plain\n", "/out/noted.md": "noted\n"}
