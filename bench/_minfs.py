"""A minimal in-memory pyfuse3 filesystem: the floor for memfs in the agent
workload (bench only; never imported by memfs).

It does what the workload needs and nothing more (no cache, no journal, no
durability: `fsync` does nothing), with the kernel-caching settings of
`pyfuse3-notes.md`. Whatever memfs costs above it is memfs's own; what it
costs above tmpfs is the price of any pyfuse3 filesystem on this machine.

    python bench/_minfs.py MOUNTPOINT
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import time

import pyfuse3
import trio

TIMEOUT = 300.0


class _Node:
    def __init__(self, ino: int, mode: int) -> None:
        self.ino = ino
        self.mode = mode
        self.data = bytearray()
        self.children: dict[bytes, int] = {}
        self.mtime = time.time_ns()


class MinimalFS(pyfuse3.Operations):
    def __init__(self) -> None:
        super().__init__()
        self.nodes = {pyfuse3.ROOT_INODE: _Node(pyfuse3.ROOT_INODE, stat.S_IFDIR | 0o755)}
        self.next_ino = pyfuse3.ROOT_INODE + 1

    def _attrs(self, n: _Node) -> pyfuse3.EntryAttributes:
        a = pyfuse3.EntryAttributes()
        a.st_ino = n.ino
        a.entry_timeout = a.attr_timeout = TIMEOUT
        a.st_mode = n.mode
        a.st_nlink = 1
        a.st_size = len(n.data)
        a.st_uid, a.st_gid = os.getuid(), os.getgid()
        a.st_blksize = 4096
        a.st_blocks = (len(n.data) + 511) // 512
        a.st_atime_ns = a.st_mtime_ns = a.st_ctime_ns = n.mtime
        return a

    def _child(self, parent: int, name: bytes) -> _Node:
        try:
            return self.nodes[self.nodes[parent].children[name]]
        except KeyError:
            raise pyfuse3.FUSEError(errno.ENOENT)

    def _new(self, parent: int, name: bytes, mode: int) -> _Node:
        n = _Node(self.next_ino, mode)
        self.next_ino += 1
        self.nodes[n.ino] = n
        self.nodes[parent].children[name] = n.ino
        return n

    async def lookup(self, parent_inode, name, ctx=None):
        return self._attrs(self._child(parent_inode, name))

    async def getattr(self, inode, ctx=None):
        return self._attrs(self.nodes[inode])

    async def setattr(self, inode, attr, fields, fh, ctx):
        n = self.nodes[inode]
        if fields.update_size:
            del n.data[attr.st_size :]
            n.data.extend(b"\0" * (attr.st_size - len(n.data)))
        if fields.update_mode:
            n.mode = stat.S_IFMT(n.mode) | stat.S_IMODE(attr.st_mode)
        if fields.update_mtime:
            n.mtime = attr.st_mtime_ns
        return self._attrs(n)

    async def opendir(self, inode, ctx):
        return inode

    async def readdir(self, fh, start_id, token):
        entries = sorted(self.nodes[fh].children.items())
        for i in range(start_id, len(entries)):
            name, ino = entries[i]
            if not pyfuse3.readdir_reply(token, name, self._attrs(self.nodes[ino]), i + 1):
                return

    async def mkdir(self, parent_inode, name, mode, ctx):
        return self._attrs(self._new(parent_inode, name, stat.S_IFDIR | stat.S_IMODE(mode)))

    async def rmdir(self, parent_inode, name, ctx):
        n = self._child(parent_inode, name)
        if n.children:
            raise pyfuse3.FUSEError(errno.ENOTEMPTY)
        del self.nodes[parent_inode].children[name]

    async def unlink(self, parent_inode, name, ctx):
        self._child(parent_inode, name)
        del self.nodes[parent_inode].children[name]

    async def rename(self, parent_inode_old, name_old, parent_inode_new, name_new, flags, ctx):
        ino = self._child(parent_inode_old, name_old).ino
        del self.nodes[parent_inode_old].children[name_old]
        self.nodes[parent_inode_new].children[name_new] = ino

    async def open(self, inode, flags, ctx):
        if flags & os.O_TRUNC:
            self.nodes[inode].data.clear()
        return pyfuse3.FileInfo(fh=inode, keep_cache=True)

    async def create(self, parent_inode, name, mode, flags, ctx):
        n = self._new(parent_inode, name, stat.S_IFREG | stat.S_IMODE(mode))
        return pyfuse3.FileInfo(fh=n.ino, keep_cache=True), self._attrs(n)

    async def read(self, fh, off, size):
        return bytes(self.nodes[fh].data[off : off + size])

    async def write(self, fh, off, buf):
        data = self.nodes[fh].data
        if off > len(data):
            data.extend(b"\0" * (off - len(data)))
        data[off : off + len(buf)] = buf
        return len(buf)

    async def flush(self, fh):
        raise pyfuse3.FUSEError(errno.ENOSYS)

    async def fsync(self, fh, datasync):
        return None

    async def release(self, fh):
        return None

    async def releasedir(self, fh):
        return None

    async def forget(self, inode_list):
        return None

    async def statfs(self, ctx):
        s = pyfuse3.StatvfsData()
        s.f_bsize = s.f_frsize = 4096
        s.f_blocks = s.f_bfree = s.f_bavail = 1 << 20
        s.f_files = s.f_ffree = s.f_favail = 1 << 20
        s.f_namemax = 255
        return s


def main() -> int:
    mountpoint = sys.argv[1]
    pyfuse3.init(MinimalFS(), mountpoint, {"fsname=minfs", "subtype=minfs"})
    try:
        trio.run(pyfuse3.main)
    finally:
        pyfuse3.close(unmount=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
