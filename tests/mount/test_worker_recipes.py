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
exactly the folders memfs mounted, that the SDK's own `write` tool is
refused in the read-only one and writes a file outside the mounts as it
would without memfs. A second session (one read-write store, on a server
whose stores hold one memory at most) checks that the recipe's `write` and
`edit` of a memory answer once the store holds the change (`memfs sync
FILE`), fail with the reference worker's NOT_SAVED sentence and the
store's reason when the store refuses a save, and fail saying where the
edit was kept when another session's change overruled it. `handle_item`
itself is not run: `memfs serve` has no work queue (heartbeat, stop).

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
from anthropic.lib.tools._memories import NOT_SAVED

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


def _run_driver(mounter, item: dict, command: list[str], **env_extra: str) -> dict:
    env = worker_env(mounter, **env_extra)
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"  # `memfs` for the recipe
    proc = memfs_run(mounter, command, env=env)
    out, err = proc.communicate(json.dumps(item), timeout=180)
    assert proc.returncode == 0, err
    result: dict = json.loads(out.strip().splitlines()[-1])
    return result


def _check_mounts(result: dict, notes_path: Path, docs_path: Path) -> None:
    """The roots are memfs's mounts; a file outside them is written as the SDK
    writes it (no store to confirm it), the read-only mount and the rest of
    the machine are refused."""
    assert result["memory_sync_interval"] is None
    assert result["factory_is_the_recipe_s"] is True
    assert sorted(result["allowed_roots"]) == sorted([str(notes_path), str(docs_path)])
    assert result["read_only_roots"] == [str(docs_path)]
    assert {"bash", "read", "write", "edit", "glob", "grep"} <= set(result["tools"])
    assert result["not_a_memory"] == "wrote 13 bytes to scratch.md", result
    assert result["read_only"].startswith("error: write: "), result
    assert result["outside"].startswith("error: write: "), result


def _saves_scenario(memfs_server, mounter, tmp_path) -> tuple[dict, list[str], Path]:
    """A session of one read-write store on a `memfs serve` whose stores hold one
    memory at most, so that a second file is refused, and the arguments that let
    the driver change a memory as another session would."""
    memfs_server.extra_args = ["--max-memories", "1"]
    memfs_server.restart()
    notes = admin(memfs_server, mounter, "create", "Notes").strip()
    notes_path = mounter.root / "notes"
    item = new_session(memfs_server, mounter, f"{notes}={notes_path}")
    token_file = tmp_path / "server-token"
    token_file.write_text(memfs_server.token)
    return item, [notes, memfs_server.url, str(token_file)], notes_path


# No pass pulls the store's change before the driver's edit: `memfs sync FILE`
# pushes at once whatever the interval.
SAVES_ENV = {"MEMFS_SYNC_INTERVAL": "3600"}


def _check_saves(result: dict, server, notes: str, notes_path: Path) -> None:
    """`write` and `edit` of a memory answer once the store holds the change; a
    save the store refuses fails with the reference's NOT_SAVED sentence and the
    store's reason; one the store overruled fails saying that the store's
    version is in the file and where the edit was kept."""
    memory = notes_path / "from-the-sdk.md"
    assert result["write"] == f"wrote 32 bytes to {memory}", result
    assert result["edit"] == f"edited {memory} (1 replacement(s))", result
    assert result["store_full"].startswith(
        f"error: write: {notes_path}/one-too-many.md: {NOT_SAVED}: "
    ), result
    assert "is full" in result["store_full"], result
    overruled = re.fullmatch(
        rf"error: edit: {re.escape(str(memory))}: {re.escape(NOT_SAVED)}: the memory store had"
        r" another version, which is now in the file; your edit is kept at (/.+)\."
        r" Read the file again before you retry\.",
        result["overruled"],
    )
    assert overruled, result
    assert Path(overruled[1]).read_text() == "overruled by the SDK's write tool\n"
    assert result["file_after"] == "changed in the store\n"
    assert remote_files(server, notes) == {"/from-the-sdk.md": "changed in the store\n"}


