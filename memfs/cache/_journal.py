"""The journal of one store: an SQLite file (WAL) under the store's cache folder.

It keeps every node's row, the pending deletes, the uploads in flight and a
little metadata (the feed position, the mount folder memfs made). The schema
is versioned with `PRAGMA user_version`; each migration runs once, in its own
transaction. A node's columns are listed once (`NODE_FIELDS`): rows, inserts
and updates are all made from that list.

One process owns a store's journal (exclusive locking: no file locks per
transaction); a second one is refused with `CacheInUse`.

Files' contents live here too (the `contents` table, one row per cached
file, at most `MAX_CONTENT_BYTES` each): a write is one UPDATE, a new file
one INSERT, a deleted one a DELETE, none of which asks the filesystem for an
inode (creating a file costs some ext4 disks 0.1-0.9 ms, a commit ~20 µs).

Durability: commits reach the WAL file at once (synchronous=NORMAL), which a
SIGKILL cannot undo; `make_durable` flushes the WAL (one `fdatasync`) for
power loss, and so makes a file's content and its row durable together.
"""

from __future__ import annotations

import contextlib
import operator
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from .._exceptions import CacheCorrupt, CacheDiskFull, CacheInUse
from ._node import FIRST_NODE_ID, ROOT_ID, Node, NodeKind, Tombstone, Upload

SCHEMA = """
CREATE TABLE IF NOT EXISTS nodes (
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
    dirty INTEGER NOT NULL DEFAULT 0,
    changed INTEGER NOT NULL DEFAULT 0,
    cached INTEGER NOT NULL DEFAULT 0,
    local_dir INTEGER NOT NULL DEFAULT 0,
    refused_sha TEXT,
    refused_reason TEXT,
    UNIQUE (parent, name)
);
DROP INDEX IF EXISTS nodes_changed;
CREATE TABLE IF NOT EXISTS tombstones (
    memory_id TEXT PRIMARY KEY,
    path TEXT NOT NULL,
    base_sha TEXT NOT NULL,
    deleted_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT
);
"""
"""The schema of user_version 0, as the first journals were made."""

MIGRATIONS: list[str] = [
    # 1: a refused EFBIG write is remembered; uploads in flight are recorded.
    """
    ALTER TABLE nodes ADD COLUMN too_large INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE uploads (
        node_id INTEGER PRIMARY KEY,
        memory_id TEXT,
        path TEXT NOT NULL,
        sha TEXT NOT NULL
    );
    """,
    # 2: owners are kept locally (chown, or the creator); NULL: the mount's default.
    # An access time set by utimensat; NULL: the modification time.
    """
    ALTER TABLE nodes ADD COLUMN uid INTEGER;
    ALTER TABLE nodes ADD COLUMN gid INTEGER;
    ALTER TABLE nodes ADD COLUMN atime_ns INTEGER;
    """,
    # 3: fsynced contents carried in the journal, until the content files are durable.
    """
    CREATE TABLE synced (
        node_id INTEGER PRIMARY KEY,
        boot_id TEXT NOT NULL,
        generation INTEGER NOT NULL,
        content BLOB NOT NULL
    );
    CREATE TABLE wal_room (b BLOB);
    """,
    # 4: contents live in the journal; content files of older caches are read
    # in once (memfs/cache/_legacy.py), and the copies of `synced` with them.
    """
    CREATE TABLE contents (
        node_id INTEGER PRIMARY KEY,
        data BLOB NOT NULL
    );
    """,
]
"""Journal migrations: `PRAGMA user_version` counts those applied."""

WAL_PAGES = 1000
"""The WAL is checkpointed at this many pages (SQLite's default), and made that
big once mounted (`grow_wal`), so that the commits `fsync()` flushes overwrite it
in place: flushing a file that does not grow costs this disk a fraction of
flushing one that grows (ext4 then commits its own journal too)."""


@dataclass(frozen=True)
class Field:
    """One persisted attribute of a `Node` and the column that keeps it."""

    attribute: str
    column: str
    from_row: Callable[[Any], Any] = lambda v: v
    """Values go to SQLite as they are (a StrEnum is text, a bool an integer)."""


