"""The journal's migrations: a cache made by an older memfs opens, keeps what
it held, and gains the new columns empty (owners: the mount's default)."""

from __future__ import annotations

import os
import sqlite3

from memfs.cache import StoreCache
from memfs.cache._schema import MIGRATIONS, SCHEMA

STORE = "memstore_journal"


def test_a_journal_of_user_version_1_gains_owners(tmp_path):
    folder = tmp_path / STORE
    os.makedirs(folder / "contents", mode=0o700)
    os.chmod(tmp_path, 0o700)
    os.chmod(folder, 0o700)
    db = sqlite3.connect(folder / "journal.sqlite3", isolation_level=None)
    db.executescript(SCHEMA)
    db.executescript(f"BEGIN; {MIGRATIONS[0]}; PRAGMA user_version = 1; COMMIT;")
    db.execute(
        "INSERT INTO nodes (id, parent, name, kind, mode, mtime_ns, ctime_ns, local_dir) "
        "VALUES (1, 0, '', 'dir', 493, 5, 5, 1), (16, 1, 'old', 'dir', 493, 7, 7, 1)"
    )
    db.close()

    cache = StoreCache(str(tmp_path), STORE)
    try:
        version = cache.db.execute("PRAGMA user_version").fetchone()[0]
        assert version == len(MIGRATIONS)
        old = cache.find("/old")
        assert old is not None
        assert (old.uid, old.gid, old.atime_ns, old.mtime_ns) == (None, None, None, 7)
        cache.chown(old.id, 1234, None)
    finally:
        cache.close()
    cache = StoreCache(str(tmp_path), STORE)
    try:
        old = cache.find("/old")
        assert old is not None
        assert (old.uid, old.gid) == (1234, None)
    finally:
        cache.close()


def test_a_journal_of_user_version_4_names_its_columns_as_the_node_s_attributes(tmp_path):
    """The columns `dirty`, `changed` and `local_dir` keep `edited`, `pending`
    and `made_here`: a journal made before they were renamed opens with its
    rows as they were, under the attributes' names, and without the two
    tables of a layout of contents no release wrote."""
    folder = tmp_path / STORE
    os.makedirs(folder, mode=0o700)
    os.chmod(tmp_path, 0o700)
    db = sqlite3.connect(folder / "journal.sqlite3", isolation_level=None)
    db.executescript(SCHEMA)
    for number, script in enumerate(MIGRATIONS[:4], start=1):
        db.executescript(f"BEGIN; {script}; PRAGMA user_version = {number}; COMMIT;")
    db.execute(
        "INSERT INTO nodes (id, parent, name, kind, mode, mtime_ns, ctime_ns, local_dir) "
        "VALUES (1, 0, '', 'dir', 493, 5, 5, 1), (16, 1, 'here', 'dir', 493, 7, 7, 1)"
    )
    db.execute(
        "INSERT INTO nodes (id, parent, name, kind, mode, mtime_ns, ctime_ns, size, dirty, "
        "changed, cached) VALUES (17, 16, 'a.md', 'file', 420, 8, 8, 2, 1, 1, 1)"
    )
    db.execute("INSERT INTO contents VALUES (17, x'6869')")
    db.close()

    cache = StoreCache(str(tmp_path), STORE)
    try:
        tables = {row[0] for row in cache.db.execute("SELECT name FROM sqlite_master")}
        assert not {"synced", "wal_room"} & tables  # made by migration 3, never used
        columns = [row[1] for row in cache.db.execute("PRAGMA table_info(nodes)")]
        assert {"edited", "pending", "made_here"} <= set(columns)
        assert not {"dirty", "changed", "local_dir"} & set(columns)
        here, a = cache.find("/here"), cache.find("/here/a.md")
        assert here is not None and here.made_here
        assert a is not None and (a.edited, a.pending, a.cached) == (True, True, True)
        assert cache.read_content(a) == b"hi"
        assert [c.path for c in cache.changes()] == ["/here/a.md"]
    finally:
        cache.close()
