"""The operations a record of the journal's redo log holds: what each one is,
what it does to SQLite, and how a record writes them.

A change is committed as one record of the redo log (memfs/cache/_redo.py)
holding its operations: each a tuple, its code (`Op`) first, then its
arguments, which are the parameters of its statement in `APPLY`; `run`
applies one to SQLite, whether from a record or inside a batch.

The operations part of a record (after its header, whose layout is
`HEADER` in memfs/cache/_redo.py), format 2 (`FORMAT`), the one written:

    one byte, the format's number (2), then the operations as compact ASCII
    JSON, an array of arrays, one per operation, its code first:
    [["c",17,5],["w",5,1717171717000000000,1717171717000000000,17]]

A content operation (`Op.PUT_CONTENT`, "c") holds the content's length
there; the bytes themselves follow the operations part in the record, in
the order of those operations. Values are what JSON holds: integers, text
(non-ASCII escaped, so any name memfs keeps reads back as it was), floats
(written as Python writes them, read back exactly), null, booleans, and
arrays (the ids of "X"). A record holding a code not in `Op` is not read.

Format 1 was `marshal` of the list of tuples, which Python does not promise
to read across its versions; memfs wrote it before format 2 (no release
did). A record of format 1 begins with marshal's list code ("[", or it with
the reference flag, 0xDB), which no record of format 2 does. It is read
only so that a cache such a version left at a kill opens with what its log
held: opening applies those records, and the log goes on in format 2 (on a
full disk, after them). Its "S" (emptying a table migration 6 drops) is
left out.
"""

from __future__ import annotations

import enum
import json
import marshal
import sqlite3
from typing import Any

from ._schema import INSERT_NODE, UPDATE_NODE, UPDATE_NODE_IN_PLACE

FORMAT = 2
"""The format of the operations part of the records written (see the module)."""
_FORMAT_BYTE = bytes([FORMAT])
_MARSHAL_LIST = (b"[", b"\xdb")
"""The first byte of a record of format 1: marshal's list, without or with its reference flag."""


class Op(enum.StrEnum):
    """The operations of the redo log; each value is the code a record holds."""

    INSERT_NODE = "i"
    """A new node's row: its id, then its columns (`NODE_FIELDS`)."""
    SAVE_NODE = "u"
    """A node's whole row: its columns, then its id."""
    SAVE_NODE_IN_PLACE = "p"
    """A node's row whose (parent, name) did not change: the columns after them, then its id."""
    DELETE_NODE = "d"
    """A node's row goes: its id."""
    ADD_TOMBSTONE = "t"
    """A pending delete: memory id, path, base sha, when it was deleted."""
    DROP_TOMBSTONE = "T"
    """A pending delete is done: its memory id."""
    RECORD_UPLOAD = "U"
    """An upload in flight: node id, memory id (None for a create), path, sha."""
    UPLOAD_ANSWERED = "A"
    """The upload of a node was answered: its id."""
    PUT_CONTENT = "c"
    """A file's whole content: its id, then the content (in a record, its length:
    the bytes follow the operations)."""
    DROP_CONTENT = "x"
    """A file's content goes: its id."""
    DROP_CONTENTS = "X"
    """The contents of several files go: the list of their ids."""
    WRITTEN = "w"
    """A file's size and times after a write: size, mtime, ctime, its id."""
    SET_META = "m"
    """A meta value: key, value (None: unset)."""


Operation = tuple[Any, ...]
"""One operation: its `Op`, then its arguments."""

APPLY: dict[Op, str] = {
    Op.INSERT_NODE: INSERT_NODE,
    Op.SAVE_NODE: UPDATE_NODE,
    Op.SAVE_NODE_IN_PLACE: UPDATE_NODE_IN_PLACE,
    Op.DELETE_NODE: "DELETE FROM nodes WHERE id = ?",
    Op.ADD_TOMBSTONE: "INSERT OR REPLACE INTO tombstones (memory_id, path, base_sha, deleted_at) "
    "VALUES (?, ?, ?, ?)",
    Op.DROP_TOMBSTONE: "DELETE FROM tombstones WHERE memory_id = ?",
    Op.RECORD_UPLOAD: "INSERT OR REPLACE INTO uploads (node_id, memory_id, path, sha) "
    "VALUES (?, ?, ?, ?)",
    Op.UPLOAD_ANSWERED: "DELETE FROM uploads WHERE node_id = ?",
    Op.PUT_CONTENT: "INSERT INTO contents (node_id, data) VALUES (?, ?) "
    "ON CONFLICT (node_id) DO UPDATE SET data = excluded.data",
    Op.DROP_CONTENT: "DELETE FROM contents WHERE node_id = ?",
    Op.DROP_CONTENTS: "DELETE FROM contents WHERE node_id = ?",
    Op.WRITTEN: "UPDATE nodes SET size = ?, mtime_ns = ?, ctime_ns = ? WHERE id = ?",
    Op.SET_META: "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
}
"""What each operation does to SQLite: its statement, whose parameters are the
operation's arguments (`DROP_CONTENTS` runs it once per id of its list)."""


def run(db: sqlite3.Connection, op: Operation) -> None:
    """Apply one operation to SQLite."""
    code = op[0]
    if code == Op.DROP_CONTENTS:
        db.executemany(APPLY[code], [(i,) for i in op[1]])
    else:
        db.execute(APPLY[code], op[1:])


_BY_CODE = {op.value: op for op in Op}
_GONE = ("S",)
"""Codes of format 1 whose operation memfs no longer has, left out when read:
"S" emptied the table of fsync's copies that migration 6 drops."""
_to_json = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode


def encode(ops: list[Operation]) -> bytes:
    """The operations part of a record of `ops` (format 2)."""
    return _FORMAT_BYTE + _to_json(ops).encode("ascii")


def decode(data: bytes) -> list[Operation] | None:
    """The operations of a record's operations part (format 2, or 1 as older
    versions wrote it); None when it is not one."""
    raw: Any
    format_1 = data[:1] in _MARSHAL_LIST
    try:
        if data[:1] == _FORMAT_BYTE:
            raw = json.loads(data[1:])
        elif format_1:
            raw = marshal.loads(data)
        else:
            return None
    except (ValueError, EOFError, TypeError):
        return None
    if not isinstance(raw, list):
        return None
    ops: list[Operation] = []
    for op in raw:
        if format_1 and isinstance(op, tuple) and op and op[0] in _GONE:
            continue
        known = isinstance(op, list | tuple) and op and isinstance(op[0], str)
        code = _BY_CODE.get(op[0]) if known else None
        if code is None:
            return None
        if code is Op.PUT_CONTENT and not (isinstance(op[-1], int) and op[-1] >= 0):
            return None
        ops.append((code, *op[1:]))
    return ops
