"""The namespace of one store, in memory: its name rules, and `move`, the one
function that re-parents a node."""

from __future__ import annotations

from collections.abc import Iterator

from .._exceptions import (
    EntryExists,
    InvalidMove,
    NameTooLong,
    NoSuchEntry,
    NotADirectory,
)
from ..api import (
    MARKER_NAME,
    MAX_NAME_BYTES,
    MAX_PATH_BYTES,
    MAX_PATH_SEGMENTS,
    check_name,
    join_path,
    path_segments,
)
from ._node import ROOT_ID, Node, NodeKind


def _deepest(folder: bool) -> int:
    """A folder's path has one name fewer than a memory's, so that a file fits."""
    return MAX_PATH_SEGMENTS - 1 if folder else MAX_PATH_SEGMENTS


class Tree:
    """Nodes by id, and each folder's entries by name."""

    def __init__(self) -> None:
        self.nodes: dict[int, Node] = {}
        self.children: dict[int, dict[str, int]] = {}
        self.file_total = 0

    def load(self, nodes: list[Node]) -> None:
        for node in nodes:
            self.nodes[node.id] = node
            if node.is_dir:
                self.children.setdefault(node.id, {})
            else:
                self.file_total += 1
        for node in nodes:
            if node.id != ROOT_ID:
                self.children.setdefault(node.parent, {})[node.name] = node.id
        self.assign_paths(ROOT_ID, "/")

    def assign_paths(self, node_id: int, path: str) -> None:
        """Derive the paths of a node and everything under it."""
        stack = [(node_id, path)]
        while stack:
            nid, p = stack.pop()
            self.nodes[nid].path = p
            for name, cid in self.children.get(nid, {}).items():
                stack.append((cid, join_path(p, name)))

    def node(self, node_id: int) -> Node:
        try:
            return self.nodes[node_id]
        except KeyError:
            raise NoSuchEntry(f"no entry with id {node_id}")

    def get(self, node_id: int) -> Node | None:
        return self.nodes.get(node_id)

    def file_count(self) -> int:
        """Files in the tree (orphans are out of it)."""
        return self.file_total

    def lookup(self, parent_id: int, name: str) -> Node:
        node = self.child(parent_id, name)
        if node is None:
            raise NoSuchEntry(f"no {name!r} in {self.nodes[parent_id].path}")
        return node

    def child(self, parent_id: int, name: str) -> Node | None:
        """`lookup`, with None for a name the folder does not hold."""
        kids = self.children.get(parent_id)
        if kids is None:
            raise NotADirectory(f"{self.node(parent_id).path} is not a folder")
        nid = kids.get(name)
        return None if nid is None else self.nodes[nid]

    def find(self, path: str) -> Node | None:
        node = self.nodes[ROOT_ID]
        for name in path.strip("/").split("/") if path != "/" else []:
            kids = self.children.get(node.id)
            if kids is None or name not in kids:
                return None
            node = self.nodes[kids[name]]
        return node

    def list_dir(self, node_id: int) -> list[tuple[str, Node]]:
        kids = self.children.get(node_id)
        if kids is None:
            raise NotADirectory(f"{self.node(node_id).path} is not a folder")
        return [(name, self.nodes[kids[name]]) for name in sorted(kids)]

    def subdir_count(self, node_id: int) -> int:
        return sum(1 for cid in self.children.get(node_id, {}).values() if self.nodes[cid].is_dir)

    def files(self) -> Iterator[Node]:
        return (n for n in self.nodes.values() if n.kind is NodeKind.FILE and not n.orphan)

    def files_under(self, folder: Node) -> Iterator[Node]:
        stack = [folder.id]
        while stack:
            for cid in self.children.get(stack.pop(), {}).values():
                c = self.nodes[cid]
                if c.is_dir:
                    stack.append(cid)
                else:
                    yield c

    def subtree(self, node: Node) -> list[Node]:
        """The node and everything under it, children before their folders."""
        order: list[Node] = []
        stack = [node]
        while stack:
            n = stack.pop()
            order.append(n)
            stack += [self.nodes[c] for c in self.children.get(n.id, {}).values()]
        return order[::-1]

    def check_new_name(self, parent: Node, name: str, *, folder: bool = False) -> str:
        """The path a new entry `name` in `parent` would have, or the rule it breaks."""
        if not parent.is_dir:
            raise NotADirectory(f"{parent.path} is not a folder")
        if len(name.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
            raise NameTooLong(f"the name {name[:40]!r}... is longer than {MAX_NAME_BYTES} bytes")
        check_name(name)
        path = join_path(parent.path, name)
        if len(path.encode("utf-8")) > MAX_PATH_BYTES:
            raise NameTooLong(f"the path {path[:40]!r}... is longer than {MAX_PATH_BYTES} bytes")
        if path_segments(path) > _deepest(folder):
            raise NameTooLong(f"the path {path[:40]!r}... is deeper than {_deepest(folder)} names")
        if parent.id == ROOT_ID and name == MARKER_NAME:
            raise EntryExists(f"{MARKER_NAME} is the store's marker")
        if name in self.children[parent.id]:
            raise EntryExists(f"{path} already exists")
        return path

    def check_move(self, node: Node, dest: Node, name: str) -> None:
        """A folder may not move into itself, nor where a path under it is too long."""
        if not node.is_dir:
            return
        p: Node | None = dest
        while p is not None and p.id != ROOT_ID:
            if p.id == node.id:
                raise InvalidMove(f"cannot move {node.path} into itself")
            p = self.nodes.get(p.parent)
        new_path = join_path(dest.path, name)
        growth = len(new_path.encode("utf-8")) - len(node.path.encode("utf-8"))
        deeper = path_segments(new_path) - path_segments(node.path)
        if growth <= 0 and deeper <= 0:
            return
        for child in self.subtree(node):
            if len(child.path.encode("utf-8")) + growth > MAX_PATH_BYTES:
                raise NameTooLong(
                    f"moving {node.path} would make {child.path[:40]!r}... "
                    f"longer than {MAX_PATH_BYTES} bytes"
                )
            if path_segments(child.path) + deeper > _deepest(child.is_dir):
                raise NameTooLong(
                    f"moving {node.path} would put {child.path[:40]!r}... "
                    f"deeper than {_deepest(child.is_dir)} names"
                )

    def attach(self, node: Node) -> None:
        self.nodes[node.id] = node
        self.children[node.parent][node.name] = node.id
        if node.is_dir:
            self.children[node.id] = {}
        else:
            self.file_total += 1

    def detach(self, node: Node) -> None:
        """Take the entry out of its folder (a folder must be empty). A folder is
        forgotten at once; a file stays known by id until `forget`."""
        del self.children[node.parent][node.name]
        if node.is_dir:
            del self.children[node.id]
            del self.nodes[node.id]
        else:
            self.file_total -= 1

    def forget(self, node: Node) -> None:
        self.nodes.pop(node.id, None)

    def move(self, node: Node, parent_id: int, name: str) -> None:
        """Re-parent a node to a free entry and derive the paths under it."""
        del self.children[node.parent][node.name]
        node.parent, node.name = parent_id, name
        self.children[parent_id][name] = node.id
        self.assign_paths(node.id, join_path(self.nodes[parent_id].path, name))