PY_DRIVER = """
import asyncio, importlib.util, json, os, subprocess, sys
from pathlib import Path
from anthropic import AsyncAnthropic
from anthropic.lib.tools.agent_toolset import AgentToolContext

spec = importlib.util.spec_from_file_location("worker", sys.argv[1])
worker_module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(worker_module)
scenario, workdir, notes = sys.argv[2:5]

worker = worker_module.make_worker(AsyncAnthropic(api_key="not-used-here"))
# The context the worker builds for a session with its memory off (no roots of its own).
ctx = AgentToolContext(workdir=workdir, allowed_roots=[], read_only_roots=[])
tools = {t.name: t for t in worker._tools_for(ctx)}


async def outcome(tool, **args):
    try:
        return str(await tools[tool].call(args))
    except Exception as e:
        return f"error: {e}"


async def mounts(reference):
    return {
        "memory_sync_interval": worker._memory_sync_interval,
        "factory_is_the_recipe_s": worker._tools is worker_module.tools,
        "allowed_roots": [str(p) for p in ctx.allowed_roots],
        "read_only_roots": [str(p) for p in ctx.read_only_roots],
        "tools": sorted(tools),
        "not_a_memory": await outcome("write", file_path="scratch.md", content="not a memory\\n"),
        "read_only": await outcome("write", file_path=reference + "/no.md", content="no"),
        "outside": await outcome("write", file_path="/etc/memfs-recipe-test", content="no"),
    }


async def saves(store, api_url, token_file):
    memory = notes + "/from-the-sdk.md"
    result = {"write": await outcome("write", file_path=memory, content="written by the SDK's write tool\\n")}
    result["edit"] = await outcome("edit", file_path=memory, old_string="written", new_string="saved")
    result["store_full"] = await outcome("write", file_path=notes + "/one-too-many.md", content="no room\\n")
    os.remove(notes + "/one-too-many.md")  # never saved: the final sync has nothing to leave behind
    # Another session changes the memory: the agent's next edit meets it.
    put = ["memfs", "store", "put", "--api-url", api_url, "--token-file", token_file, store, "/from-the-sdk.md"]
    subprocess.run(put, input="changed in the store\\n", text=True, check=True, capture_output=True)
    result["overruled"] = await outcome("edit", file_path=memory, old_string="saved", new_string="overruled")
    result["file_after"] = Path(memory).read_text()
    return result


print(json.dumps(asyncio.run(mounts(*sys.argv[5:]) if scenario == "mounts" else saves(*sys.argv[5:]))))
"""


def _python_recipe(tmp_path: Path, scenario: str, notes_path: Path) -> list[str]:
    """The command that runs the driver on docs/worker.md's `worker.py`, byte for byte."""
    worker_py = tmp_path / "worker.py"
    worker_py.write_text(recipe("python", "# worker.py"))
    driver = tmp_path / "driver.py"
    driver.write_text(PY_DRIVER)
    workdir = tmp_path / "workspace"
    workdir.mkdir()
    return [sys.executable, str(driver), str(worker_py), scenario, str(workdir), str(notes_path)]


def test_the_python_worker_recipe_uses_memfss_mounts(mounter, memfs_server, tmp_path):
    item, _, notes_path, docs_path = _session_with_two_stores(memfs_server, mounter)
    command = [*_python_recipe(tmp_path, "mounts", notes_path), str(docs_path)]
    _check_mounts(_run_driver(mounter, item, command), notes_path, docs_path)


def test_the_python_worker_recipe_confirms_the_agents_saves(mounter, memfs_server, tmp_path):
    item, args, notes_path = _saves_scenario(memfs_server, mounter, tmp_path)
    command = [*_python_recipe(tmp_path, "saves", notes_path), *args]
    result = _run_driver(mounter, item, command, **SAVES_ENV)
    _check_saves(result, memfs_server, args[0], notes_path)


