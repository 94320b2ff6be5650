"""Store ids: the one form a store id must have before memfs lets it name
anything on disk.

A store id names the store's cache folder, its files in the runtime folder,
its log and the `fsname=` option of its mount. It comes from outside memfs
(`--store`, a resources file, a session's work item), so a value such as
`../escaped-store` would put the journal outside the cache, and one with a
comma would add mount options. Every store id memfs uses is checked here
first: `memstore_` and then letters and digits (the ids the API makes:
`memfs serve` uses 24 base62 characters; the hosted API's are of the same
alphabet), at most `MAX_STORE_ID_LENGTH` characters in all.
"""

from __future__ import annotations

import re

from .._exceptions import InvalidStoreId

STORE_ID_PREFIX = "memstore_"
MAX_STORE_ID_LENGTH = 128
"""Characters in all: the runtime folder's names add 25 to it, well within 255 bytes."""

STORE_ID_FORM = f"{STORE_ID_PREFIX} followed by letters and digits"
"""The form, as the refusals say it."""

_STORE_ID = re.compile(
    f"{STORE_ID_PREFIX}[A-Za-z0-9]{{1,{MAX_STORE_ID_LENGTH - len(STORE_ID_PREFIX)}}}"
)
_SHOWN = 60
"""Characters of a refused value the sentence repeats."""


def store_id_problem(value: object) -> str | None:
    """Why `value` is not a store id, as the end of a sentence ("... is not a
    store id: ..."); None when it is one."""
    if not isinstance(value, str):
        return "a store id is a string"
    if _STORE_ID.fullmatch(value) is not None:
        return None
    if len(value) > MAX_STORE_ID_LENGTH:
        return f"a store id has at most {MAX_STORE_ID_LENGTH} characters"
    return f"a store id is {STORE_ID_FORM}"


def shown_store_id(value: object) -> str:
    """A refused value as a sentence quotes it: its repr, cut when long."""
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


def check_store_id(value: object) -> str:
    """`value` itself when it is a store id of the API's form; else
    InvalidStoreId, whose one sentence quotes it and says the form."""
    problem = store_id_problem(value)
    if problem is not None:
        raise InvalidStoreId(f"{shown_store_id(value)} is not a store id: {problem}")
    assert isinstance(value, str)
    return value
