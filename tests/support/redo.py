"""The redo log of a cache folder as the next open will read it: its chain
of records after the journal's last applied one, each with its place in the
file, so that a test can damage one record as a disk or a person would."""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path

from memfs.cache._redo import HEADER

REDO_LOG = "journal.sqlite3-redo"


@dataclass(frozen=True)
class Record:
    at: int
    """Its offset in the log."""
    length: int
    contents: bytes
    """The contents it carries (a write's bytes), one after the other."""


def journal_meta(folder: Path) -> dict[str, str | None]:
    """The meta table of a cache folder's journal, read from a copy (opening
    the journal itself would leave a `-shm` file beside it)."""
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("journal.sqlite3", "journal.sqlite3-wal"):
            if (folder / name).exists():
                shutil.copyfile(folder / name, os.path.join(tmp, name))
        db = sqlite3.connect(os.path.join(tmp, "journal.sqlite3"))
        try:
            return dict(db.execute("SELECT key, value FROM meta"))
        finally:
            db.close()


def redo_chain(folder: Path) -> list[Record]:
    """The records the next open of the cache in `folder` will apply."""
    meta = journal_meta(folder)
    log_id = bytes.fromhex(meta["redo_log_id"] or "")
    expected = int(meta.get("redo_log_applied") or 0) + 1
    data = (folder / REDO_LOG).read_bytes()
    out = []
    at = 0
    while at + HEADER.size <= len(data):
        got_id, seq, ops_size, contents_size, _ = HEADER.unpack_from(data, at)
        if got_id != log_id or seq != expected:
            break
        length = HEADER.size + ops_size + contents_size
        out.append(Record(at, length, data[at + HEADER.size + ops_size : at + length]))
        at, expected = at + length, expected + 1
    return out


def record_with(folder: Path, content: bytes) -> Record | None:
    """The record of the chain that carries `content`, if one does."""
    found = [r for r in redo_chain(folder) if content in r.contents]
    return found[-1] if found else None
