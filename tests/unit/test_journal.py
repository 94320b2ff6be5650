"""The journal's one layout: a new cache folder gets it fresh, and a cache
folder of another layout (made by a development version, which no release
was) is refused with one sentence and left as it is."""

from __future__ import annotations

import os
import sqlite3

import pytest

from memfs._exceptions import CacheLayoutRefused
from memfs.cache import ROOT_ID, StoreCache
from memfs.cache._schema import SCHEMA_VERSION, WAL_FILLED

STORE = "memstore_journal"


def old_layout(root, version: int) -> bytes:
    """A cache folder whose journal says `version`, as main's code of issue 29's
    time made them (user_version 6, contents in a table); returns its bytes."""
    folder = root / STORE
    os.makedirs(folder, mode=0o700)
    os.chmod(root, 0o700)
    db = sqlite3.connect(folder / "journal.sqlite3", isolation_level=None)
    db.executescript(
        "CREATE TABLE nodes (id INTEGER PRIMARY KEY, parent INTEGER, name TEXT);"
        "CREATE TABLE contents (node_id INTEGER PRIMARY KEY, data BLOB NOT NULL);"
        "INSERT INTO nodes VALUES (1, 0, ''), (16, 1, 'kept.md');"
        "INSERT INTO contents VALUES (16, x'6869');"
        f"PRAGMA user_version = {version};"
    )
    db.close()
    return (folder / "journal.sqlite3").read_bytes()


@pytest.mark.parametrize("version", [0, 6, 8, SCHEMA_VERSION + 1])
def test_a_cache_folder_of_another_layout_is_refused_and_left_as_it_is(tmp_path, version):
    """Layout 8 is the last one with the redo log (its records would be lost)."""
    before = old_layout(tmp_path, version)
    with pytest.raises(CacheLayoutRefused) as refused:
        StoreCache(str(tmp_path), STORE)
    assert str(refused.value) == (
        f"the cache at {tmp_path / STORE} was made by a development version of memfs "
        f"(layout {version}, this one reads {SCHEMA_VERSION}); move it aside "
        "(it holds no release's data) and mount again"
    )
    assert (tmp_path / STORE / "journal.sqlite3").read_bytes() == before


def test_a_new_cache_folder_gets_the_one_layout_and_opens_again(tmp_path):
    cache = StoreCache(str(tmp_path), STORE)
    cache.mkdir(1, "kept", 0o755)
    assert cache.journal.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    cache.close()
    again = StoreCache(str(tmp_path), STORE)
    assert again.find("/kept") is not None
    again.close()


def test_a_new_cache_folder_keeps_the_blocks_its_wal_is_given(tmp_path):
    """SQLite deletes the WAL of an empty database when it opens it: the blocks
    a new journal's WAL is given ahead must still be there once it is open."""
    cache = StoreCache(str(tmp_path), STORE)
    st = os.stat(cache.journal.path + "-wal")
    assert st.st_size >= WAL_FILLED and st.st_blocks * 512 >= WAL_FILLED
    cache.close()


def written_bytes() -> int:
    """What this process has made dirty for the disk so far (/proc/self/io)."""
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("write_bytes:"))


def test_a_change_makes_a_few_pages_of_the_wal_dirty(tmp_path):
    """The WAL's blocks given ahead were written a page at a time: a commit of
    one small change dirties (and so writes back) a few pages, not a large
    page-cache folio that one large write of zeros would have left."""
    before = written_bytes()
    (tmp_path / "probe").write_bytes(bytes(256 * 1024))
    if written_bytes() - before < 256 * 1024:
        pytest.skip(f"the filesystem of {tmp_path} counts no written bytes (tmpfs)")
    cache = StoreCache(str(tmp_path), STORE)
    before = written_bytes()
    cache.mkdir(ROOT_ID, "notes", 0o755)
    assert written_bytes() - before <= 64 * 1024
    cache.close()
