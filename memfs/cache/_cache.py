"""The durable local state of one mounted store: the tree, the contents, and
what is still to be agreed with the store.

What is promised:

- Every file and folder of the mount is a `Node` with a stable id (the inode
  number the filesystem shows). Ids are never reused.
- A file's content lives in `contents/<id>` under the store's cache folder,
  written there before `write()` returns. The journal (SQLite, WAL) records
  for each file its base (the memory id, `content_sha256` and path last
  agreed with the store), whether it changed locally, and the pending deletes
  (`Tombstone`). The journal row says "dirty" before the bytes are written,
  so a killed process never leaves changed content that the journal calls
  clean. `fsync()` makes both durable against power loss too.
- Clean contents are evicted least-recently-used within a size budget; dirty
  contents and open files never are.
- The tree is held in memory as well (a store has at most a few thousand
  entries), so lookups and stats never touch the disk.

The cache knows nothing of FUSE or HTTP: the filesystem calls the methods
under "local changes", the sync engine those under "agreement with the
store", and content that is not here yet comes from a `ContentSource`.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import logging
import os
import sqlite3
import stat as statmod
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field

import cachetools
import trio

from .._exceptions import (
    CacheCorrupt,
    CacheInUse,
    ContentUnavailable,
    DirectoryNotEmpty,
    EntryExists,
    FileTooLarge,
    InvalidMove,
    IsADirectory,
    MemfsError,
    NameTooLong,
    NoSuchEntry,
    NotADirectory,
    StoreFull,
)
from .._private import ensure_private_dir, open_private_dir
from ..api import (
    MARKER_NAME,
    MAX_CONTENT_BYTES,
    MAX_MEMORIES,
    MAX_NAME_BYTES,
    MAX_PATH_BYTES,
    check_name,
    content_sha256,
    join_path,
)

log = logging.getLogger("memfs.cache")

ROOT_ID = 1
FIRST_NODE_ID = 16  # ids below are reserved for the root and synthetic files (the marker)
DEFAULT_BUDGET_BYTES = 256 * 1024 * 1024

FILE = "file"
DIR = "dir"

ContentSource = Callable[[str], Awaitable[tuple[bytes, str]]]
"""Fetches a memory's content by id: returns (content, content_sha256)."""


@dataclass(eq=False)
class Node:
    """One file or folder of the mount, as the filesystem shows it."""

    id: int
    kind: str
    parent: int
    name: str
    path: str
    mode: int
    mtime_ns: int
    ctime_ns: int
    size: int = 0
    memory_id: str | None = None
    base_sha: str | None = None
    base_path: str | None = None
    dirty: bool = False
    changed: bool = False
    cached: bool = False
    local_dir: bool = False
    refused_sha: str | None = None
    refused_reason: str | None = None
    gen: int = 0
    open_count: int = 0
    fd: int | None = None
    orphan: bool = False
    fetching: trio.Event | None = field(default=None, repr=False)
    unsaved: bool = False
    """Size or times changed since the journal row was written (writes do not save)."""
    too_large: bool = False
    """The last write or truncate was refused with EFBIG: the content may be torn, so it
    is not pushed until a write within the limit succeeds."""
    writers: int = 0
    """Open handles that may write."""
    last_write: float = 0.0
    """time.monotonic() of the last write or truncate."""

    @property
    def is_dir(self) -> bool:
        return self.kind == DIR


Gone = list[tuple[int, str]]
"""(parent id, name) of entries taken out of the tree, for the kernel to forget."""


@dataclass
class Placement:
    """What showing one of the store's memories did: the file, the names that
    went (the kernel must forget them), and local files kept aside as
    conflict copies (path, copy)."""

    node: Node
    gone: Gone = field(default_factory=list)
    copies: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class Tombstone:
    """A memory deleted locally and not yet deleted in the store."""

    memory_id: str
    path: str
    base_sha: str
    deleted_at: float


@dataclass(frozen=True)
class Upload:
    """An upload sent and not yet answered: recorded before the request goes out,
    so that a store found holding exactly this can be recognised as memfs's own
    write whose answer was lost (`memory_id` is None for a create)."""

    node_id: int
    memory_id: str | None
    path: str
    sha: str


@dataclass(frozen=True)
class Change:
    """A snapshot of a changed file taken by the sync engine before it talks to the store."""

    node_id: int
    gen: int
    path: str
    memory_id: str | None
    base_sha: str | None
    base_path: str | None
    dirty: bool

    @classmethod
    def of(cls, n: Node) -> Change:
        return cls(n.id, n.gen, n.path, n.memory_id, n.base_sha, n.base_path, n.dirty)


