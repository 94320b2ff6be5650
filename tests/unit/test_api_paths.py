"""The path rules of `memfs.api._paths`, the one place both the client side
(the cache, `memfs store`) and `memfs serve` take them from: what the SDK
calls an invalid path is refused by both."""

from __future__ import annotations

import pytest

from memfs._exceptions import InvalidPath
from memfs.api import MAX_PATH_SEGMENTS, check_name, normalize_path, path_segments


def test_a_path_holds_at_most_20_segments():
    assert MAX_PATH_SEGMENTS == 20
    assert normalize_path("/d" * 20) == "/d" * 20
    with pytest.raises(InvalidPath, match="21 segments"):
        normalize_path("/d" * 21)
    assert [path_segments(p) for p in ("/", "/a", "/a/b", "/d" * 20)] == [0, 1, 2, 20]


@pytest.mark.parametrize("separator", ["\u2028", "\u2029"])
def test_the_line_and_paragraph_separators_are_refused(separator):
    with pytest.raises(InvalidPath, match=f"U\\+{ord(separator):04X}"):
        normalize_path(f"/a{separator}b.md")
    with pytest.raises(InvalidPath):
        check_name(f"a{separator}b.md")


def test_other_spaces_and_letters_stay_allowed():
    for name in ("no-break\u00a0space", "ideographic\u3000space", "Café Notes", "日本語"):
        check_name(name)
        assert normalize_path("/" + name) == "/" + name
