"""Every refusal docs/semantics.md lists, on real mounts of a real `memfs
serve`: one case per row of its table "What is refused, and with what",
named after the row, that does what the row names and asserts the errno a
program gets, then what the row says stays as it was.

Each case says which row it is (`Refusal.row`, words of the row's first
cell) and names each attempt after the operation it makes, first word
first. tests/unit/test_semantics_doc.py reads the table and fails when a
row has no case, a case no row, the errno differs, or an operation a row
names (`mkdir`, `bind`...) is not attempted.

Some refusals are tested elsewhere too, with more around them
(test_fs_semantics.py, test_readonly.py, test_path_rules.py,
test_ownership.py, tests/system/test_review.py): here they are tested
together, row by row.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import socket
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from memfs.api import MAX_CONTENT_BYTES, MAX_MEMORIES
from memfs.testing import FakeStore
from tests.mount.test_ownership import as_user
from tests.support.faults import FaultProxyProcess
from tests.support.mounts import Mounter

MARKER = ".anthropic-memory-store"
NOBODY = 65534
SYSTEM_PYTHON = "/usr/bin/python3"

Attempt = Callable[[Path], object]
"""One operation in a mount (given its path): it raises the OSError a program gets."""
Check = Callable[[Path, FakeStore], None]
"""What the row says holds once its operations were refused."""
MountedStore = Callable[[Mounter, FakeStore], contextlib.AbstractContextManager[Path]]


@contextlib.contextmanager
def read_write(mounter: Mounter, store: FakeStore) -> Iterator[Path]:
    mnt = mounter.mount_one(store.store_id)
    yield mnt
    mounter.unmount(mnt, check=False)


@contextlib.contextmanager
def read_only(mounter: Mounter, store: FakeStore) -> Iterator[Path]:
    mnt = mounter.mount_one(store.store_id, read_only=True)
    yield mnt
    mounter.unmount(mnt)


@contextlib.contextmanager
def for_other_users(mounter: Mounter, store: FakeStore) -> Iterator[Path]:
    """Mounted with `--allow-other`: the one way another user reaches a mount."""
    if os.geteuid() != 0 or not os.path.exists(SYSTEM_PYTHON):
        pytest.skip("needs root (to mount for other users and switch to them) and /usr/bin/python3")
    mnt = mounter.mount_one(store.store_id, extra=("--allow-other",))
    os.chmod(mnt, 0o755)
    os.chown(mnt / "theirs.md", NOBODY, NOBODY)
    yield mnt
    mounter.unmount(mnt)


@contextlib.contextmanager
def store_unreachable_for_contents(mounter: Mounter, store: FakeStore) -> Iterator[Path]:
    """Mounted through a fault proxy that drops every request for a content
    (the store's full view): the tree is listed, no content ever arrives."""
    with FaultProxyProcess(store.url) as proxy:
        proxy.set(match_path="view=full", drop_rate=1.0)
        mnt = mounter.mount_one(store.store_id, extra=("--api-url", proxy.url))
        yield mnt
        proxy.reset()
        mounter.unmount(mnt, check=False)


@dataclass(frozen=True)
class Refusal:
    """The case of one row: the store it starts from, how it is mounted, the
    operations the row refuses, and what must hold after them."""

    row: str
    """Words of the row's first cell in docs/semantics.md that name it, and no other row."""
    errno: int
    attempts: dict[str, Attempt]
    """Each operation the row names, named after it (its first word), in the order made."""
    memories: dict[str, str] = field(default_factory=dict)
    """What the store holds before it is mounted."""
    mounted: MountedStore = read_write
    then: Check | None = None


def _errno_of(attempt: Attempt, mnt: Path) -> int:
    """The errno the attempt failed with (0: it did not fail)."""
    try:
        attempt(mnt)
    except OSError as e:
        return e.errno
    return 0


def _fd_op(name: str, flags: int, op: Callable[[int], object] = lambda fd: None) -> Attempt:
    """Open `name` in the mount with `flags`, then `op` on the descriptor."""

    def attempt(mnt: Path) -> None:
        fd = os.open(mnt / name, flags)
        try:
            op(fd)
        finally:
            os.close(fd)

    return attempt


def _in(mnt: Path, name: bytes) -> bytes:
    return os.fsencode(mnt) + b"/" + name


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_RENAME_WHITEOUT = 4


def _renameat2(old: str, new: str, flags: int) -> Attempt:
    def attempt(mnt: Path) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        old_path, new_path = _in(mnt, old.encode()), _in(mnt, new.encode())
        if libc.renameat2(_AT_FDCWD, old_path, _AT_FDCWD, new_path, flags):
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))

    return attempt


