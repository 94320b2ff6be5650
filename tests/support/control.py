"""Sample values of the control protocol for tests."""

from __future__ import annotations

from memfs.control import StoreStatus


def a_status(**changes) -> StoreStatus:
    """A plausible store status; `changes` replace its fields."""
    values = dict(
        store_id="memstore_1",
        name="notes",
        mount_path="/mnt/memory/notes",
        read_only=False,
        pid=4242,
        files=3,
        cached=2,
        prefetched=True,
        pending=["/a.md"],
        refused={"/big.md": "too large"},
        sync_mode="feed",
        store_full=False,
        sync_mode_reason=None,
        passes=7,
        last_pass={"pushed": 1, "finished_at": 1.5},
        last_error=None,
        requests=12,
        fuse_requests={"lookup": 4},
    )
    values.update(changes)
    return StoreStatus(**values)
