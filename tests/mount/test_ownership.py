"""Owners, groups and permissions on real mounts: kept in the cache's journal
(the store has no owners), shown by `stat`, enforced by the kernel when other
users can reach the mount (`--allow-other`), as on a local disk.

Other users are played by child processes that switch to uid/gid 65534
(`nobody`) and 65533 before running the system Python, in the mount (the
test's own folders above it are root's alone)."""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import time
from pathlib import Path

import pytest

from tests.mount.test_fs_semantics import errno_of, put

NOBODY = 65534
OTHER = 65533
SYSTEM_PYTHON = "/usr/bin/python3"

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.exists(SYSTEM_PYTHON),
    reason="needs root (to mount for other users and switch to them) and /usr/bin/python3",
)


def as_user(uid: int, where: Path, code: str, *, groups: tuple[int, ...] = ()) -> str:
    """Run `code` (Python, with `os` imported) as another user in the folder
    `where`; returns what it printed, or the errno name of the OSError it raised."""
    program = (
        "import errno, os\n"
        "try:\n" + "".join(f"    {line}\n" for line in code.splitlines()) + "except OSError as e:\n"
        "    print(errno.errorcode[e.errno])\n"
    )
    r = subprocess.run(
        [SYSTEM_PYTHON, "-c", program],
        user=uid,
        group=uid,
        extra_groups=list(groups),
        capture_output=True,
        text=True,
        timeout=30,
        cwd=where,  # entered as root, before the switch
    )
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def owner(path: Path) -> tuple[int, int]:
    st = os.lstat(path)
    return st.st_uid, st.st_gid


