"""`memfs.testing` as another project sees it: its own pytest session in a
child process, with memfs installed, run the way its developers would.

The sample project (tests/system/sample_project/, kept out of this suite's
own collection) opts in with its conftest and runs its integration tests
against the fake store and its faults. Small projects written here show the
plugin stays off until asked for, each documented way of asking turns it on,
and its fixtures work in a trio-mode project as in a plain one.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SAMPLE_PROJECT = Path(__file__).parent / "sample_project"
PLUGIN_FIXTURES = ("memfs_server", "make_memory_store", "memory_store", "fault_proxy")

# A test of a project that needs the fake store, as a project would write it.
STORE_TEST = """
import httpx

def test_store(memory_store, fault_proxy):
    memory_store.seed({"/a.md": "text"})
    fault_proxy.set(status=529, status_next=1)
    url = f"{fault_proxy.url}/v1/memory_stores/{memory_store.store_id}/memories"
    assert httpx.get(url, headers=memory_store.headers()).status_code == 529
    assert httpx.get(url, headers=memory_store.headers()).status_code == 200
    assert memory_store.memories() == {"/a.md": "text"}
"""


def run_pytest(project: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """pytest in `project` (its own rootdir and configuration), in an
    environment without this session's PYTEST_* variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"]
    cmd += ["--basetemp", str(tmp_path / "basetemp"), *args]
    return subprocess.run(
        cmd, cwd=project, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def outcome(result: subprocess.CompletedProcess[str]) -> dict[str, int]:
    """`{"passed": 6, ...}` from pytest's summary line."""
    lines = result.stdout.strip().splitlines()
    found = re.findall(r"(\d+) (passed|failed|errors?|skipped)", lines[-1] if lines else "")
    return {word.rstrip("s") if word == "errors" else word: int(n) for n, word in found}


def project(tmp_path: Path, files: dict[str, str]) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(textwrap.dedent(text))
    return folder


def test_the_sample_project_passes_against_a_faulty_fake_store(tmp_path):
    result = run_pytest(SAMPLE_PROJECT, tmp_path, "-q")
    assert result.returncode == 0, result.stdout + result.stderr
    assert outcome(result) == {"passed": 6}, result.stdout


def test_a_project_that_does_not_opt_in_gets_no_fixture(tmp_path):
    folder = project(tmp_path, {"pyproject.toml": "[tool.pytest.ini_options]\n"})
    (folder / "test_store.py").write_text(STORE_TEST)
    result = run_pytest(folder, tmp_path, "-q")
    assert outcome(result) == {"error": 1}, result.stdout
    assert "fixture 'memory_store' not found" in result.stdout
    listed = run_pytest(folder, tmp_path, "--fixtures")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    for name in PLUGIN_FIXTURES:
        assert not re.search(rf"^{name}\b", listed.stdout, re.MULTILINE), name
    assert "memfs.testing" not in listed.stdout


@pytest.mark.parametrize(
    ("files", "args"),
    [
        ({"conftest.py": 'pytest_plugins = ["memfs.testing"]\n'}, ()),
        ({}, ("-p", "memfs.testing")),
        ({}, ("--memfs",)),
        ({"pyproject.toml": "[tool.pytest.ini_options]\nmemfs = true\n"}, ()),
    ],
    ids=["conftest", "-p", "--memfs", "ini"],
)
def test_each_documented_opt_in_gives_the_fixtures(tmp_path, files, args):
    files = {"pyproject.toml": "[tool.pytest.ini_options]\n", **files}
    folder = project(tmp_path, files)
    (folder / "test_store.py").write_text(STORE_TEST)
    result = run_pytest(folder, tmp_path, "-q", "-W", "error", *args)
    assert result.returncode == 0, result.stdout + result.stderr
    assert outcome(result) == {"passed": 1}, result.stdout
    listed = run_pytest(folder, tmp_path, "--fixtures", *args)
    for name in PLUGIN_FIXTURES:
        assert re.search(rf"^{name}\b.*memfs", listed.stdout, re.MULTILINE), name


def test_the_fixtures_work_in_a_trio_mode_project(tmp_path):
    folder = project(
        tmp_path,
        {
            "pyproject.toml": "[tool.pytest.ini_options]\ntrio_mode = true\nmemfs = true\n",
            "test_async.py": """
                import httpx
                import trio

                async def test_async(memory_store, fault_proxy):
                    memory_store.seed({"/a.md": "text"})
                    fault_proxy.set(delay=0.2, match_method="GET")
                    url = f"{fault_proxy.url}/v1/memory_stores/{memory_store.store_id}/memories"
                    async with httpx.AsyncClient(headers=memory_store.headers()) as http:
                        with trio.move_on_after(0.05) as scope:
                            await http.get(url)
                        assert scope.cancelled_caught, "the proxy's delay holds the answer"
                        r = await http.get(url, params={"view": "full"})
                    assert [m["content"] for m in r.json()["data"]] == ["text"]

                def test_sync(memory_store):
                    assert memory_store.memories() == {}

                async def test_the_proxy_in_process(memory_store):
                    from memfs.testing import FaultProxy

                    async with FaultProxy(memory_store.url) as proxy:
                        proxy.set(status=529, status_next=1, match_method="POST")
                        url = f"{proxy.url}/v1/memory_stores/{memory_store.store_id}/memories"
                        async with httpx.AsyncClient(headers=memory_store.headers()) as http:
                            for _ in range(2):
                                await http.post(url, json={"path": "/b.md", "content": ""})
                    assert proxy.counters.statuses("POST", "/memories$") == [529, 200]
                    assert memory_store.memories() == {"/b.md": ""}
            """,
        },
    )
    result = run_pytest(folder, tmp_path, "-q", "-W", "error")
    assert result.returncode == 0, result.stdout + result.stderr
    assert outcome(result) == {"passed": 3}, result.stdout
