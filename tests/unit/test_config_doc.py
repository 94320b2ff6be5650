"""docs/configuration.md is what scripts/gen_config_doc.py writes from the
argument parser: a flag, variable or key added, renamed or re-described in
the code without running the script fails here."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location(
        "gen_config_doc", ROOT / "scripts" / "gen_config_doc.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_configuration_reference_is_what_the_script_writes():
    generated = _generator().render()
    committed = (ROOT / "docs" / "configuration.md").read_text()
    assert committed == generated, (
        "docs/configuration.md is out of date: run `python scripts/gen_config_doc.py`"
    )


def test_the_reference_names_every_setting_three_ways():
    from memfs.cli._options import LOG_OPTIONS, MOUNT_OPTIONS

    text = (ROOT / "docs" / "configuration.md").read_text()
    for option in (*MOUNT_OPTIONS, *LOG_OPTIONS):
        row = next(line for line in text.splitlines() if line.startswith(f"| `{option.flag}"))
        assert f"`{option.env}`" in row and f"`{option.name}`" in row, row
