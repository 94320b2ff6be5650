"""What `make demo` installs and how scripts/demo.sh is set up, read from the
files without running them: the demo installs memfs alone (as the wheel
installs it, scripts/check_wheel.sh), `make test` the rest; the demo's
default port is the one `memfs store` talks to without a URL. The demo
itself runs for real in tests/mount/test_demo.py."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from memfs.api._wire import SERVE_DEFAULT_PORT

ROOT = Path(__file__).resolve().parents[2]
TEST_ONLY_SYSTEM_PACKAGES = {"vim", "autoconf", "automake", "make", "shellcheck"}


def _install_plan(target: str) -> list[str]:
    """What `make TARGET` would install: each scripts/install.sh call that
    `make -n` shows, asked with --dry-run for its `install: would ...` lines."""
    r = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    plan = []
    for line in r.stdout.splitlines():
        if "scripts/install.sh" not in line:
            continue
        words = shlex.split(line)
        args = words[words.index("scripts/install.sh") + 1 :]
        if target == "demo":
            assert args == ["none"], f"make demo installs extras: {line}"
        dry = subprocess.run(
            ["bash", "scripts/install.sh", *args, "--dry-run"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert dry.returncode == 0, dry.stderr
        plan += dry.stdout.splitlines()
    assert plan, f"make {target} runs no scripts/install.sh"
    return plan


def test_make_demo_installs_memfs_alone_and_make_test_the_rest():
    demo = _install_plan("demo")
    assert all(line.startswith("install: would ") for line in demo), demo
    (pip,) = [line for line in demo if " pip install " in line]
    assert pip == "install: would pip install -e '.'"  # no extras
    assert not [line for line in demo if " npm " in line]
    (apt,) = [line for line in demo if " apt-get " in line]
    assert not TEST_ONLY_SYSTEM_PACKAGES & set(apt.split()), apt
    assert {"fuse3", "libfuse3-dev"} <= set(apt.split())

    test = _install_plan("test")
    assert "install: would pip install -e '.[test]'" in test
    assert [line for line in test if line.startswith("install: would npm install ")]
    (apt,) = [line for line in test if " apt-get " in line]
    assert set(apt.split()) >= TEST_ONLY_SYSTEM_PACKAGES, apt


def test_the_demo_listens_where_memfs_store_looks_by_default():
    text = (ROOT / "scripts" / "demo.sh").read_text()
    assert f'port="${{MEMFS_DEMO_PORT:-{SERVE_DEFAULT_PORT}}}"' in text
