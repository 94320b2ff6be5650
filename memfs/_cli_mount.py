"""`memfs mount`, `unmount`, `sync` and `status`."""

from __future__ import annotations

COMMANDS: dict = {}
