"""The operations a record of the journal's redo log holds: what each one is,
what it does, and how a record writes them.

A change is committed as one record of the redo log (memfs/cache/_redo.py)
holding its operations: each a tuple, its code (`Op`) first, then its
arguments. A row operation's arguments are the parameters of its statement
in `APPLY` (`run` applies one to SQLite); a content operation's are what it
does to the file's content file (memfs/cache/_files.py).

The operations part of a record (after its header, whose layout is
`HEADER` in memfs/cache/_redo.py): one byte, the format's number (`FORMAT`),
then the operations as compact ASCII JSON, an array of arrays, one per
operation, its code first:

    [["P",17,0,5,5],["w",5,1717171717000000000,1717171717000000000,17]]

A content operation (`Op.PATCH`, `Op.PUT_CONTENT`) holds the length of its
bytes there as its last argument; the bytes themselves follow the operations
part in the record, in the order of those operations. Values are what JSON
holds: integers, text (non-ASCII escaped, so any name memfs keeps reads back
as it was), floats (written as Python writes them, read back exactly), null
and booleans. A record holding a code not in `Op` is not read.
"""

from __future__ import annotations

import enum
import json
import sqlite3
from typing import Any

from ._schema import INSERT_NODE, UPDATE_NODE, UPDATE_NODE_IN_PLACE

FORMAT = 2
"""The format of the operations part of the records written (see the module)."""
_FORMAT_BYTE = bytes([FORMAT])


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
    PATCH = "P"
    """Bytes a write put in a file's content: its id, the offset, the content's
    size after it, then the bytes (in a record, their length). No bytes: a
    truncate to that size."""
    WRITTEN = "w"
    """A file's size and times after a write: size, mtime, ctime, its id."""
    SET_META = "m"
    """A meta value: key, value (None: unset)."""


CONTENT_OPS = (Op.PUT_CONTENT, Op.PATCH)
"""The operations that change a content file, whose bytes follow the operations."""

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
    Op.WRITTEN: "UPDATE nodes SET size = ?, mtime_ns = ?, ctime_ns = ? WHERE id = ?",
    Op.SET_META: "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
}
"""What each row operation does to SQLite: its statement, whose parameters are
the operation's arguments."""


def run(db: sqlite3.Connection, op: Operation) -> None:
    """Apply one operation to SQLite (a content operation has nothing there)."""
    statement = APPLY.get(op[0])
    if statement is not None:
        db.execute(statement, op[1:])


_BY_CODE = {op.value: op for op in Op}
_to_json = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode


def encode(ops: list[Operation]) -> bytes:
    """The operations part of a record of `ops`."""
    return _FORMAT_BYTE + _to_json(ops).encode("ascii")


def decode(data: bytes) -> list[Operation] | None:
    """The operations of a record's operations part; None when it is not one."""
    if data[:1] != _FORMAT_BYTE:
        return None
    try:
        raw = json.loads(data[1:])
    except ValueError:
        return None
    if not isinstance(raw, list):
        return None
    ops: list[Operation] = []
    for op in raw:
        known = isinstance(op, list) and op and isinstance(op[0], str)
        code = _BY_CODE.get(op[0]) if known else None
        if code is None:
            return None
        if code in CONTENT_OPS and not (isinstance(op[-1], int) and op[-1] >= 0):
            return None
        ops.append((code, *op[1:]))
    return ops
