"""Conflict copies stay inside the conflicts folder whatever the path says (a
whole copy that cannot be written is tested on a real full disk in
tests/mount/test_pull_safety.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memfs.cache._conflicts import ConflictCopies


@pytest.mark.parametrize(
    "path", ["/../../escape.md", "/a/../../../escape.md", "/./x.md", "/a//b.md", "/nul\x00.md"]
)
def test_a_path_that_is_not_clean_never_names_a_place_outside(tmp_path: Path, path: str):
    copies = ConflictCopies(str(tmp_path / "cache" / "conflicts"))
    kept = Path(copies.keep(path, b"the agent's bytes"))
    assert kept.is_relative_to(tmp_path / "cache" / "conflicts")
    assert kept.read_bytes() == b"the agent's bytes"
    assert Path(str(kept) + ".path").read_text() == path + "\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]
    assert [p.name for p in (tmp_path / "cache").iterdir()] == ["conflicts"]
