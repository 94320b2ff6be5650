"""The durable local state of one mounted store: the tree, the contents, and
what is still to be agreed with the store.

What is promised:

- Every file and folder of the mount is a `Node` with a stable id (the inode
  number the filesystem shows). Ids are never reused.
- A file's content is a content file, its bytes written before `write()`
  returns. The journal (memfs/cache/_journal.py) records each file's base
  (the memory id, `content_sha256` and path last agreed with the store),
  whether it changed locally, the pending deletes and the uploads in
  flight. It says "edited" before the bytes are written, so a killed
  process never leaves changed content it calls clean. `fsync()` makes the
  file and all of the journal durable against power loss, with one flush.
- Clean contents are evicted least-recently-used past `--cache-size`; edited
  contents and open files never are.
- The tree is held in memory too, so lookups and stats never touch the disk.

Its parts and the steps that span them: memfs/cache/_core.py.
"""

from __future__ import annotations

from ._agreement import SyncChanges
from ._local import LocalChanges


class StoreCache(LocalChanges, SyncChanges):
    """The tree, contents and journal of one store, under `<cache_dir>/<store_id>/`."""