NODE_FIELDS: tuple[Field, ...] = (
    Field("parent", "parent"),
    Field("name", "name"),
    Field("kind", "kind", NodeKind),
    Field("mode", "mode"),
    Field("mtime_ns", "mtime_ns"),
    Field("ctime_ns", "ctime_ns"),
    Field("size", "size"),
    Field("memory_id", "memory_id"),
    Field("base_sha", "base_sha"),
    Field("base_path", "base_path"),
    Field("edited", "dirty", bool),
    Field("pending", "changed", bool),
    Field("cached", "cached", bool),
    Field("made_here", "local_dir", bool),
    Field("refused_sha", "refused_sha"),
    Field("refused_reason", "refused_reason"),
    Field("too_large", "too_large", bool),
    Field("uid", "uid"),
    Field("gid", "gid"),
    Field("atime_ns", "atime_ns"),
)
"""Every persisted field of a node but its id, in column order."""

_COLUMNS = ", ".join(f.column for f in NODE_FIELDS)
_SELECT = f"SELECT id, {_COLUMNS} FROM nodes ORDER BY id"
_INSERT = f"INSERT INTO nodes ({_COLUMNS}) VALUES ({', '.join('?' for _ in NODE_FIELDS)})"
_UPDATE = f"UPDATE nodes SET {', '.join(f.column + '=?' for f in NODE_FIELDS)} WHERE id=?"
_IN_PLACE = NODE_FIELDS[2:]
assert [f.column for f in NODE_FIELDS[:2]] == ["parent", "name"]
_UPDATE_IN_PLACE = f"UPDATE nodes SET {', '.join(f.column + '=?' for f in _IN_PLACE)} WHERE id=?"
"""A row whose name did not change: its (parent, name) index entry is left alone."""

_values = operator.attrgetter(*(f.attribute for f in NODE_FIELDS))
_values_in_place = operator.attrgetter(*(f.attribute for f in _IN_PLACE), "id")