def _as_nobody(code: str) -> Attempt:
    """`code` (Python, `os` imported) run as user nobody in the mount."""

    def attempt(mnt: Path) -> None:
        said = as_user(NOBODY, mnt, code + "\nprint('done')")
        if said != "done":
            raise OSError(getattr(errno, said), said)

    return attempt


def _unchanged(memories: dict[str, str], *, listed: list[str] | None = None) -> Check:
    """Each file still holds what it held; the root lists `listed` when given."""

    def check(mnt: Path, store: FakeStore) -> None:
        for path, content in memories.items():
            assert (mnt / path.lstrip("/")).read_text() == content, path
        if listed is not None:
            assert sorted(os.listdir(mnt)) == sorted([MARKER, *listed])

    return check


# ---- the rows ---------------------------------------------------------------------------

SEEDED = {"/a.md": "alpha", "/dir/sub/b.md": "bravo"}

READ_ONLY = Refusal(
    row="any change to a read-only store",
    errno=errno.EROFS,
    memories=SEEDED,
    mounted=read_only,
    attempts={
        "write an existing file": _fd_op("a.md", os.O_WRONLY),
        "write at its end (O_APPEND)": _fd_op("a.md", os.O_WRONLY | os.O_APPEND),
        "create a new file": _fd_op("new.md", os.O_WRONLY | os.O_CREAT),
        "mkdir": lambda mnt: os.mkdir(mnt / "newdir"),
        "rm a file": lambda mnt: os.unlink(mnt / "a.md"),
        "rm a folder (rmdir)": lambda mnt: os.rmdir(mnt / "dir" / "sub"),
        "mv": lambda mnt: os.rename(mnt / "a.md", mnt / "dir" / "a.md"),
        "truncate": lambda mnt: os.truncate(mnt / "a.md", 0),
        "truncate at open (O_TRUNC)": _fd_op("a.md", os.O_RDONLY | os.O_TRUNC),
        "touch": lambda mnt: os.utime(mnt / "a.md"),
        "chmod": lambda mnt: os.chmod(mnt / "a.md", 0o600),
        "chown": lambda mnt: os.chown(mnt / "a.md", 1000, -1),
        "utimensat with times": lambda mnt: os.utime(mnt / "a.md", ns=(10**9, 10**9)),
        "symlink": lambda mnt: os.symlink("a.md", mnt / "link"),
        "link": lambda mnt: os.link(mnt / "a.md", mnt / "hard"),
        "mkfifo": lambda mnt: os.mkfifo(mnt / "fifo"),
    },
    then=_unchanged(SEEDED, listed=["a.md", "dir"]),
)

FULL = "x" * MAX_CONTENT_BYTES


def _write_all(fd: int, size: int) -> None:
    """Write `size` bytes (the kernel may split one write: the rest is written after)."""
    done = 0
    while done < size:
        done += os.write(fd, b"z" * (size - done))


def _refused_writes_left_nothing(mnt: Path, store: FakeStore) -> None:
    assert (mnt / "full.md").read_text() == FULL
    assert (mnt / "new.md").stat().st_size <= MAX_CONTENT_BYTES  # a split write's first part


TOO_LARGE = Refusal(
    row="a content past 102,400 bytes",
    errno=errno.EFBIG,
    memories={"/full.md": FULL},
    attempts={
        "write one byte more": _fd_op(
            "full.md", os.O_WRONLY | os.O_APPEND, lambda fd: os.write(fd, b"y")
        ),
        "write past the limit from the start": _fd_op(
            "new.md",
            os.O_WRONLY | os.O_CREAT,
            lambda fd: _write_all(fd, MAX_CONTENT_BYTES + 1),
        ),
        "truncate up": lambda mnt: os.truncate(mnt / "full.md", MAX_CONTENT_BYTES + 1),
    },
    then=_refused_writes_left_nothing,
)

LONG_DIRS = "/".join(["d" * 250] * 4)
"""Four folders of 250-byte names: a path of 1,004 bytes from the root."""
DEEP_DIRS = "/".join(["d"] * 19)
"""19 folders: the deepest a folder may be."""

