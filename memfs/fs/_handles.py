"""The handle numbers a mount gives the kernel, and what each stands for.

What is promised:

- Numbers count up from 1 and are never reused while the mount runs, so a
  request that comes with a handle already released finds nothing rather
  than another file: `get` refuses it with EBADF.
- Open files (`open`, `create`) and folder listings (`opendir`) are numbered
  apart, each in a table of its own, as the kernel keeps them.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from typing import Generic, TypeVar

import pyfuse3

from ..cache import Node

T = TypeVar("T")


@dataclass
class OpenFile:
    """What one `open()` or `create()` of a file holds."""

    node: Node | None
    """None: the store's marker, served from memory."""
    writable: bool


class Handles(Generic[T]):
    """The handles of one kind that are open, by number."""

    def __init__(self) -> None:
        self._open: dict[int, T] = {}
        self._next = 1

    def add(self, value: T) -> int:
        """A new handle for `value`: its number."""
        fh = self._next
        self._next += 1
        self._open[fh] = value
        return fh

    def get(self, fh: int) -> T:
        """What an open handle stands for; EBADF for one that is not open."""
        try:
            return self._open[fh]
        except KeyError:
            raise pyfuse3.FUSEError(errno.EBADF) from None

    def find(self, fh: int) -> T | None:
        """What an open handle stands for; None for one that is not open."""
        return self._open.get(fh)

    def pop(self, fh: int) -> T | None:
        """Release a handle: what it stood for (None when it was not open)."""
        return self._open.pop(fh, None)
