"""The journal's SQLite file: its schema, a node's row, opening it. A journal
of another `user_version` is refused with one sentence (`CacheLayoutRefused`);
one process owns it (exclusive locking; a second gets `CacheInUse`), and it
is opened through its folder's checked descriptor, never through a symlink.
"""

from __future__ import annotations

import contextlib
import operator
import os
import sqlite3
import stat
import time
from collections.abc import Callable
from typing import Any

from .._exceptions import CacheCorrupt, CacheInUse, CacheLayoutRefused
from .._private import open_file_at
from ._node import ROOT_ID, Node, NodeKind

SCHEMA_VERSION = 10
"""The one layout of the journal: any other was made by no release."""

SCHEMA = f"""
BEGIN;
CREATE TABLE nodes (
    id INTEGER PRIMARY KEY,
    parent INTEGER NOT NULL,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    mode INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    ctime_ns INTEGER NOT NULL,
    size INTEGER NOT NULL DEFAULT 0,
    memory_id TEXT,
    base_sha TEXT,
    base_path TEXT,
    edited INTEGER NOT NULL DEFAULT 0,
    pending INTEGER NOT NULL DEFAULT 0,
    cached INTEGER NOT NULL DEFAULT 0,
    made_here INTEGER NOT NULL DEFAULT 0,
    refused_sha TEXT,
    refused_reason TEXT,
    too_large INTEGER NOT NULL DEFAULT 0,
    uid INTEGER,
    gid INTEGER,
    atime_ns INTEGER,
    kept_copy TEXT,
    deleted_at REAL
);
CREATE TABLE uploads (
    node_id INTEGER PRIMARY KEY,
    memory_id TEXT,
    path TEXT NOT NULL,
    sha TEXT NOT NULL
);
CREATE TABLE meta (
    key TEXT PRIMARY KEY,
    value TEXT
) WITHOUT ROWID;
CREATE TABLE durable (
    node_id INTEGER PRIMARY KEY,
    content BLOB NOT NULL,
    mtime_ns INTEGER NOT NULL
);
PRAGMA user_version = {SCHEMA_VERSION};
COMMIT;
"""
"""A row with `deleted_at` is a pending delete (memory_id, base_path, base_sha), most often
the deleted file's own. No index but the keys (the tree in memory keeps names unique), no
AUTOINCREMENT (`Journal.new_id` keeps ids unused): a change writes few pages."""

WAL_PAGES = 4000
"""Pages of WAL a change checkpoints past (the idle pass most often does it
first): the WAL stays within the blocks it was given ahead, so that the
flush of a durable `fsync` overwrites blocks and never allocates any."""
PAGE_CACHE_KIB = 512

NODE_FIELDS = (
    "parent", "name", "kind", "mode", "mtime_ns", "ctime_ns", "size", "memory_id", "base_sha",
    "base_path", "edited", "pending", "cached", "made_here", "refused_sha", "refused_reason",
    "too_large", "uid", "gid", "atime_ns", "kept_copy",
)  # fmt: skip
"""Every persisted field of a node but its id, each in the column of its name."""
_FROM_ROW: dict[str, Callable[[Any], Any]] = {
    "kind": NodeKind,
    **{f: bool for f in ("edited", "pending", "cached", "made_here", "too_large")},
}

_COLUMNS = ", ".join(NODE_FIELDS)
SELECT_NODES = f"SELECT id, {_COLUMNS} FROM nodes WHERE deleted_at IS NULL ORDER BY id"
INSERT_NODE = f"INSERT INTO nodes (id, {_COLUMNS}) VALUES (?{', ?' * len(NODE_FIELDS)})"
UPDATE_NODE = (
    f"UPDATE nodes SET {', '.join(f + '=?' for f in NODE_FIELDS)} WHERE id=? AND deleted_at IS NULL"
)
_attributes = operator.attrgetter(*NODE_FIELDS)


def row_values(node: Node) -> tuple[Any, ...]:
    v = _attributes(node)
    return (*v[:2], str(v[2]), *v[3:])


def node_of(row: tuple[Any, ...]) -> Node:
    values = dict(zip(NODE_FIELDS, row[1:], strict=True))
    return Node(
        id=row[0], **{f: _FROM_ROW[f](v) if f in _FROM_ROW else v for f, v in values.items()}
    )


def _own_file(folder_fd: int, name: str, folder: str) -> None:
    """Refuse an entry memfs would open that is not a file of its own: SQLite
    follows symlinks."""
    try:
        st = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
        raise CacheCorrupt(
            f"cannot open the cache at {folder}: {name} is not a file of memfs's own"
        )