class Journal:
    """The SQLite journal of one store, at `path`."""

    def __init__(self, path: str, *, store_id: str) -> None:
        self.path = path
        self._durable_changes = -1
        self._wal_fd: int | None = None
        self._checkpointed_changes = 0
        self._names: dict[int, tuple[int, str]] = {}
        """(parent, name) of each row as written, by node id."""
        try:
            # timeout 0: a journal held by another process is refused at once (CacheInUse).
            self.db = sqlite3.connect(
                path, isolation_level=None, check_same_thread=False, timeout=0
            )
            self.db.execute("PRAGMA locking_mode=EXCLUSIVE")
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.execute(f"PRAGMA wal_autocheckpoint={WAL_PAGES}")
            self.db.executescript(SCHEMA)
            self._migrate()
            self._ensure_root()
        except sqlite3.OperationalError as e:
            if "locked" in str(e):
                raise CacheInUse(
                    f"the cache at {os.path.dirname(path)} is in use by another memfs "
                    f"process of store {store_id}"
                ) from e
            raise CacheCorrupt(f"cannot open the cache at {os.path.dirname(path)}: {e}") from e
        except (OSError, sqlite3.Error) as e:
            raise CacheCorrupt(f"cannot open the cache at {os.path.dirname(path)}: {e}") from e

    def _migrate(self) -> None:
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
            self.db.executescript(f"BEGIN; {script}; PRAGMA user_version = {number}; COMMIT;")

    def _ensure_root(self) -> None:
        if self.db.execute("SELECT 1 FROM nodes WHERE id = ?", (ROOT_ID,)).fetchone() is None:
            self.db.execute(
                "INSERT INTO nodes (id, parent, name, kind, mode, mtime_ns, ctime_ns, local_dir) "
                "VALUES (?, 0, '', 'dir', ?, ?, ?, 1)",
                (ROOT_ID, 0o755, time.time_ns(), time.time_ns()),
            )
            self.db.execute(
                "UPDATE sqlite_sequence SET seq = ? WHERE name = 'nodes'", (FIRST_NODE_ID - 1,)
            )

    def close(self) -> None:
        if self._wal_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._wal_fd)
            self._wal_fd = None
        with contextlib.suppress(sqlite3.Error):
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self.db.close()

    def grow_wal(self) -> None:
        """Make the WAL file `WAL_PAGES` pages long, so that the commits `fsync()`
        flushes overwrite it in place: a blob that big is written in a
        transaction that spills it to the WAL and is rolled back (nothing reaches
        the database), then the WAL is flushed once. ~10-20 ms, once per mount,
        at its first idle moment (housekeeping); until then a flush may cost more."""
        pages = WAL_PAGES + 100
        with contextlib.suppress(OSError):
            if os.path.getsize(self.path + "-wal") >= pages * 4096:
                return
        cache_size = self.db.execute("PRAGMA cache_size").fetchone()[0]
        self.db.execute("PRAGMA cache_size=8")
        try:
            self.db.execute("BEGIN")
            try:
                self.db.execute("INSERT INTO wal_room VALUES (zeroblob(?))", (pages * 4096,))
            finally:
                self.db.execute("ROLLBACK")
        finally:
            self.db.execute(f"PRAGMA cache_size={int(cache_size)}")
        self._durable_changes = -1
        self.make_durable()

    @property
    def unsaved_commits(self) -> bool:
        """Something was committed since the last `checkpoint`."""
        return self.db.total_changes != self._checkpointed_changes

    def checkpoint(self) -> None:
        """Copy the WAL into the database now (while the filesystem is idle), so
        that no request pays for it; the WAL keeps its size."""
        self.db.execute("PRAGMA wal_checkpoint(PASSIVE)")
        self._checkpointed_changes = self.db.total_changes

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One commit for everything inside; nested uses join the outer one."""
        if self.db.in_transaction:
            yield
            return
        self.db.execute("BEGIN")
        try:
            with self._disk_full_is_cache_disk_full():
                yield
                self.db.execute("COMMIT")
        except BaseException:
            if self.in_transaction():  # SQLite ends it itself after some errors
                self.db.execute("ROLLBACK")
            self._names.clear()  # which names the rows hold is not known now
            raise

    @contextlib.contextmanager
    def _disk_full_is_cache_disk_full(self) -> Iterator[None]:
        """The one place SQLite's "disk is full" becomes the cache's `CacheDiskFull`."""
        try:
            yield
        except sqlite3.Error as e:
            if e.sqlite_errorcode == sqlite3.SQLITE_FULL:
                raise CacheDiskFull(
                    f"the disk of the cache at {os.path.dirname(self.path)} is full"
                ) from e
            raise

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """One commit for many changes made while nothing else uses the journal
        (the pass before mounting): unlike `transaction`, what ran is committed
        even when an exception ends the batch, since memory already holds it."""
        if self.db.in_transaction:
            yield
            return
        self.db.execute("BEGIN")
        try:
            yield
        finally:
            if self.in_transaction():  # SQLite ends it itself after some errors
                self.db.execute("COMMIT")
            else:
                self._names.clear()

    def in_transaction(self) -> bool:
        return self.db.in_transaction

    def make_durable(self) -> None:
        """Commits reach the WAL file at once (synchronous=NORMAL); one flush of it
        makes them durable, and none is needed when nothing was committed since.
        `fdatasync` is enough: what it leaves out (times) is not needed to read
        the WAL back, and it flushes the size when the file grew."""
        changes = self.db.total_changes
        if changes == self._durable_changes:
            return
        if self._wal_fd is None:
            try:
                self._wal_fd = os.open(self.path + "-wal", os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                return  # nothing was ever written to a WAL: nothing to flush
        os.fdatasync(self._wal_fd)
        self._durable_changes = changes

    # --------------------------------------------------------------- nodes

    def nodes(self) -> Iterator[Node]:
        for row in self.db.execute(_SELECT).fetchall():
            values = {f.attribute: f.from_row(v) for f, v in zip(NODE_FIELDS, row[1:], strict=True)}
            self._names[row[0]] = (values["parent"], values["name"])
            yield Node(id=row[0], **values)

    def insert(self, node: Node) -> int:
        """Insert a new node's row; returns its id."""
        cur = self.db.execute(_INSERT, _values(node))
        assert cur.lastrowid is not None
        self._names[cur.lastrowid] = (node.parent, node.name)
        return cur.lastrowid

    def save(self, node: Node) -> None:
        """Write a node's row (leaving its name's index entry alone when the name
        is the one the row holds)."""
        name = (node.parent, node.name)
        if self._names.get(node.id) == name:
            self.db.execute(_UPDATE_IN_PLACE, _values_in_place(node))
        else:
            self.db.execute(_UPDATE, (*_values(node), node.id))
            self._names[node.id] = name

    def delete(self, node_id: int) -> None:
        self.db.execute("DELETE FROM nodes WHERE id = ?", (node_id,))
        self._names.pop(node_id, None)

    # ---------------------------------------------------------- tombstones

    def tombstones(self) -> Iterator[Tombstone]:
        for row in self.db.execute("SELECT memory_id, path, base_sha, deleted_at FROM tombstones"):
            yield Tombstone(*row)

    def add_tombstone(self, stone: Tombstone) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO tombstones (memory_id, path, base_sha, deleted_at) "
            "VALUES (?, ?, ?, ?)",
            (stone.memory_id, stone.path, stone.base_sha, stone.deleted_at),
        )

    def drop_tombstone(self, memory_id: str) -> None:
        self.db.execute("DELETE FROM tombstones WHERE memory_id = ?", (memory_id,))

    # ------------------------------------------------------------- uploads

    def record_upload(self, upload: Upload) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO uploads (node_id, memory_id, path, sha) VALUES (?, ?, ?, ?)",
            (upload.node_id, upload.memory_id, upload.path, upload.sha),
        )

    def upload_answered(self, node_id: int) -> None:
        self.db.execute("DELETE FROM uploads WHERE node_id = ?", (node_id,))

    def uploads(self) -> list[Upload]:
        rows = self.db.execute("SELECT node_id, memory_id, path, sha FROM uploads")
        return [Upload(*row) for row in rows]

    # ------------------------------------------------------------ contents

    def content(self, node_id: int) -> bytes | None:
        """A file's content, or None when it has no row (a cached file without one
        is empty: a new file gets its row at its first write)."""
        row = self.db.execute("SELECT data FROM contents WHERE node_id = ?", (node_id,)).fetchone()
        return None if row is None else bytes(row[0])

    def content_sizes(self) -> dict[int, int]:
        """The size of every cached content, by node id."""
        return dict(self.db.execute("SELECT node_id, length(data) FROM contents"))

    def put_content(self, node_id: int, data: bytes | bytearray) -> None:
        with self._disk_full_is_cache_disk_full():
            self.db.execute(
                "INSERT INTO contents (node_id, data) VALUES (?, ?) "
                "ON CONFLICT (node_id) DO UPDATE SET data = excluded.data",
                (node_id, data),
            )

    def drop_content(self, node_id: int) -> None:
        self.db.execute("DELETE FROM contents WHERE node_id = ?", (node_id,))

    def drop_contents(self, node_ids: list[int]) -> None:
        self.db.executemany("DELETE FROM contents WHERE node_id = ?", [(i,) for i in node_ids])

    def drop_stray_contents(self) -> int:
        """Delete contents no node owns; returns how many went."""
        return self.db.execute(
            "DELETE FROM contents WHERE node_id NOT IN (SELECT id FROM nodes)"
        ).rowcount

    # -------------------------------------------------------------- synced

    def synced(self) -> list[tuple[int, str, bytes]]:
        """The copies fsync left in caches made before contents lived here:
        (node id, boot id, content)."""
        rows = self.db.execute("SELECT node_id, boot_id, content FROM synced")
        return [(r[0], r[1], bytes(r[2])) for r in rows]

    def clear_synced(self) -> None:
        self.db.execute("DELETE FROM synced")

    # ---------------------------------------------------------------- meta

    def get_meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str | None) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))