NAME_TOO_LONG = Refusal(
    row="a name over 255 bytes, a path over 1,024 bytes or deeper than 20 names",
    errno=errno.ENAMETOOLONG,
    memories={
        "/a.md": "alpha",
        f"/{LONG_DIRS}/{'f' * 19}": "a path of 1,024 bytes",
        f"/{DEEP_DIRS}/twentieth.md": "20 names",
        "/e/keep.md": "a folder to move into",
    },
    attempts={
        "open a name over 255 bytes": _fd_op("n" * 256, os.O_WRONLY | os.O_CREAT),
        "mkdir a name over 255 bytes": lambda mnt: os.mkdir(mnt / ("n" * 256)),
        "rename to a name over 255 bytes": lambda mnt: os.rename(mnt / "a.md", mnt / ("n" * 256)),
        "open a path over 1,024 bytes": _fd_op(
            os.path.join(LONG_DIRS, "f" * 20), os.O_WRONLY | os.O_CREAT
        ),
        "mkdir a path over 1,024 bytes": lambda mnt: os.mkdir(mnt / LONG_DIRS / ("f" * 20)),
        "rename to a path over 1,024 bytes": lambda mnt: os.rename(
            mnt / "a.md", mnt / LONG_DIRS / ("f" * 20)
        ),
        "mkdir a folder 20 names deep": lambda mnt: os.mkdir(mnt / DEEP_DIRS / "d"),
        "rename a folder where a path under it would pass 1,024 bytes": lambda mnt: os.rename(
            mnt / ("d" * 250), mnt / ("e" * 251)
        ),
        "rename a folder where a file under it would be 21 names deep": lambda mnt: os.rename(
            mnt / "d", mnt / "e" / "d"
        ),
    },
    then=_unchanged(
        {
            "/a.md": "alpha",
            f"/{LONG_DIRS}/{'f' * 19}": "a path of 1,024 bytes",
            f"/{DEEP_DIRS}/twentieth.md": "20 names",
        }
    ),
)

BAD_NAMES = {
    "a tab": b"tab\there.md",
    "a control character": b"bell\x07.md",
    "a zero-width space": "zero\u200bwidth.md".encode(),
    "a bidi mark": "right\u200fto-left.md".encode(),
    "a bidi override": "over\u202eride.md".encode(),
    "a line separator": "line\u2028separator.md".encode(),
    "a paragraph separator": "paragraph\u2029separator.md".encode(),
    "a name not in NFC": "cafe\u0301.md".encode(),
    "bytes that are not UTF-8": b"bad\xff.md",
}

NAME_NOT_ALLOWED = Refusal(
    row="a name with a control or format character",
    errno=errno.EINVAL,
    memories={"/a.md": "alpha"},
    attempts={
        **{
            f"open a name with {what}": (
                lambda mnt, n=name: os.close(os.open(_in(mnt, n), os.O_WRONLY | os.O_CREAT))
            )
            for what, name in BAD_NAMES.items()
        },
        **{
            f"mkdir a name with {what}": (lambda mnt, n=name: os.mkdir(_in(mnt, n)))
            for what, name in BAD_NAMES.items()
        },
        **{
            f"rename to a name with {what}": (
                lambda mnt, n=name: os.rename(_in(mnt, b"a.md"), _in(mnt, n))
            )
            for what, name in BAD_NAMES.items()
        },
    },
    then=_unchanged({"/a.md": "alpha"}, listed=["a.md"]),
)

NOT_ONE_MOVE = Refusal(
    row="`rename` with `RENAME_EXCHANGE` or `RENAME_WHITEOUT`",
    errno=errno.EINVAL,
    memories={"/a.md": "alpha", "/b.md": "bravo", "/dir/sub/c.md": "charlie"},
    attempts={
        "rename with RENAME_EXCHANGE": _renameat2("a.md", "b.md", _RENAME_EXCHANGE),
        "rename with RENAME_WHITEOUT": _renameat2("a.md", "new.md", _RENAME_WHITEOUT),
        "rename a folder into itself": lambda mnt: os.rename(
            mnt / "dir", mnt / "dir" / "sub" / "dir"
        ),
    },
    then=_unchanged({"/a.md": "alpha", "/b.md": "bravo", "/dir/sub/c.md": "charlie"}),
)


def _bind_a_socket(mnt: Path) -> None:
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(mnt / "sock"))