def _connect(folder_fd: int, name: str, folder: str) -> sqlite3.Connection:
    """The database `name`, made 0600 here, opened by SQLite through the folder's
    descriptor (`/proc/self/fd/N/name`)."""
    for entry in (name, name + "-wal", name + "-journal", name + "-shm"):
        _own_file(folder_fd, entry, folder)
    with open(open_file_at(folder_fd, name, os.O_RDWR | os.O_CREAT), "rb") as f:
        if f.read(16) not in (b"", b"SQLite format 3\x00"):  # SQLite would rewrite it at close
            raise CacheCorrupt(f"cannot open the cache at {folder}: file is not a database")
    through = f"/proc/self/fd/{folder_fd}"
    where = os.path.join(through if os.path.isdir(through) else folder, name)
    # timeout 0: a journal held by another process is refused at once (CacheInUse).
    return sqlite3.connect(where, isolation_level=None, check_same_thread=False, timeout=0)


def _is_new(db: sqlite3.Connection, folder: str) -> bool:
    """Whether the journal is new; another layout is refused before any write."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version == SCHEMA_VERSION:
        return False
    if version == 0 and db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0:
        return True
    raise CacheLayoutRefused(
        f"the cache at {folder} was made by a development version of memfs "
        f"(layout {version}, this one reads {SCHEMA_VERSION}); move it aside "
        "(it holds no release's data) and mount again"
    )


def _ensure_root(db: sqlite3.Connection) -> None:
    if db.execute("SELECT 1 FROM nodes WHERE id = ?", (ROOT_ID,)).fetchone() is None:
        db.execute(
            "INSERT INTO nodes (id, parent, name, kind, mode, mtime_ns, ctime_ns, made_here) "
            "VALUES (?, 0, '', 'dir', ?, ?, ?, 1)",
            (ROOT_ID, 0o755, time.time_ns(), time.time_ns()),
        )


WAL_FILLED = (WAL_PAGES + 24) * 4096
"""Bytes of zeros an empty WAL gets, so that commits overwrite blocks it has."""


def _fill_wal(folder_fd: int, name: str) -> None:
    """Give an empty or missing WAL its blocks, flushed (SQLite reads zeros as empty)."""
    with contextlib.suppress(FileNotFoundError):
        if os.stat(name, dir_fd=folder_fd, follow_symlinks=False).st_size:
            return
    room = os.fstatvfs(folder_fd)
    if room.f_bavail * room.f_frsize < 4 * WAL_FILLED:
        return  # a disk near full keeps its room for the contents: the WAL grows as it goes
    with contextlib.suppress(OSError):  # a full disk: the WAL grows as it goes
        fd = open_file_at(folder_fd, name, os.O_WRONLY | os.O_CREAT)
        try:
            # A page a write: the page cache keeps a larger write in a larger folio,
            # which a commit's few bytes would then dirty (and write back) whole.
            for at in range(0, WAL_FILLED, 4096):
                os.pwrite(fd, bytes(4096), at)
            os.fdatasync(fd)
        finally:
            os.close(fd)


def open_journal_file(folder_fd: int, path: str, *, store_id: str) -> sqlite3.Connection:
    """The journal at `path`, with its root; `CacheInUse`, `CacheLayoutRefused`
    or `CacheCorrupt` when it cannot be opened."""
    folder, name = os.path.split(path)
    db: sqlite3.Connection | None = None
    try:
        db = _connect(folder_fd, name, folder)
        db.execute("PRAGMA locking_mode=EXCLUSIVE")
        new = _is_new(db, folder)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute(f"PRAGMA wal_autocheckpoint={WAL_PAGES}")
        db.execute(f"PRAGMA cache_size=-{PAGE_CACHE_KIB}")
        if new:
            db.executescript(SCHEMA)
        _ensure_root(db)
        # SQLite deletes the WAL of an empty database: it is given its blocks now.
        with contextlib.suppress(sqlite3.Error):  # a full disk: the WAL stays as it is
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        _fill_wal(folder_fd, name + "-wal")
    except BaseException as e:
        if db is not None:
            db.close()
        if isinstance(e, sqlite3.OperationalError) and "locked" in str(e):
            raise CacheInUse(
                f"the cache at {folder} is in use by another memfs process of store {store_id}"
            ) from e
        if isinstance(e, OSError | sqlite3.Error):
            raise CacheCorrupt(f"cannot open the cache at {folder}: {e}") from e
        raise
    return db
