"""The journal's SQLite file: its schema, a node's row, opening it.

The schema is made fresh in a new cache folder and versioned with `PRAGMA
user_version`; a journal of another version is refused with one sentence
(`CacheLayoutRefused`): no release wrote one, so it holds nothing to keep. A node's
columns are listed once (`NODE_FIELDS`), each named as the attribute it
keeps: rows, inserts and updates are all made from that list.

One process owns a store's journal (exclusive locking: no file locks per
transaction); a second one is refused with `CacheInUse`. The file is opened
through the checked descriptor of its folder, never through a symlink.
"""

from __future__ import annotations

import operator
import os
import sqlite3
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._exceptions import CacheCorrupt, CacheInUse, CacheLayoutRefused
from .._private import open_file_at
from ._node import FIRST_NODE_ID, ROOT_ID, Node, NodeKind

SCHEMA_VERSION = 8
"""The one layout of the journal (`PRAGMA user_version`): a journal of any
other was made by a memfs that no release was, and is refused."""

SCHEMA = f"""
BEGIN;
CREATE TABLE nodes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
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
    UNIQUE (parent, name)
);
CREATE TABLE tombstones (
    memory_id TEXT PRIMARY KEY,
    path TEXT NOT NULL,
    base_sha TEXT NOT NULL,
    deleted_at REAL NOT NULL
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
);
PRAGMA user_version = {SCHEMA_VERSION};
COMMIT;
"""
"""The journal's tables, made at once in a new cache folder. `uid`, `gid`: the
owner kept locally (NULL: the mount's default); `atime_ns`: an access time
set by utimensat (NULL: the modification time)."""

WAL_PAGES = 1000
"""The WAL is checkpointed at this many pages (SQLite's default)."""

PAGE_CACHE_KIB = 512
"""SQLite's page cache of the journal, in KiB (its default is 2,000): the rows
are read once per open, and the kernel's page cache holds them too."""

LOG_ID = "redo_log_id"
LOG_APPLIED = "redo_log_applied"
LOG_FILLED = "redo_log_filled"
"""Meta keys: the redo log's id, the last record applied, whether its space is written."""


@dataclass(frozen=True)
class Field:
    """One persisted attribute of a `Node`, kept in the column of its name."""

    name: str
    from_row: Callable[[Any], Any] = lambda v: v
    """Values go to SQLite as they are (a StrEnum is text, a bool an integer)."""


NODE_FIELDS: tuple[Field, ...] = (
    Field("parent"),
    Field("name"),
    Field("kind", NodeKind),
    Field("mode"),
    Field("mtime_ns"),
    Field("ctime_ns"),
    Field("size"),
    Field("memory_id"),
    Field("base_sha"),
    Field("base_path"),
    Field("edited", bool),
    Field("pending", bool),
    Field("cached", bool),
    Field("made_here", bool),
    Field("refused_sha"),
    Field("refused_reason"),
    Field("too_large", bool),
    Field("uid"),
    Field("gid"),
    Field("atime_ns"),
    Field("kept_copy"),
)
"""Every persisted field of a node but its id, in column order."""

_COLUMNS = ", ".join(f.name for f in NODE_FIELDS)
SELECT_NODES = f"SELECT id, {_COLUMNS} FROM nodes ORDER BY id"
INSERT_NODE = (
    f"INSERT INTO nodes (id, {_COLUMNS}) VALUES (?, {', '.join('?' for _ in NODE_FIELDS)})"
)
UPDATE_NODE = f"UPDATE nodes SET {', '.join(f.name + '=?' for f in NODE_FIELDS)} WHERE id=?"
_IN_PLACE = NODE_FIELDS[2:]
assert [f.name for f in NODE_FIELDS[:2]] == ["parent", "name"]
UPDATE_NODE_IN_PLACE = f"UPDATE nodes SET {', '.join(f.name + '=?' for f in _IN_PLACE)} WHERE id=?"
"""A row whose name did not change: its (parent, name) index entry is left alone."""

_KIND = 2
assert NODE_FIELDS[_KIND].name == "kind" and _IN_PLACE[0].name == "kind"
_attributes = operator.attrgetter(*(f.name for f in NODE_FIELDS))
_in_place = operator.attrgetter(*(f.name for f in _IN_PLACE[1:]), "id")


def row_values(node: Node) -> tuple[Any, ...]:
    """A node's column values (`NODE_FIELDS`), as plain values the redo log can hold."""
    v = _attributes(node)
    return (*v[:_KIND], str(v[_KIND]), *v[_KIND + 1 :])


def row_values_in_place(node: Node) -> tuple[Any, ...]:
    """The values of `UPDATE_NODE_IN_PLACE`: the columns after the name, then the id."""
    return (str(node.kind), *_in_place(node))


def node_of(row: tuple[Any, ...]) -> Node:
    """The node a row of `SELECT_NODES` holds."""
    values = {f.name: f.from_row(v) for f, v in zip(NODE_FIELDS, row[1:], strict=True)}
    return Node(id=row[0], **values)


def _own_file(folder_fd: int, name: str, folder: str) -> None:
    """Refuse an entry of the cache folder that memfs would open and that is not
    a file of its own (a symlink, a folder): SQLite follows symlinks."""
    try:
        st = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
        raise CacheCorrupt(
            f"cannot open the cache at {folder}: {name} is not a file of memfs's own"
        )


def _connect(folder_fd: int, name: str, folder: str) -> sqlite3.Connection:
    """The database `name` of the checked folder `folder_fd`: made 0600 here
    (never through a symlink), then opened by SQLite through the folder's
    descriptor (`/proc/self/fd/N/name`, which SQLite resolves to the folder
    the descriptor holds, wherever it is now)."""
    for entry in (name, name + "-wal", name + "-journal", name + "-shm", name + "-redo"):
        _own_file(folder_fd, entry, folder)
    os.close(open_file_at(folder_fd, name, os.O_RDWR | os.O_CREAT))
    through = f"/proc/self/fd/{folder_fd}"
    where = os.path.join(through if os.path.isdir(through) else folder, name)
    # timeout 0: a journal held by another process is refused at once (CacheInUse).
    return sqlite3.connect(where, isolation_level=None, check_same_thread=False, timeout=0)


def _is_new(db: sqlite3.Connection, folder: str) -> bool:
    """Whether the journal is new (its tables are still to be made); a journal of
    another layout is refused before anything is written to it."""
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
        db.execute("UPDATE sqlite_sequence SET seq = ? WHERE name = 'nodes'", (FIRST_NODE_ID - 1,))


def open_journal_file(folder_fd: int, path: str, *, store_id: str) -> sqlite3.Connection:
    """The journal at `path` (in the folder `folder_fd` holds), with its root;
    `CacheInUse` when another process holds it, `CacheLayoutRefused` when it
    has another layout, `CacheCorrupt` when it cannot be opened."""
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