TS_DRIVER = """
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const Anthropic = require('@anthropic-ai/sdk').default;
const recipe = require('./worker.js');

const [scenario, workdir, notes, ...rest] = process.argv.slice(2);
const worker = recipe.makeWorker(new Anthropic({ apiKey: 'not-used-here' }));
// The context the worker builds for a session with its memory off (no roots of its own).
const ctx = { workdir };
const tools = Object.fromEntries(worker.tools(ctx).map((t) => [t.name, t]));

async function outcome(tool, args) {
  try {
    const r = await tools[tool].run(args);
    return typeof r === 'string' ? r : JSON.stringify(r);
  } catch (e) {
    return 'error: ' + (e instanceof Error ? e.message : String(e));
  }
}

async function mounts(reference) {
  return {
    memory_sync_interval: worker.memorySyncIntervalMs,
    factory_is_the_recipe_s: worker.tools === recipe.tools,
    allowed_roots: ctx.allowedRoots,
    read_only_roots: ctx.readOnlyRoots,
    tools: Object.keys(tools).sort(),
    not_a_memory: await outcome('write', { file_path: 'scratch.md', content: 'not a memory\\n' }),
    read_only: await outcome('write', { file_path: reference + '/no.md', content: 'no' }),
    outside: await outcome('write', { file_path: '/etc/memfs-recipe-test', content: 'no' }),
  };
}

async function saves(store, apiUrl, tokenFile) {
  const memory = notes + '/from-the-sdk.md';
  const result = {};
  result.write = await outcome('write', { file_path: memory, content: "written by the SDK's write tool\\n" });
  result.edit = await outcome('edit', { file_path: memory, old_string: 'written', new_string: 'saved' });
  result.store_full = await outcome('write', { file_path: notes + '/one-too-many.md', content: 'no room\\n' });
  fs.rmSync(notes + '/one-too-many.md'); // never saved: the final sync has nothing to leave behind
  // Another session changes the memory: the agent's next edit meets it.
  const put = ['store', 'put', '--api-url', apiUrl, '--token-file', tokenFile, store, '/from-the-sdk.md'];
  execFileSync('memfs', put, { input: 'changed in the store\\n', stdio: ['pipe', 'ignore', 'inherit'] });
  result.overruled = await outcome('edit', { file_path: memory, old_string: 'saved', new_string: 'overruled' });
  result.file_after = fs.readFileSync(memory, 'utf8');
  return result;
}

(async () => {
  const result = scenario === 'mounts' ? await mounts(...rest) : await saves(...rest);
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


needs_node_modules = pytest.mark.skipif(
    _node_modules() is None,
    reason="MEMFS_TEST_NODE_MODULES names no node_modules with @anthropic-ai/sdk and typescript",
)


def _typescript_recipe(tmp_path: Path, scenario: str, notes_path: Path) -> list[str]:
    """docs/worker.md's `worker.ts`, byte for byte, type-checked against the SDK
    and compiled; the command that runs the driver on it."""
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
    workdir = tmp_path / "workspace"
    workdir.mkdir()
    return ["node", str(project / "driver.js"), scenario, str(workdir), str(notes_path)]


@needs_node_modules
def test_the_typescript_worker_recipe_uses_memfss_mounts(mounter, memfs_server, tmp_path):
    item, _, notes_path, docs_path = _session_with_two_stores(memfs_server, mounter)
    command = [*_typescript_recipe(tmp_path, "mounts", notes_path), str(docs_path)]
    _check_mounts(_run_driver(mounter, item, command), notes_path, docs_path)


@needs_node_modules
def test_the_typescript_worker_recipe_confirms_the_agents_saves(mounter, memfs_server, tmp_path):
    item, args, notes_path = _saves_scenario(memfs_server, mounter, tmp_path)
    command = [*_typescript_recipe(tmp_path, "saves", notes_path), *args]
    result = _run_driver(mounter, item, command, **SAVES_ENV)
    _check_saves(result, memfs_server, args[0], notes_path)