NOT_A_REGULAR_FILE = Refusal(
    row="symlinks, hard links, device nodes, FIFOs, sockets",
    errno=errno.EPERM,
    memories={"/a.md": "alpha"},
    attempts={
        "symlink": lambda mnt: os.symlink("a.md", mnt / "link"),
        "link": lambda mnt: os.link(mnt / "a.md", mnt / "hard"),
        "mknod a device": lambda mnt: os.mknod(mnt / "dev", 0o600 | stat.S_IFCHR, os.makedev(1, 3)),
        "mkfifo": lambda mnt: os.mkfifo(mnt / "fifo"),
        "bind a UNIX socket": _bind_a_socket,
    },
    then=_unchanged({"/a.md": "alpha"}, listed=["a.md"]),
)


def _fallocate(keep_size: bool) -> Attempt:
    """fallocate(2) itself: Python's `posix_fallocate` falls back to writing zeros."""

    def attempt(mnt: Path) -> None:
        fd = os.open(mnt / "a.md", os.O_RDWR)
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            size, mode = ctypes.c_long(4096), 1 if keep_size else 0  # FALLOC_FL_KEEP_SIZE
            if libc.fallocate(fd, mode, ctypes.c_long(0), size):
                code = ctypes.get_errno()
                raise OSError(code, os.strerror(code))
        finally:
            os.close(fd)

    return attempt


NO_FALLOCATE = Refusal(
    row="`fallocate` (`fallocate(1)`",
    errno=errno.EOPNOTSUPP,
    memories={"/a.md": "alpha"},
    attempts={"fallocate": _fallocate(False), "fallocate keeping the size": _fallocate(True)},
    then=_unchanged({"/a.md": "alpha"}, listed=["a.md"]),
)


def _owners_unchanged(mnt: Path, store: FakeStore) -> None:
    owners = (os.stat(mnt / "theirs.md").st_uid, os.stat(mnt / "roots.md").st_uid)
    assert owners == (NOBODY, 0)
    assert os.stat(mnt / "theirs.md").st_gid == NOBODY


CHOWN_NOT_PERMITTED = Refusal(
    row="`chown` by a user who is not root",
    errno=errno.EPERM,
    memories={"/theirs.md": "nobody's", "/roots.md": "root's"},
    mounted=for_other_users,
    attempts={
        "chown one's own file to another owner": _as_nobody("os.chown('theirs.md', 0, -1)"),
        "chown one's own file to a group one is not in": _as_nobody("os.chown('theirs.md', -1, 0)"),
        "chown another's file": _as_nobody(f"os.chown('roots.md', {NOBODY}, -1)"),
    },
    then=_owners_unchanged,
)


def _marker_unchanged(mnt: Path, store: FakeStore) -> None:
    assert (mnt / MARKER).read_text() == f"version 1\n{store.store_id}"
    assert stat.S_IMODE((mnt / MARKER).stat().st_mode) == 0o444
    assert (mnt / "a.md").read_text() == "alpha"


MARKER_REFUSALS = Refusal(
    row="writing, renaming, removing or `chmod` of `.anthropic-memory-store`",
    errno=errno.EPERM,
    memories={"/a.md": "alpha"},
    attempts={
        "write the marker": _fd_op(MARKER, os.O_WRONLY),
        "write at its end (O_APPEND)": _fd_op(MARKER, os.O_WRONLY | os.O_APPEND),
        "rename the marker": lambda mnt: os.rename(mnt / MARKER, mnt / "m"),
        "rename a file over the marker": lambda mnt: os.rename(mnt / "a.md", mnt / MARKER),
        "remove the marker": lambda mnt: os.unlink(mnt / MARKER),
        "chmod the marker": lambda mnt: os.chmod(mnt / MARKER, 0o644),
    },
    then=_marker_unchanged,
)

XATTRS = Refusal(
    row="extended attributes",
    errno=errno.ENOTSUP,
    memories={"/a.md": "alpha"},
    attempts={
        "setxattr": lambda mnt: os.setxattr(mnt / "a.md", "user.k", b"v"),
        "removexattr": lambda mnt: os.removexattr(mnt / "a.md", "user.k"),
    },
)

SYNC_STATE_XATTRS = Refusal(
    row="memfs's sync state attributes",
    errno=errno.EPERM,
    memories={"/a.md": "alpha"},
    attempts={
        "setxattr": lambda mnt: os.setxattr(mnt / "a.md", "user.memfs.state", b"synced"),
        "removexattr": lambda mnt: os.removexattr(mnt / "a.md", "user.memfs.state"),
    },
)

