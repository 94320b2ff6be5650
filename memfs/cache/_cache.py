"""The durable local state of one mounted store: the tree, the contents, and
what is still to be agreed with the store.

What is promised:

- Every file and folder of the mount is a `Node` with a stable id (the inode
  number the filesystem shows). Ids are never reused.
- A file's content is a row of the journal, committed before `write()`
  returns (and held in memory while the file is open). The journal (SQLite, WAL) records
  for each file its base (the memory id, `content_sha256` and path last
  agreed with the store), whether it changed locally, the pending deletes
  (`Tombstone`) and the uploads in flight. The journal says "edited" before
  the bytes are written (in the same transaction), so a killed process never
  leaves changed content that the journal calls clean. `fsync()` makes both durable against power
  loss too.
- Clean contents are evicted least-recently-used within a size budget; edited
  contents and open files never are.
- The tree is held in memory as well (a store has at most a few thousand
  entries), so lookups and stats never touch the disk.

The cache knows nothing of FUSE or HTTP. It is one state with two faces:
`LocalChanges`, what the filesystem may do (`FilesystemFace`), and
`Agreement`, what the sync may do (`SyncFace`); content that is not here yet
comes from a `ContentSource` the composition root gives it.

The jobs live in their own modules: `_journal` (SQLite rows and migrations),
`_tree` (the namespace and its rules), `_contents` (the LRU of clean
contents), `_legacy` (reading in the content files of older caches),
`_conflicts` (conflict copies), `_core` (what every job shares).
"""

from __future__ import annotations

from ._agreement import Agreement
from ._local import LocalChanges


class StoreCache(LocalChanges, Agreement):
    """The tree, contents and journal of one store, under `<cache_dir>/<store_id>/`."""

    @property
    def disk_full(self) -> bool:
        """The cache's disk is full: its journal keeps what SQLite cannot take in
        its redo log, the filesystem refuses changes (ENOSPC) so that the log's
        room goes to the sync, and reads and uploads go on."""
        return self.journal.disk_full
