"""The SQLite file behind `memfs serve`: its one schema, its clock and its write transactions. One
connection, on the one event-loop thread; `BEGIN IMMEDIATE` keeps a second process from
interleaving. WAL with `synchronous=NORMAL`: a commit survives the process dying, and only a power
loss or a kernel crash may take the last ones back."""

from __future__ import annotations

import contextlib
import os
import secrets
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from .._exceptions import Conflict, InvalidRequest, NotFound

SCHEMA: tuple[str, ...] = (
    """CREATE TABLE stores (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    description TEXT NOT NULL,
    metadata TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    archived_at TEXT
)""",
    """CREATE INDEX stores_by_created ON stores (created_at, seq)""",
    """CREATE TABLE memories (
    id TEXT PRIMARY KEY,
    store_id TEXT NOT NULL,
    path TEXT NOT NULL,
    content TEXT NOT NULL,
    content_sha256 TEXT NOT NULL,
    content_size_bytes INTEGER NOT NULL,
    version_id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (store_id, path)
)""",
    """CREATE TABLE versions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    store_id TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    operation TEXT NOT NULL,
    created_at TEXT NOT NULL,
    path TEXT,
    content TEXT,
    content_sha256 TEXT,
    content_size_bytes INTEGER,
    created_by TEXT,
    redacted_at TEXT,
    redacted_by TEXT
)""",
    """CREATE INDEX versions_by_store ON versions (store_id, created_at, seq)""",
    """CREATE INDEX versions_by_memory ON versions (memory_id, created_at, seq)""",
    """CREATE TABLE sessions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    token_sha256 TEXT NOT NULL UNIQUE,
    environment_id TEXT NOT NULL,
    title TEXT,
    metadata TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    created_by_token TEXT,
    status TEXT NOT NULL DEFAULT 'idle'
)""",
    """CREATE TABLE session_resources (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    session_id TEXT NOT NULL,
    store_id TEXT NOT NULL,
    access TEXT NOT NULL,
    name TEXT NOT NULL,
    description TEXT NOT NULL,
    instructions TEXT,
    mount_path TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (session_id, store_id)
)""",
    """CREATE INDEX session_resources_by_store ON session_resources (store_id)""",
)

SCHEMA_VERSION = 4
"""`PRAGMA user_version` of `SCHEMA`. Older layouts were never released, so
a file of another version is refused, not migrated."""

_ID_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def new_id(prefix: str) -> str:
    """`prefix_` plus 24 random letters and digits."""
    return prefix + "_" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(24))


def format_timestamp(moment: datetime) -> str:
    """RFC 3339 UTC with microseconds, fixed width: string order is time order."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")[:-6] + "Z"


def _make_private_folders(folder: str) -> None:
    """Create `folder` and its missing ancestors 0700 whatever the umask."""
    if os.path.isdir(folder):
        return
    _make_private_folders(os.path.dirname(folder))
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder, 0o700)
        os.chmod(folder, 0o700)


def columns(row: sqlite3.Row, *names: str) -> dict[str, Any]:
    """The row's values of the columns `names`, as an answer carries them."""
    return {name: row[name] for name in names}


class SQLiteFile:
    """The open database file: one it creates is 0600, whatever the umask
    (SQLite gives the -wal and -shm files the same mode)."""

    def __init__(self, path: str) -> None:
        _make_private_folders(os.path.dirname(os.path.abspath(path)))
        with contextlib.suppress(FileExistsError):
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            os.chmod(path, 0o600)
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.conn.row_factory = sqlite3.Row
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute("PRAGMA busy_timeout=10000")
        self.conn.execute("PRAGMA foreign_keys=OFF")
        with self.transaction("the schema"):
            # A new, empty file gets the tables; one of another version is refused.
            version = int(self.conn.execute("PRAGMA user_version").fetchone()[0])
            if version > SCHEMA_VERSION:
                raise sqlite3.DatabaseError(
                    f"its schema is version {version}; this memfs serve knows up to"
                    f" {SCHEMA_VERSION}: run a newer memfs"
                )
            if version < SCHEMA_VERSION:
                tables = {r[0] for r in self.conn.execute("SELECT name FROM sqlite_master")}
                if tables and "stores" not in tables:
                    raise sqlite3.DatabaseError(
                        "it is another program's database: give a file of its own"
                    )
                if tables:
                    raise sqlite3.DatabaseError(
                        f"its schema is version {version}, an older layout this memfs serve"
                        " does not read (it holds no released memfs's data): move the file"
                        " aside and start again"
                    )
                for statement in SCHEMA:
                    self.conn.execute(statement)
                self.conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        row = self.conn.execute(
            "SELECT max(t) FROM (SELECT max(created_at) AS t FROM versions"
            " UNION ALL SELECT max(updated_at) FROM stores"
            " UNION ALL SELECT max(updated_at) FROM sessions"
            " UNION ALL SELECT max(updated_at) FROM session_resources)"
        ).fetchone()
        self._last_time: str = row[0] or ""

    def one(self, sql: str, params: Any = ()) -> sqlite3.Row | None:
        row: sqlite3.Row | None = self.conn.execute(sql, params).fetchone()
        return row

    def row(self, sql: str, params: Any, missing: str) -> sqlite3.Row:
        """The first row `sql` finds; 404 saying `missing` when there is none."""
        row = self.one(sql, params)
        if row is None:
            raise NotFound(missing)
        return row

    def store(self, store_id: str, *, writable: bool = False) -> sqlite3.Row:
        """A store's row; 404 when there is none. `writable`: 400 when it is archived, the rule of
        creating and updating memories and of attaching it (deletes and redactions stay allowed)."""
        row = self.row(
            "SELECT * FROM stores WHERE id = ?",
            (store_id,),
            f"no memory store with id {store_id!r}",
        )
        if writable and row["archived_at"] is not None:
            raise InvalidRequest(f"memory store {store_id} is archived")
        return row

    def all(self, sql: str, params: Any = ()) -> list[sqlite3.Row]:
        rows: list[sqlite3.Row] = self.conn.execute(sql, params).fetchall()
        return rows

    def run(self, sql: str, params: Any = ()) -> None:
        self.conn.execute(sql, params)

    def now(self) -> str:
        """A timestamp strictly later than any this database handed out
        before, so that the version feed orders by time."""
        stamp = format_timestamp(datetime.now(UTC))
        if stamp <= self._last_time:
            last = datetime.fromisoformat(self._last_time)
            stamp = format_timestamp(last + timedelta(microseconds=1))
        self._last_time = stamp
        return stamp

    @contextlib.contextmanager
    def transaction(self, subject: str) -> Iterator[None]:
        """One write transaction, rolled back on any error. A change SQLite refuses on a constraint
        (something outside this server changed the file) is a 409 `Conflict` naming `subject`."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except sqlite3.IntegrityError:
            self.conn.execute("ROLLBACK")
            raise Conflict(
                f"{subject} conflicts with another change to the database;"
                " nothing was written, read it again and retry"
            ) from None
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")
