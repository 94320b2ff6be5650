"""The recipes of docs/worker.md, run as far as this machine can.

The `--on-work` spawn script runs as `ant beta:worker poll --on-work` runs
it: fed the work item of `memfs store session create` on standard input,
with the variables `ant` sets, and an agent that writes a memory.

The SDKs' `EnvironmentWorker` recipes: each, byte for byte as the page prints it, is the
command of a real `memfs run --work-item -` of a session on `memfs serve`
(one store read-write, one read-only). A driver builds the worker from it
with the real SDK (which must accept its configuration: memory sync off, a
tools factory), hands the worker's tools factory the context the worker
builds with its memory off, and checks that the file tools' roots are
exactly the folders memfs mounted, that the SDK's own `write` tool writes
into the read-write mount (the store gets it) and is refused in the
read-only one. `handle_item` itself is not run: `memfs serve` has no work
queue (heartbeat, stop).

Python runs everywhere (`anthropic` is in the test extras). TypeScript runs
where `MEMFS_TEST_NODE_MODULES` names a `node_modules` holding
`@anthropic-ai/sdk` and `typescript` (and `node` is on PATH), as `make test`
arranges where npm is installed (scripts/install.sh): the recipe is
type-checked against the SDK's types, compiled and run. Go is not run: see
docs/worker.md."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mount.test_worker import MARKER, admin, memfs_run, new_session, worker_env
from tests.support.mounts import memfs_mounts_under
from tests.support.running import remote_files

DOC = Path(__file__).resolve().parents[2] / "docs" / "worker.md"


def recipe(language: str, first_line: str) -> str:
    """The code block of docs/worker.md in `language` whose first line starts so."""
    text = DOC.read_text()
    for match in re.finditer(rf"```{language}\n(.*?)```", text, re.DOTALL):
        if match.group(1).startswith(first_line):
            return match.group(1)
    raise AssertionError(f"docs/worker.md has no {language} block starting {first_line!r}")


def test_the_spawn_script_of_the_worker_page_runs_an_agent_on_the_session(
    mounter, memfs_server, tmp_path
):
    """The `--on-work` script of docs/worker.md, byte for byte, fed the work
    item on standard input as `ant beta:worker poll --on-work` feeds it, with
    the variables that command sets, and an agent that writes a memory."""
    script = tmp_path / "on-work.sh"
    script.write_text(recipe("sh", "#!/bin/sh\n# on-work.sh"))
    script.chmod(0o755)
    store = admin(memfs_server, mounter, "create", "User Preferences").strip()
    item = new_session(memfs_server, mounter, f"{store}={mounter.root}/user-preferences")
    agent = tmp_path / "agent.sh"
    agent.write_text(
        "#!/bin/sh\n"
        f"ls -A {mounter.root}/user-preferences\n"
        f"echo 'prefers tabs' > {mounter.root}/user-preferences/editor.md\n"
    )
    agent.chmod(0o755)
    env = worker_env(
        mounter,
        AGENT=str(agent),
        ANTHROPIC_SESSION_ID=item["data"]["id"],
        ANTHROPIC_WORK_ID=item["id"],
        ANTHROPIC_ENVIRONMENT_ID=item["environment_id"],
        ANTHROPIC_ENVIRONMENT_KEY="sk-ant-oat01-the-environment-key",
        MEMFS_CACHE_DIR=str(mounter.cache_dir),
    )
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"  # memfs, as installed
    r = subprocess.run(
        [str(script)], input=json.dumps(item), env=env, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"{MARKER}\n"
    assert remote_files(memfs_server, store) == {"/editor.md": "prefers tabs\n"}
    assert memfs_mounts_under(mounter.tmp) == []


def _session_with_two_stores(server, mounter) -> tuple[dict, str, Path, Path]:
    notes = admin(server, mounter, "create", "Notes").strip()
    docs = admin(server, mounter, "create", "Reference").strip()
    notes_path, docs_path = mounter.root / "notes", mounter.root / "reference"
    item = new_session(server, mounter, f"{notes}={notes_path}", f"{docs}:read_only={docs_path}")
    return item, notes, notes_path, docs_path


def _run_driver(mounter, item: dict, command: list[str]) -> dict:
    env = worker_env(mounter)
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"  # `memfs` for the recipe
    proc = memfs_run(mounter, command, env=env)
    out, err = proc.communicate(json.dumps(item), timeout=180)
    assert proc.returncode == 0, err
    result: dict = json.loads(out.strip().splitlines()[-1])
    return result


PY_DRIVER = """
import asyncio, importlib.util, json, sys
from anthropic import AsyncAnthropic
from anthropic.lib.tools.agent_toolset import AgentToolContext

spec = importlib.util.spec_from_file_location("worker", sys.argv[1])
worker_module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(worker_module)
notes, reference, workdir = sys.argv[2:5]

worker = worker_module.make_worker(AsyncAnthropic(api_key="not-used-here"))
# The context the worker builds for a session with its memory off (no roots of its own).
ctx = AgentToolContext(workdir=workdir, allowed_roots=[], read_only_roots=[])
tools = {t.name: t for t in worker._tools_for(ctx)}


async def outcome(path, content):
    try:
        return str(await tools["write"].call({"file_path": path, "content": content}))
    except Exception as e:
        return f"refused: {e}"


