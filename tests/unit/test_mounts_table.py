"""The mounts table as the kernel writes it: escapes decoded into the path
they name, whatever letters it holds."""

from __future__ import annotations

import os
from pathlib import Path

from memfs.mount import MountEntry, _folder, force_unmount, memfs_mounts, mount_table


def test_escapes_are_decoded_to_bytes_and_the_bytes_as_utf8(tmp_path: Path):
    table = tmp_path / "mounts"
    table.write_bytes(
        b"memfs:memstore_a /mnt/memory/Caf\xc3\xa9\\040Notes fuse.memfs rw,noatime 0 0\n"
        b"memfs:memstore_b /mnt/a\\011tab\\012line\\134slash fuse.memfs ro 0 0\n"
        b"/dev/sda1 / ext4 rw,relatime 0 0\n"
        b"short line\n"
    )
    assert mount_table(str(table)) == [
        MountEntry("memfs:memstore_a", "/mnt/memory/Café Notes", "fuse.memfs", "rw,noatime"),
        MountEntry("memfs:memstore_b", "/mnt/a\ttab\nline\\slash", "fuse.memfs", "ro"),
        MountEntry("/dev/sda1", "/", "ext4", "rw,relatime"),
    ]


def test_a_table_that_cannot_be_read_holds_no_mounts(tmp_path: Path):
    assert mount_table(str(tmp_path / "missing")) == []


def test_a_user_is_shown_only_the_memfs_mounts_it_may_unmount(tmp_path, monkeypatch):
    """Another user's stale mount was named in a hint, and `memfs unmount --all`
    said it had cleaned it up while fusermount3 refused."""
    table = tmp_path / "mounts"
    table.write_text(
        "memfs:memstore_a /home/a/m fuse.memfs rw,user_id=1001,group_id=1001 0 0\n"
        "memfs:memstore_b /home/b/m fuse.memfs rw,user_id=1002,group_id=1002 0 0\n"
        "memfs:memstore_c /tmp/r fuse.memfs rw,user_id=0,group_id=0 0 0\n"
        "/dev/sda1 / ext4 rw,user_id=1001 0 0\n"
    )
    monkeypatch.setattr(_folder, "mount_table", lambda: mount_table(str(table)))
    monkeypatch.setattr(os, "geteuid", lambda: 1001)
    assert memfs_mounts() == ["/home/a/m"]
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert memfs_mounts() == ["/home/a/m", "/home/b/m", "/tmp/r"]


def test_an_unmount_that_is_refused_is_said(tmp_path):
    assert force_unmount(str(tmp_path)) is False
