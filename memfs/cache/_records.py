"""The operations a record of the journal's redo log holds, and their encoding.

A change is committed as one record of the redo log (memfs/cache/_redo.py)
holding its operations: each a tuple, its code first, then its arguments
(the journal says what each code does to SQLite).

The operations part of a record, format 2 (`FORMAT`), the one written:

    one byte, the format's number (2), then the operations as compact ASCII
    JSON, an array of arrays, one per operation, its code first:
    [["c",17,5],["w",5,1717171717000000000,1717171717000000000,17]]

A content operation ("c") holds the content's length there; the bytes
themselves follow the operations part in the record, in the order of those
operations. Values are what JSON holds: integers, text (non-ASCII escaped,
so any name memfs keeps reads back as it was), floats (written as Python
writes them, read back exactly), null, booleans, and arrays (the ids of
"X").

Format 1 was `marshal` of the list of tuples, which Python does not promise
to read across its versions. memfs 0.1.0 wrote it; a record of format 1
begins with marshal's list code ("[", or it with the reference flag, 0xDB),
which no record of format 2 does. It is read only so that a cache such a
version left at a kill opens with what its log held; those records are
applied when the cache opens, and the log then goes on in format 2.
"""

from __future__ import annotations

import json
import marshal
from typing import Any

FORMAT = 2
"""The format of the operations part of the records written (see the module)."""
_FORMAT_BYTE = bytes([FORMAT])
_MARSHAL_LIST = (b"[", b"\xdb")
"""The first byte of a record of format 1: marshal's list, without or with its reference flag."""

Operation = tuple[Any, ...]
"""One operation: its code, then its arguments."""

CONTENT = "c"
"""The code of the operation whose last argument is a content carried after the
operations (in the record, the operation holds its length)."""

_to_json = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode


def encode(ops: list[Operation]) -> bytes:
    """The operations part of a record of `ops` (format 2)."""
    return _FORMAT_BYTE + _to_json(ops).encode("ascii")


def decode(data: bytes) -> list[Operation] | None:
    """The operations of a record's operations part (format 2, or 1 as older
    versions wrote it); None when it is not one."""
    raw: Any
    try:
        if data[:1] == _FORMAT_BYTE:
            raw = json.loads(data[1:])
        elif data[:1] in _MARSHAL_LIST:
            raw = marshal.loads(data)
        else:
            return None
    except (ValueError, EOFError, TypeError):
        return None
    if not isinstance(raw, list):
        return None
    ops: list[Operation] = []
    for op in raw:
        if not isinstance(op, list | tuple) or not op or not isinstance(op[0], str):
            return None
        if op[0] == CONTENT and not (isinstance(op[-1], int) and op[-1] >= 0):
            return None
        ops.append(tuple(op))
    return ops