async def main():
    return {
        "memory_sync_interval": worker._memory_sync_interval,
        "factory_is_the_recipe_s": worker._tools is worker_module.tools,
        "allowed_roots": [str(p) for p in ctx.allowed_roots],
        "read_only_roots": [str(p) for p in ctx.read_only_roots],
        "tools": sorted(tools),
        "write": await outcome(notes + "/from-the-sdk.md", "written by the SDK's write tool\\n"),
        "read_only": await outcome(reference + "/no.md", "no"),
        "outside": await outcome("/etc/memfs-recipe-test", "no"),
    }

print(json.dumps(asyncio.run(main())))
"""


def test_the_python_worker_recipe_uses_memfss_mounts(mounter, memfs_server, tmp_path):
    item, notes, notes_path, docs_path = _session_with_two_stores(memfs_server, mounter)
    worker_py = tmp_path / "worker.py"
    worker_py.write_text(recipe("python", "# worker.py"))
    driver = tmp_path / "driver.py"
    driver.write_text(PY_DRIVER)
    workdir = tmp_path / "workspace"
    workdir.mkdir()
    command = [sys.executable, str(driver), str(worker_py), str(notes_path), str(docs_path)]
    result = _run_driver(mounter, item, [*command, str(workdir)])
    assert result["memory_sync_interval"] is None
    assert result["factory_is_the_recipe_s"] is True
    assert sorted(result["allowed_roots"]) == sorted([str(notes_path), str(docs_path)])
    assert result["read_only_roots"] == [str(docs_path)]
    assert {"bash", "read", "write", "edit", "glob", "grep"} <= set(result["tools"])
    assert result["write"].startswith("wrote 32 bytes"), result
    assert result["read_only"].startswith("refused"), result
    assert result["outside"].startswith("refused"), result
    assert remote_files(memfs_server, notes) == {
        "/from-the-sdk.md": "written by the SDK's write tool\n"
    }


TS_DRIVER = """
const fs = require('node:fs');
const Anthropic = require('@anthropic-ai/sdk').default;
const recipe = require('./worker.js');

const [notes, reference, workdir] = process.argv.slice(2);
const worker = recipe.makeWorker(new Anthropic({ apiKey: 'not-used-here' }));
// The context the worker builds for a session with its memory off (no roots of its own).
const ctx = { workdir };
const tools = Object.fromEntries(worker.tools(ctx).map((t) => [t.name, t]));

async function outcome(path, content) {
  try {
    const r = await tools.write.run({ file_path: path, content });
    return typeof r === 'string' ? r : JSON.stringify(r);
  } catch (e) {
    return 'refused: ' + String(e);
  }
}

(async () => {
  const result = {
    memory_sync_interval: worker.memorySyncIntervalMs,
    factory_is_the_recipe_s: worker.tools === recipe.tools,
    allowed_roots: ctx.allowedRoots,
    read_only_roots: ctx.readOnlyRoots,
    tools: Object.keys(tools).sort(),
    write: await outcome(notes + '/from-the-sdk.md', "written by the SDK's write tool\\n"),
    read_only: await outcome(reference + '/no.md', 'no'),
    outside: await outcome('/etc/memfs-recipe-test', 'no'),
  };
  console.log(JSON.stringify(result));
})();
"""


def _node_modules() -> Path | None:
    where = os.environ.get("MEMFS_TEST_NODE_MODULES")
    if not where or shutil.which("node") is None:
        return None
    path = Path(where)
    if not (path / "@anthropic-ai" / "sdk").is_dir() or not (path / "typescript").is_dir():
        return None
    return path


@pytest.mark.skipif(
    _node_modules() is None,
    reason="MEMFS_TEST_NODE_MODULES names no node_modules with @anthropic-ai/sdk and typescript",
)
def test_the_typescript_worker_recipe_uses_memfss_mounts(mounter, memfs_server, tmp_path):
    modules = _node_modules()
    assert modules is not None
    project = tmp_path / "ts"
    project.mkdir()
    (project / "node_modules").symlink_to(modules)
    (project / "worker.ts").write_text(recipe("ts", "// worker.ts"))
    (project / "driver.js").write_text(TS_DRIVER)
    tsc = [
        "node",
        str(modules / "typescript" / "bin" / "tsc"),
        "--strict",
        "--target",
        "es2022",
        "--module",
        "commonjs",
        "--moduleResolution",
        "node10",
        "--esModuleInterop",
        "--skipLibCheck",
        "--types",
        "node",
        "worker.ts",
    ]
    compiled = subprocess.run(tsc, cwd=project, capture_output=True, text=True, timeout=300)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    item, notes, notes_path, docs_path = _session_with_two_stores(memfs_server, mounter)
    workdir = tmp_path / "workspace"
    workdir.mkdir()
    command = ["node", str(project / "driver.js"), str(notes_path), str(docs_path), str(workdir)]
    result = _run_driver(mounter, item, command)
    assert result["memory_sync_interval"] is None
    assert result["factory_is_the_recipe_s"] is True
    assert sorted(result["allowed_roots"]) == sorted([str(notes_path), str(docs_path)])
    assert result["read_only_roots"] == [str(docs_path)]
    assert {"bash", "read", "write", "edit", "glob", "grep"} <= set(result["tools"])
    assert "refused" not in result["write"], result
    assert result["read_only"].startswith("refused"), result
    assert result["outside"].startswith("refused"), result
    assert remote_files(memfs_server, notes) == {
        "/from-the-sdk.md": "written by the SDK's write tool\n"
    }
