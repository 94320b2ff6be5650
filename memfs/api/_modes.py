"""The modes of memfs's own that layers from the command line down to the
sync name between them, here in the lowest layer: `Deletions` is read by
the command line, carried to a store process in its spec (memfs.control,
which must not load the sync and trio with it) and acted on by the sync.
"""

from __future__ import annotations

import enum


class Deletions(enum.StrEnum):
    """What a local delete does in the store (`--sync-deletions`)."""

    ENABLED = "enabled"
    LOG_ONLY = "log_only"
    DISABLED = "disabled"