_SCHEMA = """
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

_MIGRATIONS: list[str] = [
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
]
"""Journal migrations: `PRAGMA user_version` counts those applied."""

_NODE_COLUMNS = (
    "id, parent, name, kind, mode, mtime_ns, ctime_ns, size, memory_id, base_sha, base_path, "
    "dirty, changed, cached, local_dir, refused_sha, refused_reason, too_large"
)


def _now_ns() -> int:
    return time.time_ns()


class StoreCache:
    """The tree, contents and journal of one store, under `<cache_dir>/<store_id>/`."""

    def __init__(
        self,
        root_dir: str,
        store_id: str,
        *,
        budget_bytes: int = DEFAULT_BUDGET_BYTES,
        source: ContentSource | None = None,
        max_memories: int = MAX_MEMORIES,
    ) -> None:
        self.store_id = store_id
        self.max_memories = max_memories
        self._file_total = 0
        """Files in the tree (orphans aside): with the pending deletes, what the store will hold."""
        self._said_full = False
        self.dir = os.path.join(root_dir, store_id)
        self.conflicts_dir = os.path.join(self.dir, "conflicts")
        self.source = source
        self.budget_bytes = budget_bytes
        self._durable_changes = -1
        self._trash: list[str] = []
        self._unsaved: set[int] = set()
        self.nodes: dict[int, Node] = {}
        self.children: dict[int, dict[str, int]] = {}
        self.tombstones: dict[str, Tombstone] = {}
        self.changed_ids: set[int] = set()
        self.on_change: Callable[[], None] | None = None
        """Called after every local change: the sync engine's cue."""
        self._lru: cachetools.LRUCache = _EvictingLRU(budget_bytes, self._evict)
        ensure_private_dir(root_dir, "cache folder", follow=True)
        ensure_private_dir(self.dir, "cache folder")
        ensure_private_dir(self.conflicts_dir, "conflicts folder")
        self.contents = ContentFiles(self.dir)
        try:
            self.db = sqlite3.connect(
                os.path.join(self.dir, "journal.sqlite3"),
                isolation_level=None,
                check_same_thread=False,
            )
            # One process owns a store's journal: no file locks per transaction.
            self.db.execute("PRAGMA locking_mode=EXCLUSIVE")
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.executescript(_SCHEMA)
            self._migrate()
            self._load()
        except sqlite3.OperationalError as e:
            if "locked" in str(e):
                raise CacheInUse(
                    f"the cache at {self.dir} is in use by another memfs process of store {store_id}"
                ) from e
            raise CacheCorrupt(f"cannot open the cache at {self.dir}: {e}") from e
        except (OSError, sqlite3.Error) as e:
            raise CacheCorrupt(f"cannot open the cache at {self.dir}: {e}") from e

    # ---------------------------------------------------------------- loading

    def _migrate(self) -> None:
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        for number, script in enumerate(_MIGRATIONS[version:], start=version + 1):
            self.db.executescript(f"BEGIN; {script}; PRAGMA user_version = {number}; COMMIT;")

    def _load(self) -> None:
        now = _now_ns()
        if self.db.execute("SELECT 1 FROM nodes WHERE id = ?", (ROOT_ID,)).fetchone() is None:
            self.db.execute(
                "INSERT INTO nodes (id, parent, name, kind, mode, mtime_ns, ctime_ns, local_dir) "
                "VALUES (?, 0, '', 'dir', ?, ?, ?, 1)",
                (ROOT_ID, 0o755, now, now),
            )
            self.db.execute(
                "UPDATE sqlite_sequence SET seq = ? WHERE name = 'nodes'", (FIRST_NODE_ID - 1,)
            )
        rows = self.db.execute(f"SELECT {_NODE_COLUMNS} FROM nodes ORDER BY id").fetchall()
        for r in rows:
            node = Node(
                id=r[0], parent=r[1], name=r[2], kind=r[3], mode=r[4], mtime_ns=r[5],
                ctime_ns=r[6], size=r[7], memory_id=r[8], base_sha=r[9], base_path=r[10],
                dirty=bool(r[11]), changed=bool(r[12]), cached=bool(r[13]),
                local_dir=bool(r[14]), refused_sha=r[15], refused_reason=r[16],
                too_large=bool(r[17]), path="",
            )  # fmt: skip
            self.nodes[node.id] = node
            if node.is_dir:
                self.children.setdefault(node.id, {})
            else:
                self._file_total += 1
        for node in self.nodes.values():
            if node.id != ROOT_ID:
                self.children.setdefault(node.parent, {})[node.name] = node.id
        self._assign_paths(ROOT_ID, "/")
        # Content files are the truth for sizes; a file whose content vanished is not cached.
        for node in list(self.nodes.values()):
            if node.kind != FILE:
                continue
            if node.cached or node.dirty:
                try:
                    node.size = self.contents.size(str(node.id))
                    node.cached = True
                except FileNotFoundError:
                    if node.dirty:
                        log.error("content of changed file %s is missing from the cache", node.path)
                        node.dirty = False
                    node.cached = False
            if node.changed:
                self.changed_ids.add(node.id)
            if node.cached and not node.dirty:
                self._lru[node.id] = node.size
        for memory_id, path, sha, deleted_at in self.db.execute(
            "SELECT memory_id, path, base_sha, deleted_at FROM tombstones"
        ):
            self.tombstones[memory_id] = Tombstone(memory_id, path, sha, deleted_at)
        self._remove_strays()

    def _assign_paths(self, node_id: int, path: str) -> None:
        stack = [(node_id, path)]
        while stack:
            nid, p = stack.pop()
            self.nodes[nid].path = p
            for name, cid in self.children.get(nid, {}).items():
                stack.append((cid, join_path(p, name)))

    def _remove_strays(self) -> None:
        """Delete content files that no node owns (left by a kill during an unlink)."""
        for name in self.contents.names():
            base = name.split(".", 1)[0]
            if not base.isdigit() or int(base) not in self.nodes or "." in name:
                with contextlib.suppress(OSError):
                    self.contents.unlink(name)

    async def housekeeping(
        self, every: float = 0.2, busy: Callable[[], bool] = lambda: False
    ) -> None:
        """Runs while mounted: saves sizes and times of closed files, deletes
        dropped contents, and refills the file pool, the last two in a worker
        thread. The pool is refilled only while the filesystem is idle (`busy`
        says whether requests came since the last call), a batch at a time, so
        that making files never competes with the requests that need them."""
        while True:
            if self._unsaved:
                self.save_pending()
            if self._trash:
                trash, self._trash = self._trash, []
                await trio.to_thread.run_sync(self.contents.unlink_all, trash)
            if len(self.contents.free) < self.contents.high and not busy():
                batch = min(64, self.contents.high - len(self.contents.free))
                self.contents.free += await trio.to_thread.run_sync(self.contents.make, batch)
            await trio.sleep(every)

    def save_pending(self) -> None:
        """Save the sizes and times of closed files in one journal transaction."""
        ids, self._unsaved = self._unsaved, set()
        with self._transaction():
            for node_id in ids:
                node = self.nodes.get(node_id)
                if node is not None and node.unsaved and not node.orphan:
                    self._save(node)

    def empty_trash(self) -> None:
        """Delete the content files of dropped files now."""
        trash, self._trash = self._trash, []
        self.contents.unlink_all(trash)

    def close(self) -> None:
        self.save_pending()
        self.empty_trash()
        for node in self.nodes.values():
            if node.fd is not None:
                with contextlib.suppress(OSError):
                    os.close(node.fd)
                node.fd = None
        with contextlib.suppress(sqlite3.Error):
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self.db.close()
        self.contents.close()

    # ------------------------------------------------------------------ meta

    def get_meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str | None) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    # ---------------------------------------------------------------- queries

    def node(self, node_id: int) -> Node:
        try:
            return self.nodes[node_id]
        except KeyError:
            raise NoSuchEntry(f"no entry with id {node_id}")

    def lookup(self, parent_id: int, name: str) -> Node:
        kids = self.children.get(parent_id)
        if kids is None:
            raise NotADirectory(f"{self.node(parent_id).path} is not a folder")
        try:
            return self.nodes[kids[name]]
        except KeyError:
            raise NoSuchEntry(f"no {name!r} in {self.nodes[parent_id].path}")

    def find(self, path: str) -> Node | None:
        node = self.nodes[ROOT_ID]
        for name in path.strip("/").split("/") if path != "/" else []:
            kids = self.children.get(node.id)
            if kids is None or name not in kids:
                return None
            node = self.nodes[kids[name]]
        return node

    def list_dir(self, node_id: int) -> list[tuple[str, Node]]:
        kids = self.children.get(node_id)
        if kids is None:
            raise NotADirectory(f"{self.node(node_id).path} is not a folder")
        return [(name, self.nodes[kids[name]]) for name in sorted(kids)]

    def subdir_count(self, node_id: int) -> int:
        return sum(1 for cid in self.children.get(node_id, {}).values() if self.nodes[cid].is_dir)

    def files(self) -> Iterator[Node]:
        return (n for n in self.nodes.values() if n.kind == FILE and not n.orphan)

    def file_count(self) -> int:
        return self._file_total

    @property
    def full(self) -> bool:
        """The store will hold as many memories as it may once pending changes land."""
        return self._file_total + len(self.tombstones) >= self.max_memories

    def cached_bytes(self) -> int:
        return sum(n.size for n in self.files() if n.cached)

    # --------------------------------------------------------- local changes

    def _check_new_name(self, parent: Node, name: str) -> str:
        if not parent.is_dir:
            raise NotADirectory(f"{parent.path} is not a folder")
        if len(name.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
            raise NameTooLong(f"the name {name[:40]!r}... is longer than {MAX_NAME_BYTES} bytes")
        check_name(name)
        path = join_path(parent.path, name)
        if len(path.encode("utf-8")) > MAX_PATH_BYTES:
            raise NameTooLong(f"the path {path[:40]!r}... is longer than {MAX_PATH_BYTES} bytes")
        if parent.id == ROOT_ID and name == MARKER_NAME:
            raise EntryExists(f"{MARKER_NAME} is the store's marker")
        if name in self.children[parent.id]:
            raise EntryExists(f"{path} already exists")
        return path

    def _insert(self, node: Node) -> Node:
        cur = self.db.execute(
            "INSERT INTO nodes (parent, name, kind, mode, mtime_ns, ctime_ns, size, memory_id, "
            "base_sha, base_path, dirty, changed, cached, local_dir) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                node.parent, node.name, node.kind, node.mode, node.mtime_ns, node.ctime_ns,
                node.size, node.memory_id, node.base_sha, node.base_path, int(node.dirty),
                int(node.changed), int(node.cached), int(node.local_dir),
            ),
        )  # fmt: skip
        node.id = cur.lastrowid
        self.nodes[node.id] = node
        if node.kind == FILE:
            self._file_total += 1
        self.children[node.parent][node.name] = node.id
        if node.is_dir:
            self.children[node.id] = {}
        self.nodes[node.parent].mtime_ns = node.ctime_ns
        return node

    def _save(self, node: Node) -> None:
        self.db.execute(
            "UPDATE nodes SET parent=?, name=?, mode=?, mtime_ns=?, ctime_ns=?, size=?, "
            "memory_id=?, base_sha=?, base_path=?, dirty=?, changed=?, cached=?, local_dir=?, "
            "refused_sha=?, refused_reason=?, too_large=? WHERE id=?",
            (
                node.parent, node.name, node.mode, node.mtime_ns, node.ctime_ns, node.size,
                node.memory_id, node.base_sha, node.base_path, int(node.dirty),
                int(node.changed), int(node.cached), int(node.local_dir), node.refused_sha,
                node.refused_reason, int(node.too_large), node.id,
            ),
        )  # fmt: skip
        node.unsaved = False

    def _mark_changed(self, node: Node, *, content: bool) -> None:
        """Record a local change durably before the caller touches the content."""
        node.gen += 1
        was = (node.dirty, node.changed)
        if content:
            node.dirty = True
        node.changed = True
        self.changed_ids.add(node.id)
        self._lru.pop(node.id, None)
        if (node.dirty, node.changed) != was:
            self._save(node)
        if self.on_change is not None:
            self.on_change()

    def mkdir(self, parent_id: int, name: str, mode: int) -> Node:
        parent = self.node(parent_id)
        path = self._check_new_name(parent, name)
        now = _now_ns()
        node = Node(
            id=0, kind=DIR, parent=parent_id, name=name, path=path, mode=mode & 0o7777,
            mtime_ns=now, ctime_ns=now, local_dir=True,
        )  # fmt: skip
        return self._insert(node)

    def create(self, parent_id: int, name: str, mode: int) -> Node:
        """A new empty file, changed locally, content cached (and empty)."""
        parent = self.node(parent_id)
        path = self._check_new_name(parent, name)
        now = _now_ns()
        node = Node(
            id=0, kind=FILE, parent=parent_id, name=name, path=path, mode=mode & 0o7777,
            mtime_ns=now, ctime_ns=now, dirty=True, changed=True, cached=True,
        )  # fmt: skip
        stone = self._tombstone_at(path)
        if stone is None and self.full:
            if not self._said_full:
                log.warning(
                    "store %s will hold %d memories, its limit: new files are refused (ENOSPC) "
                    "until some are deleted",
                    self.store_id,
                    self.max_memories,
                )
                self._said_full = True
            raise StoreFull(
                f"{path}: the store holds at most {self.max_memories} memories; delete some first"
            )
        self._said_full = False
        # One autocommitted INSERT is the common case; adopting a pending delete
        # changes two tables, in one transaction.
        with self._transaction() if stone is not None else contextlib.nullcontext():
            adopted = self._adopt_tombstone(path)
            if adopted is not None:
                node.memory_id, node.base_sha, node.base_path = adopted
            self._insert(node)
            self._write_content_file(node.id, b"", fresh=True)
        self.changed_ids.add(node.id)
        node.gen = 1
        if self.on_change is not None:
            self.on_change()
        return node

    def unlink(self, parent_id: int, name: str) -> Node:
        node = self.lookup(parent_id, name)
        if node.is_dir:
            raise IsADirectory(f"{node.path} is a folder")
        with self._transaction():
            self._detach(node)
        return node

    def rmdir(self, parent_id: int, name: str) -> None:
        node = self.lookup(parent_id, name)
        if not node.is_dir:
            raise NotADirectory(f"{node.path} is not a folder")
        if self.children[node.id]:
            raise DirectoryNotEmpty(f"{node.path} is not empty")
        with self._transaction():
            self._detach(node)

    def _detach(self, node: Node, *, gone: Gone | None = None, tombstone: bool = True) -> None:
        """Take a node out of the tree; a file still open lives on as an orphan until
        released. A file with a memory becomes a pending delete (`tombstone`),
        unless the store itself took it away. `gone` collects the names taken
        out, for the kernel to forget."""
        if gone is not None:
            gone.append((node.parent, node.name))
        del self.children[node.parent][node.name]
        self.nodes[node.parent].mtime_ns = _now_ns()
        if node.is_dir:
            del self.children[node.id]
            del self.nodes[node.id]
            self.db.execute("DELETE FROM nodes WHERE id = ?", (node.id,))
            return
        if node.memory_id is not None and tombstone:
            self._add_tombstone(node.memory_id, node.base_path or node.path, node.base_sha or "")
        self.db.execute("DELETE FROM nodes WHERE id = ?", (node.id,))
        self._file_total -= 1
        self.changed_ids.discard(node.id)
        self._lru.pop(node.id, None)
        node.memory_id = None
        node.changed = node.dirty = False
        if node.open_count > 0:
            node.orphan = True
        else:
            self._drop(node)
        if self.on_change is not None:
            self.on_change()

    def _drop(self, node: Node) -> None:
        self.nodes.pop(node.id, None)
        if node.fd is not None:
            with contextlib.suppress(OSError):
                os.close(node.fd)
            node.fd = None
        # Ids are never reused, so the file can go later, off the request's path
        # (deleting a freshly written file costs this disk ~0.3 ms).
        self._trash.append(str(node.id))

    def _add_tombstone(self, memory_id: str, path: str, base_sha: str) -> None:
        stone = Tombstone(memory_id, path, base_sha, time.time())
        self.tombstones[memory_id] = stone
        self.db.execute(
            "INSERT OR REPLACE INTO tombstones (memory_id, path, base_sha, deleted_at) VALUES (?, ?, ?, ?)",
            (memory_id, path, base_sha, stone.deleted_at),
        )

    def _tombstone_at(self, path: str) -> Tombstone | None:
        for stone in self.tombstones.values():
            if stone.path == path:
                return stone
        return None

    def _adopt_tombstone(self, path: str) -> tuple[str, str, str] | None:
        """A file deleted and written again at the same path before the store saw the
        delete is one update of the same memory: take its pending delete back."""
        for stone in self.tombstones.values():
            if stone.path == path:
                self.tombstone_done(stone.memory_id)
                return stone.memory_id, stone.base_sha, stone.path
        return None

    def rename(
        self,
        old_parent: int,
        old_name: str,
        new_parent: int,
        new_name: str,
        *,
        noreplace: bool = False,
    ) -> Node:
        """Move a file or folder; over an existing file, the moved file takes the
        target's place in the store (an editor's save is one update of the target)."""
        node = self.lookup(old_parent, old_name)
        dest_parent = self.node(new_parent)
        if not dest_parent.is_dir:
            raise NotADirectory(f"{dest_parent.path} is not a folder")
        if node.is_dir:
            p: Node | None = dest_parent
            while p is not None and p.id != ROOT_ID:
                if p.id == node.id:
                    raise InvalidMove(f"cannot move {node.path} into itself")
                p = self.nodes.get(p.parent)
        target = self.children[new_parent].get(new_name)
        if target == node.id:
            return node
        if target is None:
            self._check_new_name(dest_parent, new_name)
        else:
            if noreplace:
                raise EntryExists(f"{join_path(dest_parent.path, new_name)} already exists")
            t = self.nodes[target]
            if t.is_dir and not node.is_dir:
                raise IsADirectory(f"{t.path} is a folder")
            if node.is_dir and not t.is_dir:
                raise NotADirectory(f"{t.path} is not a folder")
            if t.is_dir and self.children[t.id]:
                raise DirectoryNotEmpty(f"{t.path} is not empty")
        if node.is_dir:
            self._check_moved_paths(node, join_path(dest_parent.path, new_name))
        with self._transaction():
            inherit = None
            if target is not None:
                t = self.nodes[target]
                if not t.is_dir and t.memory_id is not None:
                    # The moved file takes the target's memory over (an editor's save is one
                    # update of the target); the memory it had itself is deleted instead.
                    inherit = (t.memory_id, t.base_sha, t.base_path)
                    t.memory_id = None
                    if node.memory_id is not None:
                        self._add_tombstone(
                            node.memory_id, node.base_path or node.path, node.base_sha or ""
                        )
                self._detach(t)
            elif not node.is_dir and node.memory_id is None:
                inherit = self._adopt_tombstone(join_path(dest_parent.path, new_name))
            del self.children[old_parent][old_name]
            node.parent, node.name = new_parent, new_name
            self.children[new_parent][new_name] = node.id
            now = _now_ns()
            node.ctime_ns = now
            self.nodes[old_parent].mtime_ns = self.nodes[new_parent].mtime_ns = now
            self._assign_paths(node.id, join_path(dest_parent.path, new_name))
            if inherit is not None:
                node.memory_id, node.base_sha, node.base_path = inherit
                node.dirty = True
            if node.is_dir:
                node.local_dir = True
                self._save(node)
                for f in self._files_under(node):
                    if f.memory_id is not None:
                        self._mark_changed(f, content=False)
            else:
                node.gen += 1
                node.changed = True
                self.changed_ids.add(node.id)
                self._save(node)
        if self.on_change is not None:
            self.on_change()
        return node

    def _check_moved_paths(self, folder: Node, new_path: str) -> None:
        """A folder may not move where a path under it would pass 1,024 bytes."""
        growth = len(new_path.encode("utf-8")) - len(folder.path.encode("utf-8"))
        if growth <= 0:
            return
        stack = [folder.id]
        while stack:
            for cid in self.children.get(stack.pop(), {}).values():
                child = self.nodes[cid]
                if len(child.path.encode("utf-8")) + growth > MAX_PATH_BYTES:
                    raise NameTooLong(
                        f"moving {folder.path} would make {child.path[:40]!r}... "
                        f"longer than {MAX_PATH_BYTES} bytes"
                    )
                if child.is_dir:
                    stack.append(cid)

    def _files_under(self, node: Node) -> Iterator[Node]:
        stack = [node.id]
        while stack:
            for cid in self.children.get(stack.pop(), {}).values():
                c = self.nodes[cid]
                if c.is_dir:
                    stack.append(cid)
                else:
                    yield c

    def chmod(self, node_id: int, mode: int) -> None:
        node = self.node(node_id)
        node.mode = mode & 0o7777
        node.ctime_ns = _now_ns()
        if not node.orphan:
            self._save(node)

    def set_times(self, node_id: int, mtime_ns: int | None) -> None:
        node = self.node(node_id)
        if mtime_ns is not None:
            node.mtime_ns = mtime_ns
        node.ctime_ns = _now_ns()
        if not node.orphan:
            self._save(node)

    # ------------------------------------------------------------ contents

    @property
    def contents_dir(self) -> str:
        return self.contents.dir

    def _content_path(self, node_id: int) -> str:
        """Where a content file is (for people and tests; memfs reaches it through `contents`)."""
        return self.contents.path(str(node_id))

    def _write_content_file(self, node_id: int, content: bytes, *, fresh: bool = False) -> None:
        """Replace a content file atomically; an open descriptor follows the new content.
        `fresh`: the journal does not call this file cached yet, so a torn write
        cannot be mistaken for content and the file is written in place."""
        files = self.contents
        name = str(node_id)
        if fresh:
            files.take(name)
            if content:
                files.write_in_place(name, content)
            return
        tmp = name + ".new"
        files.take(tmp)
        files.write_in_place(tmp, content)
        files.replace(tmp, name)
        node = self.nodes.get(node_id)
        if node is not None and node.fd is not None:
            new_fd = files.open(name)
            os.dup2(new_fd, node.fd)
            os.close(new_fd)

    async def open(self, node_id: int, *, truncate: bool = False, writable: bool = False) -> Node:
        """Make a file's content available locally (fetching it if need be) and hold it open.
        A `writable` open counts as a writer until its `release(writable=True)`: a file
        with writers is pushed only once no write touched it for a while."""
        node = self.node(node_id)
        if node.is_dir:
            raise IsADirectory(f"{node.path} is a folder")
        if truncate:
            self.truncate_content(node, 0)
        elif not node.cached:
            await self._fetch(node)
        if node.fd is None:
            try:
                node.fd = self.contents.open(str(node.id))
            except OSError as e:
                raise CacheCorrupt(f"content of {node.path} is missing from the cache: {e}")
        node.open_count += 1
        if writable:
            node.writers += 1
        self._touch(node)
        return node

    async def _fetch(self, node: Node) -> None:
        if node.fetching is not None:
            await node.fetching.wait()
            if node.cached:
                return
        if node.memory_id is None or self.source is None:
            raise ContentUnavailable(
                f"{node.path} has no content here and no store to fetch it from"
            )
        node.fetching = trio.Event()
        try:
            memory_id = node.memory_id
            try:
                content, sha = await self.source(memory_id)
            except MemfsError as e:
                raise ContentUnavailable(f"cannot fetch {node.path}: {e}")
            if node.cached or node.memory_id != memory_id or node.orphan:
                return
            self.install_content(node, content, sha)
        finally:
            node.fetching.set()
            node.fetching = None

    def install_content(self, node: Node, content: bytes, sha: str) -> None:
        """Cache the store's content of a clean file. Content newer than the base
        is shown, but the base stays: the next pass pulls it properly and makes
        the kernel forget the size it was told."""
        if node.cached or node.dirty or node.orphan:
            return
        self._write_content_file(node.id, content, fresh=node.fd is None)
        node.cached = True
        node.size = len(content)
        self._save(node)
        self._lru[node.id] = node.size

    async def ensure_cached(self, node_id: int) -> bool:
        """Fetch a file's content if it is not here yet; True when it was fetched."""
        node = self.nodes.get(node_id)
        if node is None or node.is_dir or node.cached or node.orphan:
            return False
        await self._fetch(node)
        return True

    def release(self, node_id: int, *, writable: bool = False) -> None:
        node = self.nodes.get(node_id)
        if node is None:
            return
        node.open_count = max(0, node.open_count - 1)
        if writable:
            node.writers = max(0, node.writers - 1)
        if node.open_count == 0:
            if node.fd is not None:
                with contextlib.suppress(OSError):
                    os.close(node.fd)
                node.fd = None
            if node.orphan:
                self._drop(node)
                return
            if node.unsaved:
                # Sizes and times are saved in batches by housekeeping (and at
                # close): the content file holds the size, a kill loses an mtime at most.
                self._unsaved.add(node.id)
            if not node.dirty and node.cached:
                self._lru[node.id] = node.size

    def read(self, node: Node, offset: int, size: int) -> bytes:
        if node.fd is None:
            raise CacheCorrupt(f"{node.path} is not open")
        return os.pread(node.fd, size, offset)

    def write(self, node: Node, offset: int, data: bytes) -> int:
        end = offset + len(data)
        self.check_size(node, end)
        if node.fd is None:
            raise CacheCorrupt(f"{node.path} is not open")
        if not node.orphan:
            self._mark_changed(node, content=True)
        n = os.pwrite(node.fd, data, offset)
        if end > node.size:
            node.size = end
        self._written(node)
        return n

    def check_size(self, node: Node, size: int) -> None:
        """Refuse a content past the limit (FileTooLarge); the file is then
        remembered as `too_large` and not pushed until a write within the limit."""
        if size <= MAX_CONTENT_BYTES:
            return
        if not node.too_large and not node.orphan:
            node.too_large = True
            self._save(node)
        raise FileTooLarge(
            f"{node.path} would be {size} bytes; a memory holds at most {MAX_CONTENT_BYTES}"
        )

    def _written(self, node: Node) -> None:
        node.mtime_ns = node.ctime_ns = _now_ns()
        node.last_write = time.monotonic()
        node.unsaved = True
        if node.too_large:
            node.too_large = False
            if not node.orphan:
                self._save(node)

    def truncate(self, node_id: int, size: int) -> None:
        node = self.node(node_id)
        if node.is_dir:
            raise IsADirectory(f"{node.path} is a folder")
        self.truncate_content(node, size)
        if node.unsaved and node.open_count == 0:
            self._save(node)

    def truncate_content(self, node: Node, size: int) -> None:
        self.check_size(node, size)
        if size == node.size and node.cached:
            if node.too_large:
                self._written(node)
            return
        if not node.orphan:
            self._mark_changed(node, content=True)
        if node.fd is not None:
            os.ftruncate(node.fd, size)
        elif node.cached:
            self.contents.truncate(str(node.id), size)
        elif size == 0:
            self._write_content_file(node.id, b"", fresh=True)
        else:
            raise ContentUnavailable(f"{node.path} has no content here to truncate")
        if not node.cached:
            node.cached = True
            self._save(node)
        node.size = size
        self._written(node)

    def fsync(self, node: Node | None) -> None:
        """Make the file's content and the journal durable."""
        if node is not None and node.fd is not None:
            if not node.orphan and node.unsaved:
                self._save(node)
                node.unsaved = False
            os.fsync(node.fd)
        # Commits reach the WAL file at once (synchronous=NORMAL); one fsync of it
        # makes them durable, and none is needed when nothing was committed since.
        if self.db.total_changes != self._durable_changes:
            with contextlib.suppress(OSError):
                fd = os.open(os.path.join(self.dir, "journal.sqlite3-wal"), os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            self._durable_changes = self.db.total_changes

    def read_content(self, node: Node) -> bytes:
        """The whole local content of a cached file."""
        return self.contents.read(str(node.id))

    def _touch(self, node: Node) -> None:
        if node.id in self._lru:
            self._lru[node.id] = self._lru[node.id]

    def _evict(self, node_id: int) -> None:
        node = self.nodes.get(node_id)
        if node is None or node.dirty or node.open_count > 0 or not node.cached:
            return
        node.cached = False
        with contextlib.suppress(FileNotFoundError):
            self.contents.unlink(str(node.id))
        self._save(node)

    # ------------------------------------------- agreement with the store

    def changes(self, *, quiet_for: float = 0.0) -> list[Change]:
        """The files changed locally since their base, as the filesystem recorded them.
        With `quiet_for`, a file still open for writing is left out until no write
        has touched it for that many seconds (a writer may be half way through)."""
        out = []
        settled = time.monotonic() - quiet_for
        for nid in sorted(self.changed_ids):
            n = self.nodes.get(nid)
            if n is None or n.orphan or n.is_dir:
                continue
            if quiet_for and n.writers and n.last_write > settled:
                continue
            out.append(Change.of(n))
        return out

    # Uploads in flight: recorded durably before the request goes out.

    def record_upload(self, upload: Upload) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO uploads (node_id, memory_id, path, sha) VALUES (?, ?, ?, ?)",
            (upload.node_id, upload.memory_id, upload.path, upload.sha),
        )

    def upload_answered(self, node_id: int) -> None:
        self.db.execute("DELETE FROM uploads WHERE node_id = ?", (node_id,))

    def uploads(self) -> list[Upload]:
        return [
            Upload(*row)
            for row in self.db.execute("SELECT node_id, memory_id, path, sha FROM uploads")
        ]

    def forget_uploads(self, node_ids: list[int]) -> None:
        if not node_ids:
            return
        with self._transaction():
            for node_id in node_ids:
                self.upload_answered(node_id)

    def adopt_own_write(self, node: Node, memory_id: str, sha: str, path: str) -> None:
        """The store holds what memfs sent for this file (the answer was lost): that
        is the new base. The file stays changed; the next push sends what differs."""
        node.memory_id, node.base_sha, node.base_path = memory_id, sha, path
        node.changed = True
        self.changed_ids.add(node.id)
        self._save(node)

    def retarget_tombstone(self, memory_id: str, path: str, sha: str) -> None:
        """A pending delete whose memory now holds memfs's own lost write, or a memory
        memfs created (answer lost) whose file was deleted here since."""
        self._add_tombstone(memory_id, path, sha)

    def mark_pushed(self, change: Change, *, memory_id: str, sha: str, path: str) -> Node | None:
        """The store now holds this file's content `sha` at `path`: advance its base.
        The file stays changed if it was written again meanwhile."""
        node = self.nodes.get(change.node_id)
        if node is None or node.orphan:
            return None
        node.memory_id, node.base_sha, node.base_path = memory_id, sha, path
        node.refused_sha = node.refused_reason = None
        if node.gen == change.gen and node.path == path:
            node.dirty = node.changed = False
            self.changed_ids.discard(node.id)
            self._lru[node.id] = node.size
        self._save(node)
        # Its folders are now implied by the store: they go when the store empties them.
        parent = self.nodes.get(node.parent)
        while parent is not None and parent.id != ROOT_ID and parent.local_dir:
            parent.local_dir = False
            self._save(parent)
            parent = self.nodes.get(parent.parent)
        return node

    def mark_refused(self, change: Change, sha: str, reason: str) -> None:
        node = self.nodes.get(change.node_id)
        if node is not None:
            node.refused_sha, node.refused_reason = sha, reason
            self._save(node)

    def tombstone_done(self, memory_id: str) -> None:
        self.tombstones.pop(memory_id, None)
        self.db.execute("DELETE FROM tombstones WHERE memory_id = ?", (memory_id,))

    def by_memory_id(self) -> dict[str, Node]:
        return {n.memory_id: n for n in self.files() if n.memory_id is not None}

    def _ensure_dirs(self, path: str, placed: Placement) -> Node:
        """The folder at `path`, creating the folders a remote memory implies. A
        file standing where the store has a folder goes (the store wins; a
        changed one is kept as a conflict copy)."""
        node = self.nodes[ROOT_ID]
        if path == "/":
            return node
        for name in path.strip("/").split("/"):
            cid = self.children[node.id].get(name)
            if cid is not None and not self.nodes[cid].is_dir:
                self._set_aside(self.nodes[cid], placed)
                cid = None
            if cid is None:
                now = _now_ns()
                node = self._insert(Node(
                    id=0, kind=DIR, parent=node.id, name=name, path=join_path(node.path, name),
                    mode=0o755, mtime_ns=now, ctime_ns=now,
                ))  # fmt: skip
            else:
                node = self.nodes[cid]
        return node

    def _set_aside(self, node: Node, placed: Placement) -> None:
        """Take a local file, or a folder and everything in it, out of the way of
        the store's state: files with local changes (or no memory) are kept as
        conflict copies first. Decided once: nothing is left to disagree."""
        files = [node] if not node.is_dir else list(self._files_under(node))
        for f in files:
            if f.changed or f.memory_id is None:
                placed.copies.append((f.path, self.keep_conflict_copy(f)))
        stack = [node]
        order: list[Node] = []
        while stack:
            n = stack.pop()
            order.append(n)
            stack += [self.nodes[c] for c in self.children.get(n.id, {}).values()]
        for n in reversed(order):  # children before their folders
            self._detach(n, gone=placed.gone, tombstone=False)

    def place_remote(
        self,
        memory_id: str,
        path: str,
        sha: str,
        size: int,
        content: bytes | None,
        mtime_ns: int | None = None,
        *,
        node: Node | None = None,
    ) -> Placement:
        """Show the store's memory at `path`: create the file (and its folders), or
        move and update `node`, the clean file that has this memory id. Whatever
        stands in the way goes (see `_set_aside`)."""
        placed = Placement(node)  # type: ignore[arg-type]
        with self._transaction():
            parent_path, _, name = path.rpartition("/")
            parent = self._ensure_dirs(parent_path or "/", placed)
            existing = self.children[parent.id].get(name)
            if existing is not None and existing != (node.id if node else None):
                self._set_aside(self.nodes[existing], placed)
            if node is not None and node.path != path:
                old_parent = node.parent
                placed.gone.append((old_parent, node.name))
                del self.children[old_parent][node.name]
                node.parent, node.name = parent.id, name
                self.children[parent.id][name] = node.id
                self._assign_paths(node.id, path)
                self._prune_empty(old_parent, placed.gone)
            elif node is None:
                now = mtime_ns or _now_ns()
                node = self._insert(Node(
                    id=0, kind=FILE, parent=parent.id, name=name, path=path, mode=0o644,
                    mtime_ns=now, ctime_ns=now, size=size, memory_id=memory_id,
                ))  # fmt: skip
            placed.node = node
            node.memory_id, node.base_sha, node.base_path = memory_id, sha, path
            node.dirty = node.changed = False
            node.gen += 1
            self.changed_ids.discard(node.id)
            node.refused_sha = node.refused_reason = None
            node.too_large = False
            if content is not None:
                self._write_content_file(node.id, content)
                node.cached, node.size = True, len(content)
                self._lru[node.id] = node.size
            elif node.cached and node.size == size and self._cached_sha(node) == sha:
                pass
            else:
                self._uncache(node)
                node.size = size
            if mtime_ns:
                node.mtime_ns = mtime_ns
            self._save(node)
        return placed

    def follow_remote_move(self, node: Node, path: str) -> Gone:
        """The store moved this file's memory; it changed here too: move it, keep the
        change. Returns the names the kernel must forget."""
        gone: Gone = []
        with self._transaction():
            parent_path_, _, name = path.rpartition("/")
            existing = self.find(path)
            if existing is not None and existing is not node:
                raise EntryExists(f"{path} is taken here")
            placed = Placement(node)
            parent = self._ensure_dirs(parent_path_ or "/", placed)
            gone += placed.gone
            old_parent = node.parent
            gone.append((old_parent, node.name))
            del self.children[old_parent][node.name]
            node.parent, node.name = parent.id, name
            self.children[parent.id][name] = node.id
            self._assign_paths(node.id, path)
            node.base_path = path
            self._save(node)
            self._prune_empty(old_parent, gone)
        return gone

    def _cached_sha(self, node: Node) -> str | None:
        try:
            return content_sha256(self.read_content(node))
        except OSError:
            return None

    def _uncache(self, node: Node) -> None:
        if node.cached and node.open_count == 0:
            with contextlib.suppress(FileNotFoundError):
                self.contents.unlink(str(node.id))
            node.cached = False
            self._lru.pop(node.id, None)

    def remove_remote(self, node: Node) -> Gone:
        """The store deleted this clean file: take it out; an open file keeps its
        content until closed. Returns the names the kernel must forget."""
        gone: Gone = []
        parent = node.parent
        with self._transaction():
            self._detach(node, gone=gone, tombstone=False)
            self._prune_empty(parent, gone)
        return gone

    def _prune_empty(self, dir_id: int, gone: Gone | None = None) -> None:
        while dir_id != ROOT_ID:
            d = self.nodes.get(dir_id)
            if d is None or d.local_dir or self.children.get(dir_id):
                return
            parent = d.parent
            self._detach(d, gone=gone)
            dir_id = parent

    def set_aside_local_changes(self) -> list[tuple[str, str]]:
        """For a read-only mount of a cache an earlier read-write mount left with
        changes: keep each changed file as a conflict copy and take the changes
        out (pending deletes, local folders too), so that the next listing shows
        exactly the store's state. Returns (path, copy) of the copies."""
        placed = Placement(self.nodes[ROOT_ID])
        with self._transaction():
            for node in [n for n in self.files() if n.changed]:
                if node.dirty or node.memory_id is None:
                    placed.copies.append((node.path, self.keep_conflict_copy(node)))
                self._detach(node, tombstone=False)
            for memory_id in list(self.tombstones):
                self.tombstone_done(memory_id)
            folders = [n for n in self.nodes.values() if n.is_dir and n.local_dir]
            for folder in sorted(folders, key=lambda n: -n.path.count("/")):
                if folder.id != ROOT_ID and folder.id in self.nodes:
                    folder.local_dir = False
                    self._save(folder)
                    self._prune_empty(folder.id)
        return placed.copies

    def forget_memory(self, node: Node) -> None:
        """The store no longer has this file's memory, but it changed locally: it is new again."""
        node.memory_id = node.base_sha = node.base_path = None
        node.dirty = node.changed = True
        node.gen += 1
        self.changed_ids.add(node.id)
        self._save(node)

    def keep_conflict_copy(self, node: Node) -> str:
        """Copy the local content of a file outside the mount before the store's
        wins; returns the copy's path.

        Each copy goes into a folder of its own, `conflicts/<UTC time>-<n>/`,
        made exclusively (so no copy is ever overwritten), under the file's
        own path (so `/p/q` and `/p__q` cannot meet, and no name grows past
        its limit). Files and folders are 0600 and 0700.
        """
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        for n in itertools.count(1):
            folder = os.path.join(self.conflicts_dir, f"{stamp}-{n}")
            try:
                os.mkdir(folder, 0o700)
                break
            except FileExistsError:
                continue
        content = self.read_content(node) if node.cached else b""
        dest = os.path.join(folder, *node.path.strip("/").split("/"))
        try:
            os.makedirs(os.path.dirname(dest), mode=0o700, exist_ok=True)
            self._write_private_file(dest, content)
        except OSError as e:
            if e.errno != errno.ENAMETOOLONG:
                raise
            # A name the store allows but this disk does not: name it by its hash.
            dest = os.path.join(folder, "path-sha256-" + content_sha256(node.path.encode()))
            self._write_private_file(dest, content)
            with open(dest + ".path", "w", encoding="utf-8", opener=_private_opener) as f:
                f.write(node.path + "\n")
        return dest

    @staticmethod
    def _write_private_file(path: str, content: bytes) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, content)
            os.fsync(fd)
        finally:
            os.close(fd)

    def transaction(self) -> contextlib.AbstractContextManager[None]:
        """Group several changes in one journal transaction (one commit)."""
        return self._transaction()

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        if self.db.in_transaction:
            yield
            return
        self.db.execute("BEGIN")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        else:
            self.db.execute("COMMIT")


