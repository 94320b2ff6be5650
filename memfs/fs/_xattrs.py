"""The `user.memfs.*` extended attributes: where each regular file stands with
the store, for any tool to read (`getfattr -d -m user.memfs FILE`,
`os.getxattr`). docs/semantics.md shows them.

- `user.memfs.state`: the word (`synced`, `pending`, `refused`, `overruled`,
  `local-only`), then `: ` and a short reason where it has one;
- `user.memfs.memory_id`, `user.memfs.sha256`: the memory the store holds for
  the file and the sha of its content, absent when the store holds none;
- `user.memfs.kept_copy`: on an overruled file, the conflict copy's path.

They are read-only; folders have none. Any other name is absent (ENODATA)
and cannot be set or removed (ENOTSUP): the store keeps no attributes.
"""

from __future__ import annotations

from ..cache import FileState

PREFIX = b"user.memfs."
STATE = PREFIX + b"state"
MEMORY_ID = PREFIX + b"memory_id"
SHA256 = PREFIX + b"sha256"
KEPT_COPY = PREFIX + b"kept_copy"


def extended_attributes(state: FileState) -> dict[bytes, bytes]:
    """The attributes a file with `state` has, name -> value, in the order listed."""
    out = {STATE: state.text.encode("utf-8", "surrogateescape")}
    for name, value in (
        (MEMORY_ID, state.memory_id),
        (SHA256, state.sha256),
        (KEPT_COPY, state.kept_copy),
    ):
        if value is not None:
            out[name] = value.encode("utf-8", "surrogateescape")
    return out


def is_memfs_name(name: bytes) -> bool:
    return name.startswith(PREFIX)
