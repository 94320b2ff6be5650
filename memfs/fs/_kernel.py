"""What the kernel must forget after a pull, and the options a mount gets."""

from __future__ import annotations

import errno
import logging
import os

import pyfuse3
import trio

from ..api import check_store_id

log = logging.getLogger("memfs.fs")


class KernelCache:
    """Tells the kernel to forget what a pull changed. Called by the sync engine,
    never from inside a handler; the calls that may block run in a worker thread."""

    async def forget_content(self, inode: int) -> None:
        await trio.to_thread.run_sync(self._invalidate_inode, inode)

    async def forget_entry(self, parent_inode: int, name: str) -> None:
        await trio.to_thread.run_sync(self._invalidate_entry, parent_inode, name)

    @staticmethod
    def _invalidate_inode(inode: int) -> None:
        try:
            pyfuse3.invalidate_inode(inode, attr_only=False)
        except OSError as e:
            if e.errno not in (errno.ENOENT, errno.ENOSYS):
                log.warning(
                    "could not invalidate inode %d: %s", inode, e, extra={"event": "invalidate"}
                )

    @staticmethod
    def _invalidate_entry(parent_inode: int, name: str) -> None:
        try:
            pyfuse3.invalidate_entry(parent_inode, os.fsencode(name))
        except OSError as e:
            if e.errno not in (errno.ENOENT, errno.ENOSYS):
                log.warning(
                    "could not invalidate entry %r: %s", name, e, extra={"event": "invalidate"}
                )


def mount_options(store_id: str, *, allow_other: bool = False, read_only: bool = False) -> set[str]:
    """FUSE options: `memfs:<store_id>` in /proc/mounts; `default_permissions`
    only when other users can reach the mount (it costs a GETATTR per change);
    `ro` for a read-only store, so the kernel itself refuses writes and
    `access(W_OK)` says no even to root (memfs writes through its cache). A
    store id not of the API's form (a comma would add options) is refused."""
    opts = {f"fsname=memfs:{check_store_id(store_id)}", "subtype=memfs", "noatime"}
    if read_only:
        opts.add("ro")
    if allow_other:
        opts |= {"allow_other", "default_permissions"}
    return opts
