"""Folder listings: what `opendir` found, answered to `readdir` page by page.

What is promised:

- A listing is the folder as it stood at `opendir` (in the root, the store's
  marker first), and a page starts where the kernel's offset says in it: a
  name made or removed while a program reads the folder never makes another
  entry repeat or go missing.
- An entry removed since `opendir` (or unlinked while open) is left out of
  the page that would have held it.
- Each entry carries its attributes (the kernel lists with READDIRPLUS).
"""

from __future__ import annotations

import os
from typing import Any

import pyfuse3

from ..api import MARKER_NAME
from ..cache import ROOT_ID, FilesystemFace
from ._attributes import MARKER_INODE, Attributes
from ._handles import Handles

Entry = tuple[bytes, int]
"""(name, inode) of one entry of a listing."""


class DirListings:
    """The listings one mount's programs have open."""

    def __init__(self, cache: FilesystemFace, attributes: Attributes) -> None:
        self.cache = cache
        self.attributes = attributes
        self._handles: Handles[list[Entry]] = Handles()

    def open(self, inode: int) -> int:
        """List a folder as it stands: the handle of the listing."""
        listing = [(os.fsencode(name), node.id) for name, node in self.cache.list_dir(inode)]
        if inode == ROOT_ID:
            listing.insert(0, (MARKER_NAME.encode(), MARKER_INODE))
        return self._handles.add(listing)

    def entries(self, fh: int) -> list[Entry]:
        """The entries of an open listing, in order (none for a handle not open)."""
        return self._handles.find(fh) or []

    def reply(self, fh: int, start_id: int, token: Any) -> None:
        """Answer the kernel's page of a listing from entry `start_id` on, for
        as long as it takes entries."""
        listing = self.entries(fh)
        for i in range(start_id, len(listing)):
            name, inode = listing[i]
            if inode == MARKER_INODE:
                attrs = self.attributes.of_marker()
            else:
                node = self.cache.get(inode)
                if node is None or node.orphan:
                    continue
                attrs = self.attributes.of(node)
            if not pyfuse3.readdir_reply(token, name, attrs, i + 1):
                return

    def close(self, fh: int) -> None:
        self._handles.pop(fh)