class ContentFiles:
    """The content files of one store, `contents/<node id>`, and a pool of
    empty files made ahead of time (`pool/`).

    Both folders are memfs's own (0700, checked: see `_private`), and every
    file in them is reached by name relative to a descriptor of its folder,
    never following a symlink, and created 0600.

    Creating a file costs this kind of disk 0.1 to 0.7 ms of CPU; renaming one
    about 30 µs. So new contents take a file from the pool, and a worker thread
    keeps the pool filled in the background. (Emptying a dropped content file
    for reuse costs more than deleting it: ext4 flushes a file truncated to 0.)
    """

    FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC

    def __init__(self, store_dir: str, *, high: int = 1024) -> None:
        self.dir = os.path.join(store_dir, "contents")
        self.pool_dir = os.path.join(store_dir, "pool")
        self.high = high
        self.fd = open_private_dir(self.dir, "cache folder")
        self.pool_fd = open_private_dir(self.pool_dir, "cache folder")
        self.free = os.listdir(self.pool_fd)

    def close(self) -> None:
        for fd in (self.fd, self.pool_fd):
            with contextlib.suppress(OSError):
                os.close(fd)

    def path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    def open(self, name: str, flags: int = os.O_RDWR) -> int:
        return os.open(name, flags | self.FLAGS, 0o600, dir_fd=self.fd)

    def size(self, name: str) -> int:
        st = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        if not statmod.S_ISREG(st.st_mode):
            raise FileNotFoundError(errno.ENOENT, "not a regular file", name)
        return st.st_size

    def read(self, name: str) -> bytes:
        fd = self.open(name, os.O_RDONLY)
        try:
            chunks = []
            while chunk := os.read(fd, 1 << 17):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def write_in_place(self, name: str, content: bytes) -> None:
        fd = self.open(name, os.O_WRONLY)
        try:
            os.write(fd, content)
        finally:
            os.close(fd)

    def truncate(self, name: str, size: int) -> None:
        fd = self.open(name, os.O_WRONLY)
        try:
            os.ftruncate(fd, size)
        finally:
            os.close(fd)

    def replace(self, src: str, dest: str) -> None:
        os.replace(src, dest, src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def unlink(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=self.fd)

    def unlink_all(self, names: list[str]) -> None:
        for name in names:
            self.unlink(name)

    def names(self) -> list[str]:
        return os.listdir(self.fd)

    def take(self, dest: str) -> None:
        """Put an empty file at `dest` (replacing what is there)."""
        while self.free:
            src = self.free.pop()
            try:
                os.replace(src, dest, src_dir_fd=self.pool_fd, dst_dir_fd=self.fd)
                return
            except FileNotFoundError:
                continue
        os.close(self.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC))

    def make(self, n: int) -> list[str]:
        """Create `n` empty files in the pool (run in a worker thread)."""
        out = []
        for _ in range(n):
            name = uuid.uuid4().hex
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | self.FLAGS
            os.close(os.open(name, flags, 0o600, dir_fd=self.pool_fd))
            out.append(name)
        return out


def _private_opener(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_EXCL | os.O_NOFOLLOW, 0o600)


class _EvictingLRU(cachetools.LRUCache):
    """node id -> size in bytes; evicting calls back so the content file is removed."""

    def __init__(self, maxsize: int, on_evict: Callable[[int], None]) -> None:
        super().__init__(maxsize=maxsize, getsizeof=lambda size: max(1, size))
        self._on_evict = on_evict

    def popitem(self):
        key, value = super().popitem()
        self._on_evict(key)
        return key, value
