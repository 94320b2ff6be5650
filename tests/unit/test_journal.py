"""The journal's one layout: a new cache is made with it, and a cache of an
earlier layout (one no release wrote) is refused with one sentence telling
the user to move it aside."""

from __future__ import annotations

import os
import sqlite3

import pytest

from memfs._exceptions import CacheCorrupt
from memfs.cache import ROOT_ID, StoreCache

STORE = "memstore_journal"


def test_a_cache_of_an_earlier_layout_is_refused_with_one_sentence(tmp_path):
    folder = tmp_path / STORE
    os.makedirs(folder, mode=0o700)
    os.chmod(tmp_path, 0o700)
    db = sqlite3.connect(folder / "journal.sqlite3", isolation_level=None)
    db.executescript(
        "CREATE TABLE nodes (id INTEGER PRIMARY KEY, parent INTEGER, name TEXT);"
        "CREATE TABLE contents (node_id INTEGER PRIMARY KEY, data BLOB);"
        "PRAGMA user_version = 6;"
    )
    db.close()
    with pytest.raises(CacheCorrupt) as caught:
        StoreCache(str(tmp_path), STORE)
    assert str(caught.value) == (
        f"the cache at {folder} has a layout of an earlier development version of memfs "
        f"(no release wrote it): move it aside (mv {folder} {folder}.old) and mount again"
    )
    os.rename(folder, f"{folder}.old")
    StoreCache(str(tmp_path), STORE).close()


def test_a_new_cache_is_made_and_opens_again_as_it_was_left(tmp_path):
    cache = StoreCache(str(tmp_path), STORE)
    folder = cache.mkdir(ROOT_ID, "notes", 0o755)
    cache.close()
    again = StoreCache(str(tmp_path), STORE)
    assert again.find("/notes").id == folder.id
    again.close()
