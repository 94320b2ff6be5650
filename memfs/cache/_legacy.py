"""Caches made before contents lived in the journal: their content files are
read in once, when such a cache is first opened.

Those caches kept each file's bytes in `contents/<node id>` (and a pool of
empty files in `pool/`), and `fsync()` left a copy of what it made durable in
the journal's `synced` table until the content file was flushed too. Reading
them in applies the recovery those copies were for:

- Same boot (the process was killed, the machine was not): the page cache
  survived, so the content file holds what fsync saw and maybe later writes;
  it wins.
- Another boot (or unknown): the content file may be torn or stale; the copy,
  what fsync returned for, wins. A content file that differs from it is kept
  aside as a conflict copy first, so nothing that was written is lost.

All of it lands in one transaction, which also records that it was done;
the folders go after it committed, so a kill in between leaves folders that
the next open only removes (reading them again would undo the recovery:
fsync's copies are gone by then).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil

from .._private import open_private_dir
from ._conflicts import ConflictCopies
from ._journal import Journal
from ._node import Node, NodeKind

log = logging.getLogger("memfs.cache")

BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"

IMPORTED = "content_files_read_in"
"""The journal's meta key saying the content files were read in."""


def boot_id() -> str:
    """This boot's id ("" when it cannot be known: every recovery then trusts the copies)."""
    try:
        with open(BOOT_ID_PATH) as f:
            return f.read().strip()
    except OSError:
        return ""


def _read(dir_fd: int, name: str) -> bytes | None:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:  # gone, or not a file memfs may read: nothing to read in
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 17):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def import_content_files(
    store_dir: str, journal: Journal, nodes: dict[int, Node], conflicts: ConflictCopies
) -> None:
    """Read the content files of an older cache under `store_dir` into the
    journal (see the module); nothing to do when there are none."""
    folder = os.path.join(store_dir, "contents")
    if not os.path.lexists(folder):
        return
    if journal.get_meta(IMPORTED) is None:
        _read_in(folder, journal, nodes, conflicts)
    for name in ("contents", "pool"):
        with contextlib.suppress(OSError):
            shutil.rmtree(os.path.join(store_dir, name))


def _read_in(
    folder: str, journal: Journal, nodes: dict[int, Node], conflicts: ConflictCopies
) -> None:
    dir_fd = open_private_dir(folder, "cache folder")
    this_boot = boot_id()
    try:
        copies = {node_id: (boot, copy) for node_id, boot, copy in journal.synced()}
        with journal.transaction():
            for node in nodes.values():
                if node.kind is not NodeKind.FILE or not (node.cached or node.edited):
                    continue
                content = _read(dir_fd, str(node.id))
                if node.id in copies:
                    boot, copy = copies[node.id]
                    if content != copy and not (content is not None and boot and boot == this_boot):
                        if content:
                            kept = conflicts.keep(node.path, content)
                            log.warning(
                                "%s: the machine restarted since its last fsync; the content "
                                "fsync returned for is back, and what the file held instead is "
                                "kept at %s",
                                node.path,
                                kept,
                                extra={"event": "fsync_restored", "path": node.path},
                            )
                        content = copy
                if content is not None:
                    journal.put_content(node.id, content)
            journal.clear_synced()
            journal.set_meta(IMPORTED, "1")
    finally:
        os.close(dir_fd)
