"""docker/ and systemd/ where no container engine or systemd runs: what can be
checked of them without one. The image builds memfs's wheel and installs it
by the steps CI's scripts/check_wheel.sh takes (which then mounts from it),
copies only files that exist, runs the agent as a user of its own and hands
over to `memfs run`; compose starts the sandbox with FUSE's device and
capability; the systemd unit passes `systemd-analyze verify` and gives the
final sync time to finish. The entrypoint's behaviour is tested for real in
tests/mount/test_entrypoint.py and tests/system/test_sandbox.py."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "docker" / "Dockerfile"
ENTRYPOINT = ROOT / "docker" / "entrypoint.sh"
COMPOSE = ROOT / "docker" / "compose.yaml"
UNIT = ROOT / "systemd" / "memfs@.service"
CHECK_WHEEL = ROOT / "scripts" / "check_wheel.sh"


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined."""
    joined = re.sub(r"\\\n", " ", re.sub(r"^\s*#.*\n", "", text, flags=re.M))
    out = []
    for line in joined.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def _stages(steps: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """The Dockerfile's stages, each from its FROM on."""
    stages: list[list[tuple[str, str]]] = []
    for word, args in steps:
        if word == "FROM":
            stages.append([])
        stages[-1].append((word, args))
    return stages


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_image_builds_the_wheel_and_installs_it_as_ci_does():
    steps = _instructions(DOCKERFILE.read_text())
    builder, image = _stages(steps)
    (source,) = [args for word, args in builder if word == "FROM"]
    stage = source.split()[-1]
    assert re.fullmatch(r".+ AS \w+", source, re.I), source
    dist = _pyproject()["project"]["name"]
    assert dist == "memfs-stores"  # PyPI's `memfs` is another project

    built = " ".join(args for word, args in builder if word == "RUN")
    assert "python -m build " in built and "pip wheel --wheel-dir /wheels " in built
    copied = [source for word, args in builder if word == "COPY" for source in args.split()[:-1]]
    assert copied == ["pyproject.toml", _pyproject()["project"]["readme"], "memfs"]  # what it reads

    (wheels,) = [args.split() for word, args in image if word == "COPY" and "--from" in args]
    assert wheels[:2] == [f"--from={stage}", "/wheels"]
    installed = " ".join(args for word, args in image if word == "RUN")
    assert f"pip install --no-index --find-links {wheels[2]} {dist}" in installed
    assert "memfs --version" in installed
    assert not re.search(r"\b(gcc|libfuse3-dev|install\.sh)\b", installed), (
        "no compiler in the image"
    )
    assert re.search(r"apt-get install .*\bfuse3\b", installed)

    # What CI runs installs by the same two pip steps, then mounts from the result.
    assert "bash scripts/check_wheel.sh" in (ROOT / ".ci" / "run").read_text()
    script = CHECK_WHEEL.read_text()
    assert "-m build " in script and "-m pip wheel --wheel-dir " in script
    assert re.search(rf"-m pip install --no-index --find-links \S+ {dist}\n", script)
    assert re.search(r'"\$memfs" mount ', script) and re.search(r'"\$memfs" --version', script)

    for word, args in steps:
        if word == "COPY" and "--from" not in args:
            for source in args.split()[:-1]:
                assert (ROOT / source).exists(), f"COPY {source}: not in the repository"


def test_the_image_runs_memfs_run_for_an_agent_user_of_its_own():
    text = DOCKERFILE.read_text()
    steps = _instructions(text)
    (entrypoint,) = [args for word, args in steps if word == "ENTRYPOINT"]
    assert "/usr/local/bin/memfs-entrypoint" in entrypoint
    assert ["docker/entrypoint.sh", "/usr/local/bin/memfs-entrypoint"] in [
        args.split() for word, args in steps if word == "COPY"
    ]
    assert re.search(r"useradd .*\bagent\b", text)
    assert ("ENV", "MEMFS_AGENT_USER=agent") in steps
    assert "/mnt/memory" in text
    assert not [args for word, args in steps if word == "USER"], "memfs itself runs as root"


def test_the_entrypoint_is_executable_and_hands_over_to_memfs_run():
    assert os.access(ENTRYPOINT, os.X_OK)
    assert ENTRYPOINT.read_text().startswith("#!/usr/bin/env bash\n")
    subprocess.run(["bash", "-n", str(ENTRYPOINT)], check=True)
    assert re.search(r"^\s*exec memfs run ", ENTRYPOINT.read_text(), re.M)


@pytest.mark.skipif(not shutil.which("shellcheck"), reason="shellcheck is not installed")
def test_the_shell_scripts_pass_shellcheck():
    scripts = [*ROOT.glob("scripts/*.sh"), *ROOT.glob("docker/*.sh"), ROOT / ".ci" / "run"]
    assert {ENTRYPOINT, CHECK_WHEEL, ROOT / "scripts" / "install.sh"} <= set(scripts)
    r = subprocess.run(["shellcheck", *map(str, scripts)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout


def test_compose_starts_the_sandbox_with_fuse_and_a_local_store():
    text = COMPOSE.read_text()
    sandbox = text[text.index("\n  sandbox:") :]
    assert re.search(r"devices:\n\s+- /dev/fuse\n", sandbox)
    assert re.search(r"cap_add:\n\s+- SYS_ADMIN\n", sandbox)
    assert re.search(r"^\s*# privileged: true$", sandbox, re.M)
    store = text[text.index("\n  store:") : text.index("\n  sandbox:")]
    assert re.search(r"- memfs\n\s+- serve\n", store)
    assert "dockerfile: docker/Dockerfile" in store
    assert "http://store:8377" in sandbox and '"8377"' in store


def _unit_settings() -> dict[str, str]:
    settings = {}
    for line in UNIT.read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            settings[key] = value
    return settings


def test_the_unit_stops_with_the_final_sync_within_its_timeout():
    unit = _unit_settings()
    assert unit["Type"] == "notify"  # memfs sends READY=1 (tests/mount/test_run.py)
    assert unit["KillMode"] == "mixed"  # SIGTERM to memfs alone: it stops the store processes
    (final,) = re.findall(r"--final-sync-timeout (\d+)", unit["ExecStart"])
    assert int(unit["TimeoutStopSec"]) > int(final)
    assert "--daemon" not in unit["ExecStart"]


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze is not installed")
def test_the_unit_passes_systemd_analyze_verify(tmp_path):
    memfs = shutil.which("memfs") or str(Path(sys.executable).parent / "memfs")
    text = UNIT.read_text().replace("/usr/local/bin/memfs", memfs)
    (tmp_path / "memfs@.service").write_text(text)
    r = subprocess.run(
        ["systemd-analyze", "verify", str(tmp_path / "memfs@memstore_0123.service")],
        capture_output=True,
        text=True,
    )
    # It reports what it ignores on stderr and still exits 0.
    assert (r.returncode, r.stderr.strip()) == (0, ""), r.stderr