FULL_STORE = {f"/d{i // 100:02}/f{i % 100:02}.md": f"memory {i}" for i in range(MAX_MEMORIES)}


def _create_after_a_delete(mnt: Path) -> None:
    os.unlink(mnt / "d00" / "f00.md")  # 1,999 files and a pending delete: still full
    _fd_op("other.md", os.O_WRONLY | os.O_CREAT)(mnt)


def _store_cap_holds(mnt: Path, store: FakeStore) -> None:
    os.rename(mnt / "d01" / "f01.md", mnt / "renamed.md")  # renames still work
    (mnt / "d00" / "f00.md").write_text("takes the pending delete's place")
    assert len(list(mnt.glob("d*/*.md"))) + 1 == MAX_MEMORIES
    assert not (mnt / "new.md").exists() and not (mnt / "other.md").exists()


STORE_CAP = Refusal(
    row="a new file once the files here and the pending deletes reach the store's 2,000",
    errno=errno.ENOSPC,
    memories=FULL_STORE,
    attempts={
        "create a new file": _fd_op("new.md", os.O_WRONLY | os.O_CREAT),
        "create a new file while a delete is pending": _create_after_a_delete,
    },
    then=_store_cap_holds,
)


def _cached_files_go_on(mnt: Path, store: FakeStore) -> None:
    assert (mnt / "a.md").stat().st_size == len("stored a")  # stat and listings work
    assert sorted(os.listdir(mnt)) == [MARKER, "a.md", "b.md", "c.md", "d.md"]
    (mnt / "here.md").write_text("written here")  # a new file's content is here
    assert (mnt / "here.md").read_text() == "written here"
    fd = os.open(mnt / "d.md", os.O_WRONLY | os.O_TRUNC)  # emptied: nothing to fetch
    os.close(fd)
    assert (mnt / "d.md").read_text() == ""


CONTENT_UNREACHABLE = Refusal(
    row="`open` of a file whose content is not cached yet while the store cannot be reached",
    errno=errno.EIO,
    memories={"/a.md": "stored a", "/b.md": "stored b", "/c.md": "stored c", "/d.md": "d"},
    mounted=store_unreachable_for_contents,
    attempts={
        "open to read": lambda mnt: (mnt / "a.md").read_text(),
        "open to write at its end (O_APPEND)": _fd_op("b.md", os.O_WRONLY | os.O_APPEND),
        "truncate to a size above 0": lambda mnt: os.truncate(mnt / "c.md", 3),
    },
    then=_cached_files_go_on,
)


REFUSALS: dict[str, Refusal] = {
    "read-only-store": READ_ONLY,
    "content-too-large": TOO_LARGE,
    "name-too-long": NAME_TOO_LONG,
    "name-not-allowed": NAME_NOT_ALLOWED,
    "not-one-move": NOT_ONE_MOVE,
    "not-a-regular-file": NOT_A_REGULAR_FILE,
    "no-fallocate": NO_FALLOCATE,
    "chown-not-permitted": CHOWN_NOT_PERMITTED,
    "marker": MARKER_REFUSALS,
    "xattrs": XATTRS,
    "sync-state-xattrs": SYNC_STATE_XATTRS,
    "store-cap": STORE_CAP,
    "content-unreachable": CONTENT_UNREACHABLE,
}
"""One case per row of the table, in its order, by the name the test shows."""


@pytest.mark.parametrize(
    "refusal",
    [
        pytest.param(r, id=name, marks=[pytest.mark.slow] if r is STORE_CAP else [])
        for name, r in REFUSALS.items()
    ],
)
def test_each_refusal_semantics_md_lists_has_its_errno(refusal: Refusal, mounter, memfs_server):
    store = FakeStore(memfs_server, memfs_server.create_store("refusals")["id"])
    store.seed(refusal.memories)
    with refusal.mounted(mounter, store) as mnt:
        got = {what: _errno_of(attempt, mnt) for what, attempt in refusal.attempts.items()}
        expected = {what: refusal.errno for what in refusal.attempts}
        assert got == expected, {
            what: errno.errorcode.get(code, code)
            for what, code in got.items()
            if code != refusal.errno
        }
        if refusal.then is not None:
            refusal.then(mnt, store)