def test_chown_R_as_root_survives_a_remount_and_pulled_files_get_the_default(mounter, memfs_server):
    store_id = memfs_server.create_store("sandbox")["id"]
    put(memfs_server, store_id, "/notes/from-store.md", "pulled")
    defaults = ("--uid", "4321", "--gid", "8765")
    mnt = mounter.mount_one(store_id, extra=defaults)
    assert owner(mnt / "notes" / "from-store.md") == (4321, 8765)
    (mnt / "notes" / "mine.md").write_text("written here")
    (mnt / "deep" / "er").mkdir(parents=True)
    (mnt / "deep" / "er" / "f.md").write_text("f")
    ctime_before = os.stat(mnt / "notes" / "mine.md").st_ctime_ns
    time.sleep(0.01)

    # what a sandbox's entrypoint does before it hands the folder to the agent
    r = subprocess.run(["chown", "-R", "1234:2345", str(mnt)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    everything = [mnt, *mnt.rglob("*")]  # the store's marker too
    shown = {p.relative_to(mnt).as_posix(): owner(p) for p in everything}
    assert ".anthropic-memory-store" in shown
    assert set(shown.values()) == {(1234, 2345)}, shown
    assert os.stat(mnt / "notes" / "mine.md").st_ctime_ns > ctime_before
    os.chown(mnt / "deep" / "er" / "f.md", -1, 99)  # a group alone
    assert owner(mnt / "deep" / "er" / "f.md") == (1234, 99)

    mounter.unmount(mnt)
    put(memfs_server, store_id, "/notes/later.md", "arrived while unmounted")
    mnt = mounter.mount_one(store_id, extra=defaults)
    assert owner(mnt / "notes" / "from-store.md") == (1234, 2345)
    assert owner(mnt / "notes" / "mine.md") == (1234, 2345)
    assert owner(mnt / "deep" / "er" / "f.md") == (1234, 99)
    assert owner(mnt) == (1234, 2345)
    assert owner(mnt / ".anthropic-memory-store") == (1234, 2345)
    assert owner(mnt / "notes" / "later.md") == (4321, 8765)
    mounter.unmount(mnt)

    # Owners are local: a mount without --uid/--gid shows the mounting user
    # where nobody chose one, and what chown chose everywhere else.
    mnt = mounter.mount_one(store_id)
    assert owner(mnt / "notes" / "later.md") == (os.getuid(), os.getgid())
    assert owner(mnt / "notes" / "mine.md") == (1234, 2345)


def test_other_users_get_what_the_modes_and_owners_allow(mounter, memfs_server):
    store_id = memfs_server.create_store("shared")["id"]
    mnt = mounter.mount_one(store_id, extra=("--allow-other",))
    (mnt / "secret.md").write_text("root only")
    os.chmod(mnt / "secret.md", 0o600)
    (mnt / "open.md").write_text("for all")
    os.chmod(mnt / "open.md", 0o644)
    (mnt / "roots").mkdir(mode=0o755)
    (mnt / "theirs").mkdir(mode=0o755)
    os.chown(mnt / "theirs", NOBODY, NOBODY)
    os.chmod(mnt, 0o755)

    def nobody(code: str, **kw) -> str:
        return as_user(NOBODY, mnt, code, **kw)

    # not the owner: a 0600 file cannot be read, a 0755 folder not written into
    assert nobody("print(open('secret.md').read())") == "EACCES"
    assert nobody("print(open('open.md').read())") == "for all"
    assert nobody("open('open.md', 'a')") == "EACCES"
    assert nobody("open('roots/x.md', 'w'); print('made')") == "EACCES"
    assert nobody("os.rmdir('roots'); print('removed')") == "EACCES"
    assert nobody("os.chmod('secret.md', 0o666); print('changed')") == "EPERM"
    # the owner can, and what they make is theirs
    made = nobody(
        "open('theirs/x.md', 'w').write('mine')\nst = os.stat('theirs/x.md')\n"
        "print(st.st_uid, st.st_gid)"
    )
    assert made == f"{NOBODY} {NOBODY}"
    assert nobody("os.chmod('theirs/x.md', 0o600); print('ok')") == "ok"
    assert as_user(OTHER, mnt, "print(open('theirs/x.md').read())") == "EACCES"
    # an owner may not give a file away, nor to a group they are not in
    assert nobody("os.chown('theirs/x.md', 0, -1); print('ok')") == "EPERM"
    assert nobody("os.chown('theirs/x.md', -1, 0); print('ok')") == "EPERM"
    assert nobody("os.chown('theirs/x.md', -1, 4242); print('ok')", groups=(4242,)) == "ok"
    assert owner(mnt / "theirs" / "x.md") == (NOBODY, 4242)
    # root can do everything
    assert (mnt / "theirs" / "x.md").read_text() == "mine"
    assert (mnt / "secret.md").read_text() == "root only"
    os.chown(mnt / "theirs" / "x.md", 0, 0)
    assert owner(mnt / "theirs" / "x.md") == (0, 0)
    mounter.unmount(mnt)


def test_set_id_bits_are_kept_and_cleared_as_on_a_local_disk(mounter, memfs_server):
    store_id = memfs_server.create_store("set-id")["id"]
    mnt = mounter.mount_one(store_id, extra=("--allow-other",))
    os.chmod(mnt, 0o755)
    tool = mnt / "tool"
    tool.write_text("#!/bin/sh\n")
    os.chmod(tool, 0o6777)
    assert stat.S_IMODE(os.stat(tool).st_mode) == 0o6777
    # written by someone else: the set-id bits go
    assert as_user(NOBODY, mnt, "open('tool', 'a').write('x'); print('ok')") == "ok"
    assert stat.S_IMODE(os.stat(tool).st_mode) == 0o777
    # a change of owner takes them away too, even root's
    os.chmod(tool, 0o6755)
    os.chown(tool, NOBODY, NOBODY)
    assert stat.S_IMODE(os.stat(tool).st_mode) == 0o755
    # a set-gid folder gives its group to what is made in it, and its bit to folders
    shared = mnt / "shared"
    shared.mkdir()
    os.chown(shared, 0, 4242)
    os.chmod(shared, 0o2777)
    (shared / "f.md").write_text("f")
    (shared / "sub").mkdir()
    assert owner(shared / "f.md") == (0, 4242)
    assert owner(shared / "sub") == (0, 4242)
    assert os.stat(shared / "sub").st_mode & stat.S_ISGID
    assert not os.stat(shared / "f.md").st_mode & stat.S_ISGID
    # the sticky bit: only the owner of a file removes it from a sticky folder
    tmp = mnt / "tmp"
    tmp.mkdir()
    os.chmod(tmp, 0o1777)
    assert as_user(NOBODY, mnt, "open('tmp/n.md', 'w').write('n'); print('ok')") == "ok"
    assert as_user(OTHER, mnt, "os.unlink('tmp/n.md'); print('ok')") == "EPERM"
    assert as_user(NOBODY, mnt, "os.unlink('tmp/n.md'); print('ok')") == "ok"
    mounter.unmount(mnt)

    # kept in the journal across a remount
    mnt = mounter.mount_one(store_id, extra=("--allow-other",))
    assert stat.S_IMODE(os.stat(mnt / "shared").st_mode) == 0o2777
    assert stat.S_IMODE(os.stat(mnt / "tmp").st_mode) == 0o1777
    assert owner(mnt / "tool") == (NOBODY, NOBODY)


def test_root_may_chown_without_allow_other_and_a_read_only_store_refuses(mounter, memfs_server):
    store_id = memfs_server.create_store("owners")["id"]
    put(memfs_server, store_id, "/a.md", "a")
    mnt = mounter.mount_one(store_id)
    os.chown(mnt / "a.md", 1000, 1000)
    assert owner(mnt / "a.md") == (1000, 1000)
    mounter.unmount(mnt)

    ro_id = memfs_server.create_store("read only")["id"]
    put(memfs_server, ro_id, "/a.md", "a")
    ro = mounter.mount_one(ro_id, "ro", read_only=True)
    assert errno_of(os.chown, ro / "a.md", 1000, -1) == errno.EROFS
    assert errno_of(os.chown, ro / "a.md", -1, 1000) == errno.EROFS
    assert owner(ro / "a.md") == (os.getuid(), os.getgid())
