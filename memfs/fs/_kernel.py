"""What the kernel must forget after a pull, and the options a mount gets."""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable
from functools import partial

import pyfuse3
import trio

from ..api import check_store_id

log = logging.getLogger("memfs.fs")


class KernelCache:
    """Tells the kernel to forget what a pull changed. Called by the sync engine,
    never from inside a handler; the calls that may block run in a worker thread."""

    async def forget_content(self, inode: int) -> None:
        call = partial(pyfuse3.invalidate_inode, inode, attr_only=False)
        await trio.to_thread.run_sync(_invalidate, f"inode {inode}", call)

    async def forget_entry(self, parent_inode: int, name: str) -> None:
        call = partial(pyfuse3.invalidate_entry, parent_inode, os.fsencode(name))
        await trio.to_thread.run_sync(_invalidate, f"entry {name!r}", call)


def _invalidate(what: str, call: Callable[[], object]) -> None:
    try:
        call()
    except OSError as e:
        if e.errno not in (errno.ENOENT, errno.ENOSYS):
            log.warning("could not invalidate %s: %s", what, e, extra={"event": "invalidate"})


def mount_options(store_id: str, *, allow_other: bool = False, read_only: bool = False) -> set[str]:
    """FUSE options: `memfs:<store_id>` in /proc/mounts; `default_permissions`
    only when other users can reach the mount (it costs a GETATTR per change);
    `ro` for a read-only store, so the kernel itself refuses writes and
    `access(W_OK)` says no even to root. A store id not of the API's form (a
    comma would add options) is refused."""
    opts = {f"fsname=memfs:{check_store_id(store_id)}", "subtype=memfs", "noatime"}
    if read_only:
        opts.add("ro")
    if allow_other:
        opts |= {"allow_other", "default_permissions"}
    return opts
