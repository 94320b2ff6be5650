"""The cache's invariants: `invariant_problems(cache)` lists every way the
tree, the journal, the contents and the indexes disagree (empty: sound).
Tests call it after every cache and filesystem test, in the manner of s3ql's
fsck after each test; it reads the cache's parts and its journal.
"""

from __future__ import annotations

import os

from memfs.api import join_path
from memfs.cache import ROOT_ID, NodeKind, StoreCache

FIELDS_SAVED_AT_ONCE = (
    "parent", "name", "kind", "memory_id", "base_sha", "base_path", "edited", "uid", "gid",
)  # fmt: skip
"""Fields every change saves at once (the contents are the truth for sizes)."""


def invariant_problems(cache: StoreCache) -> list[str]:
    out: list[str] = []
    # Every node is reachable from the root, at the path the tree derives.
    reached: set[int] = set()
    stack = [(ROOT_ID, "/")]
    while stack:
        nid, path = stack.pop()
        if nid in reached:
            out.append(f"node {nid} is reached twice")
            continue
        reached.add(nid)
        node = cache.nodes.get(nid)
        if node is None:
            out.append(f"node {nid} is listed in a folder but unknown")
            continue
        if node.path != path:
            out.append(f"node {nid} says its path is {node.path!r}, the tree says {path!r}")
        for name, cid in cache.children.get(nid, {}).items():
            child = cache.nodes.get(cid)
            if child is not None and (child.name != name or child.parent != nid):
                out.append(f"node {cid} is listed as {name!r} in {nid} but names itself otherwise")
            stack.append((cid, join_path(path, name)))
    for nid, node in cache.nodes.items():
        if nid not in reached and not node.orphan:
            out.append(f"node {nid} ({node.path}) is not reachable from the root")
    # The journal holds exactly the nodes of the tree, field for field.
    stored = {n.id: n for n in cache.journal.nodes()}
    live = {nid: n for nid, n in cache.nodes.items() if not n.orphan}
    for nid in stored.keys() - live.keys():
        out.append(f"the journal holds node {nid} that the tree does not")
    for nid in live.keys() - stored.keys():
        out.append(f"the tree holds node {nid} ({live[nid].path}) that the journal does not")
    for nid in stored.keys() & live.keys():
        a, b = stored[nid], live[nid]
        for name in FIELDS_SAVED_AT_ONCE:
            if getattr(a, name) != getattr(b, name):
                out.append(f"node {nid} ({b.path}): the journal's {name} differs from memory's")
    # Contents: every cached file has its content, and no other file; files count right.
    sizes = content_sizes(cache)
    for nid, kept in cache.journal.files.recent.items():
        if kept != (cache.journal.files.read_file(nid) or b""):
            out.append(f"node {nid}: the content kept in memory differs from its content file")
    for nid in sizes.keys() - {n.id for n in live.values() if n.cached}:
        out.append(f"the journal holds a content for node {nid}, which is not a cached file")
    files = [n for n in live.values() if n.kind is NodeKind.FILE]
    if len(files) != cache.file_total:
        out.append(f"the tree counts {cache.file_total} files but holds {len(files)}")
    for node in files:
        if node.edited and not node.cached:
            out.append(f"{node.path} is edited but its content is not cached")
        held = sizes.get(node.id, 0)  # a cached file without a content file is empty
        if node.cached and node.live.data is None and held != node.size:
            out.append(f"{node.path} is {node.size} bytes but its content {held}")
        if node.pending != (node.id in cache.pending):
            out.append(f"{node.path}: pending is {node.pending} but the pending set disagrees")
    # Paths and memory ids are unique; the index points at the right files.
    seen_paths: set[str] = set()
    for node in live.values():
        if node.path in seen_paths:
            out.append(f"two nodes at {node.path}")
        seen_paths.add(node.path)
    holders: dict[str, int] = {}
    for node in files:
        if node.memory_id is None:
            continue
        if node.memory_id in holders:
            out.append(f"memory {node.memory_id} is held by two files")
        holders[node.memory_id] = node.id
        if cache.node_of_memory(node.memory_id) is not node:
            out.append(f"the memory-id index does not point {node.memory_id} at {node.path}")
        if node.memory_id in cache.tombstones:
            out.append(f"{node.path} holds {node.memory_id}, which is also pending delete")
    for memory_id, node in cache.by_memory_id().items():
        if holders.get(memory_id) != node.id:
            out.append(f"the memory-id index points {memory_id} at a file that does not hold it")
    stones = {t.memory_id for t in cache.journal.tombstones()}
    if stones != set(cache.tombstones):
        out.append("the journal's pending deletes differ from memory's")
    return out


def content_sizes(cache: StoreCache) -> dict[int, int]:
    """The size of each content file the cache holds, by node id (those let go aside)."""
    files = cache.journal.files
    found = {int(n): files.stat(int(n)) for n in os.listdir(files.fd) if n.isdigit()}
    return {node_id: st.st_size for node_id, st in found.items() if st is not None}
