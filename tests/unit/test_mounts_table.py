"""The mounts table as the kernel writes it: escapes decoded into the path
they name, whatever letters it holds."""

from __future__ import annotations

from pathlib import Path

from memfs.mount import MountEntry, mount_table


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
