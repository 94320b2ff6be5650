"""Every package memfs imports is one its pyproject.toml declares, so a clean
install (`pip install` of the wheel, the Docker image) has it: the code is
read, not run, and each third-party top-level import of memfs/ (but the test
tooling, memfs.testing, which runs under the user's pytest) is looked up in
`[project] dependencies` by its distribution's name."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = set()
    for requirement in project["dependencies"]:
        name = re.match(r"[A-Za-z0-9._-]+", requirement)
        assert name, requirement
        names.add(_normal(name.group(0)))
    return names


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _imported() -> dict[str, str]:
    """Top-level module -> the first file importing it, for memfs/ but memfs/testing."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "memfs").rglob("*.py")):
        if "testing" in path.relative_to(ROOT / "memfs").parts:
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top != "memfs" and top not in sys.stdlib_module_names:
                    found.setdefault(top, str(path.relative_to(ROOT)))
    return found


def test_every_package_memfs_imports_is_declared():
    distributions = importlib.metadata.packages_distributions()
    declared = _declared()
    missing = []
    for module, where in sorted(_imported().items()):
        names = {_normal(d) for d in distributions.get(module, [module])}
        if not names & declared:
            missing.append(f"{module} (imported by {where}; distribution {sorted(names)})")
    assert missing == [], "not in pyproject.toml's dependencies: " + ", ".join(missing)
