"""Memory paths, store slugs and the marker file, exactly as `store-api.md` says: both ends check
paths here, so a path the client sends is one the server accepts."""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from .._exceptions import InvalidPath

MAX_PATH_BYTES = 1_024
MAX_NAME_BYTES = 255
MAX_PATH_SEGMENTS = 20

MARKER_NAME = ".anthropic-memory-store"
MARKER_PATH = "/" + MARKER_NAME


def marker_content(store_id: str) -> bytes:
    """The marker's exact content: `version 1\\n<store_id>`, no trailing newline."""
    return f"version 1\n{store_id}".encode()


def _nfc(text: str, what: str) -> str:
    """`text` in NFC, once no character is a control or format one, a lone
    surrogate, or the separator U+2028 or U+2029 (which the SDK names apart)."""
    if text.isascii() and text.isprintable():
        return text
    for ch in text:
        if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp"):
            raise InvalidPath(f"{what} may not contain the character U+{ord(ch):04X}")
    return unicodedata.normalize("NFC", text)


def check_name(name: str) -> None:
    """Raise InvalidPath unless `name` may be one segment of a memory path."""
    if name in ("", ".", ".."):
        raise InvalidPath(f"a path segment may not be {name!r}")
    if "/" in name:
        raise InvalidPath("a path segment may not contain '/'")
    if _nfc(name, "a path") != name:
        raise InvalidPath("a path must be NFC-normalised")


def normalize_path(path: Any) -> str:
    """The NFC form of a memory path, or InvalidPath with the first rule it breaks."""
    if not isinstance(path, str):
        raise InvalidPath("path must be a string")
    if not path.startswith("/"):
        raise InvalidPath("path must start with '/'")
    if path == "/":
        raise InvalidPath("path must have at least one segment")
    nfc = _nfc(path, "path")
    if len(nfc.encode("utf-8")) > MAX_PATH_BYTES:
        raise InvalidPath(f"path is longer than {MAX_PATH_BYTES} bytes")
    segments = nfc[1:].split("/")
    for segment in segments:
        if segment == "":
            raise InvalidPath("path may not have an empty segment")
        if segment in (".", ".."):
            raise InvalidPath(f"path may not have a {segment!r} segment")
    if len(segments) > MAX_PATH_SEGMENTS:
        raise InvalidPath(
            f"path has {len(segments)} segments; a path has at most {MAX_PATH_SEGMENTS}"
        )
    return nfc


def path_segments(path: str) -> int:
    """How many segments a clean absolute path has (`/a/b` has 2, `/` none)."""
    return 0 if path == "/" else path.count("/")


def normalize_prefix(prefix: Any) -> str:
    """A `path_prefix`: `/`, or whole segments ending in `/`."""
    if not isinstance(prefix, str) or not prefix.startswith("/") or not prefix.endswith("/"):
        raise InvalidPath("path_prefix must start and end with '/'")
    return prefix if prefix == "/" else normalize_path(prefix[:-1]) + "/"


def is_ancestor(ancestor: str, path: str) -> bool:
    """True when `ancestor` is a proper ancestor folder of `path` (`/a` of
    `/a/b`, `/` of `/a`), both clean absolute paths: memory paths or the host's."""
    return path != ancestor and path.startswith(ancestor.rstrip("/") + "/")


def parent_path(path: str) -> str:
    """`/a/b` → `/a`; `/a` → `/`."""
    return path.rsplit("/", 1)[0] or "/"


def join_path(parent: str, name: str) -> str:
    return ("" if parent == "/" else parent) + "/" + name


_SLUG_RUN = re.compile(r"[^a-z0-9]+")


def slugify(name: str) -> str:
    """ "User Preferences" → "user-preferences"; an empty result becomes "store"."""
    return _SLUG_RUN.sub("-", name.lower()).strip("-") or "store"


def listed_path_problem(path: Any) -> str | None:
    """Why a path the store lists cannot stand for a file here (the end of a
    sentence naming it), or None: the store is trusted for nothing it names."""
    if not isinstance(path, str):
        return "it is not a string"
    if "\x00" in path:
        return "it holds a NUL character"
    if not path.startswith("/"):
        return "it does not start with '/'"
    if path == "/":
        return "it names no file"
    if path.endswith("/"):
        return "it ends with '/'"
    try:
        size = len(path.encode("utf-8"))
    except UnicodeEncodeError:
        return "it is not valid Unicode"
    if size > MAX_PATH_BYTES:
        return f"it is longer than {MAX_PATH_BYTES:,} bytes"
    for segment in path[1:].split("/"):
        if segment == "":
            return "it has an empty segment"
        if segment in (".", ".."):
            return f"it has a {segment!r} segment"
    if path == MARKER_PATH:
        return "it is the marker's path, which memfs keeps"
    if path.startswith(MARKER_PATH + "/"):
        return "it is under the marker's path, which memfs keeps"
    return None
