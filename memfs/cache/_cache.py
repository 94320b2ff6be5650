"""The durable local state of one mounted store: the tree, the contents, and
what is still to be agreed with the store.

What is promised:

- Every file and folder of the mount is a `Node` with a stable id (the inode
  number the filesystem shows). Ids are never reused.
- A file's content is a content file of the journal, its bytes committed
  before `write()` returns (and held in memory while the file is open). The
  journal (SQLite, WAL, and its redo log: memfs/cache/_journal.py, _redo.py,
  _files.py) records for each file its base (the memory id,
  `content_sha256` and path last agreed with the store), whether it changed
  locally, the pending deletes (`Tombstone`) and the uploads in flight. The
  journal says "edited" before the bytes are written, so a killed process
  never leaves changed content that the journal calls clean. `fsync()` makes
  all of it durable against power loss too.
- Clean contents are evicted least-recently-used past `--cache-size`; edited
  contents and open files never are.
- The tree is held in memory as well (a store has at most a few thousand
  entries), so lookups and stats never touch the disk.

The cache knows nothing of FUSE or HTTP. It is made of parts that each own
one kind of state (memfs/cache/_core.py: the tree of names, the contents,
what is agreed with the store, durability, conflict copies), and it has two
faces: `LocalChanges`, what the filesystem may do (`FilesystemFace`), and
`SyncChanges`, what the sync may do (`SyncFace`); content that is not here
yet comes from a `ContentSource` the composition root gives it.
"""

from __future__ import annotations

from ._agreement import SyncChanges
from ._local import LocalChanges


class StoreCache(LocalChanges, SyncChanges):
    """The tree, contents and journal of one store, under `<cache_dir>/<store_id>/`."""
