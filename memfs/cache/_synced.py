"""Contents made durable by `fsync()`, carried in the journal until their
content files are durable themselves.

Flushing a content file costs this disk a commit of ext4's own journal (the
file is new, or grew): 1-2 ms, on top of the flush of the journal's WAL. So
`fsync()` copies the file's content into the journal (`synced` table) and
flushes the WAL once; the content file is flushed later, with every other
one, by one `syncfs()` beside the requests, after which the copies go.

Recovery, when the journal opens with copies left:

- Same boot (the process was killed, the machine was not): the page cache
  survived, so the content file holds what fsync saw and maybe later writes;
  it is kept as it is.
- Another boot (or unknown): the content file may be torn or stale; the copy,
  what fsync returned for, is put back. A content file that differs from it is
  kept aside as a conflict copy first, so nothing that was written is lost.

Either way the copy stays until a later `syncfs()` has made the file durable.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os

from ._conflicts import ConflictCopies
from ._contents import ContentFiles
from ._journal import Journal
from ._node import Node, NodeKind

log = logging.getLogger("memfs.cache")

BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"


def boot_id() -> str:
    """This boot's id ("" when it cannot be known: every recovery then trusts the copies)."""
    try:
        with open(BOOT_ID_PATH) as f:
            return f.read().strip()
    except OSError:
        return ""


def _syncfs(fd: int) -> bool:
    """syncfs(2) of the filesystem holding `fd`; False when it is not available."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        call = libc.syncfs
    except (OSError, AttributeError):
        return False
    if call(fd) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return True


class SyncedContents:
    """The copies of fsynced contents in the journal: node id -> generation."""

    def __init__(self, journal: Journal, contents: ContentFiles) -> None:
        self.journal = journal
        self.contents = contents
        self.boot_id = boot_id()
        self.held: dict[int, int] = {}
        """Node ids with a copy in the journal, and the copy's generation."""
        self._generation = 0

    def keep(self, node: Node, content: bytes) -> None:
        """Carry `content` (what the file holds now) in the journal; the caller commits
        and flushes the WAL."""
        self._generation += 1
        self.journal.put_synced(node.id, self.boot_id, self._generation, content)
        self.held[node.id] = self._generation

    def forget(self, node_id: int) -> None:
        """The file went, or its content was replaced by the store's: its copy goes too."""
        if self.held.pop(node_id, None) is not None:
            self.journal.drop_synced(node_id)

    def recover(self, nodes: dict[int, Node], conflicts: ConflictCopies) -> None:
        """Put back what fsync returned for, after a kill or a crash (see the module)."""
        for node_id, boot, generation, copy in self.journal.synced():
            self._generation = max(self._generation, generation)
            node = nodes.get(node_id)
            if node is None or node.kind is not NodeKind.FILE:
                self.journal.drop_synced(node_id)
                continue
            self.held[node_id] = generation
            name = str(node_id)
            try:
                now = self.contents.read(name)
            except FileNotFoundError:
                now = None
            if now == copy or (now is not None and boot and boot == self.boot_id):
                continue
            if now:
                kept = conflicts.keep(node.path, now)
                log.warning(
                    "%s: the machine restarted since its last fsync; the content fsync "
                    "returned for is back, and what the file held instead is kept at %s",
                    node.path,
                    kept,
                    extra={"event": "fsync_restored", "path": node.path},
                )
            tmp = name + ".new"
            self.contents.take(tmp)
            self.contents.write_in_place(tmp, copy)
            self.contents.replace(tmp, name)
            node.cached = True

    def snapshot(self) -> dict[int, int]:
        return dict(self.held)

    def flush_files(self, ids: list[int]) -> None:
        """Make the content files durable: one syncfs of their filesystem, or one
        fsync each where syncfs is missing (run in a worker thread)."""
        if _syncfs(self.contents.fd):
            return
        for node_id in ids:
            with contextlib.suppress(FileNotFoundError):
                fd = self.contents.open(str(node_id), os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)

    def flushed(self, snapshot: dict[int, int]) -> None:
        """The files of `snapshot` were made durable after it was taken: drop the copies
        not replaced since (the caller wraps this in one transaction)."""
        for node_id, generation in snapshot.items():
            if self.held.get(node_id) == generation:
                del self.held[node_id]
                self.journal.drop_synced(node_id, generation)
