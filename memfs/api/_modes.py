"""memfs's own modes that layers from the command line down to the sync name
between them, here in the lowest layer so that memfs.control, which carries
them, need not load the sync.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Deletions(enum.StrEnum):
    """What a local delete does in the store (`--sync-deletions`)."""

    ENABLED = "enabled"
    LOG_ONLY = "log_only"
    DISABLED = "disabled"


class Outcome(enum.StrEnum):
    SAVED = "saved"
    REFUSED = "refused"
    NOT_CONFIRMED = "not_confirmed"
    OVERRULED = "overruled"


@dataclass(frozen=True)
class Confirmation:
    """What became of one file `memfs sync FILE` named, field for field an
    object of `memfs sync FILE --json` (there `path` is the path as the user
    gave it; in the store process, the memory path)."""

    path: str
    outcome: str
    """An `Outcome`'s word."""
    memory_id: str | None = None
    sha256: str | None = None
    """Of what the store holds."""
    reason: str | None = None
    """Why it was refused or not confirmed."""
    kept_copy: str | None = None
    """Where an overruled file's local edit is kept (an absolute path)."""
