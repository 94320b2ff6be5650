"""`memfs serve` against a one-route Starlette app on uvicorn, under wrk.

Starts a `memfs serve` on a temporary SQLite file (or `--serve CMD`, for a
before/after in one run), creates one store holding one memory, and has
`wrk -t1 -c8` GET that memory (with the token header) for `--seconds`; then
does the same to a one-route Starlette app answering a small JSON object on
uvicorn (uvloop, httptools). Prints requests/s of each and their ratio.

    .venv/bin/python bench/wrk_bench.py [--seconds 10] [--serve "CMD" ...] [--rounds 1]

Needs `wrk` on the PATH (Debian's package). Every server is started on a
free loopback port and stopped at the end; each wrk run is bounded in time.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

import httpx

STARLETTE_APP = """
import sys, uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

async def one(request):
    return JSONResponse({"id": "mem_1", "path": "/a.md", "content": "hello"})

app = Starlette(routes=[Route("/one", one)])
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), loop="uvloop", http="httptools",
            log_level="warning", access_log=False)
"""


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_up(url: str, headers: dict[str, str]) -> None:
    deadline = time.monotonic() + 20
    while True:
        try:
            httpx.get(url, headers=headers, timeout=1)
            return
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise SystemExit(f"wrk_bench: {url} never answered")
            time.sleep(0.1)


def cpu_seconds(pid: int) -> float:
    """The user and system CPU a process has used (its threads included)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wrk(url: str, headers: dict[str, str], seconds: int, pid: int) -> tuple[float, float]:
    """wrk's requests/s, and the server's CPU per request in µs."""
    before = cpu_seconds(pid)
    args = ["wrk", "-t1", "-c8", f"-d{seconds}s"]
    for name, value in headers.items():
        args += ["-H", f"{name}: {value}"]
    out = subprocess.run(
        args + [url], capture_output=True, text=True, timeout=seconds + 30, check=True
    ).stdout
    if "Non-2xx" in out:
        raise SystemExit(f"wrk_bench: non-2xx answers from {url}:\n{out}")
    match = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if not match:
        raise SystemExit(f"wrk_bench: no rate in wrk's output:\n{out}")
    requests = re.search(r"(\d+) requests in", out)
    assert requests is not None
    used = cpu_seconds(pid) - before
    return float(match.group(1)), used / int(requests.group(1)) * 1e6


def bench_serve(command: str, seconds: int) -> tuple[float, float]:
    token = secrets.token_urlsafe(16)
    headers = {
        "x-api-key": token,
        "anthropic-version": "2023-06-01",
        "anthropic-beta": "agent-memory-2026-07-22",
    }
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="memfs-wrk-") as tmp:
        env = {**os.environ, "MEMFS_SERVE_TOKEN": token}
        proc = subprocess.Popen(
            shlex.split(command) + ["--db", os.path.join(tmp, "w.sqlite3"), "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            wait_up(base + "/v1/memory_stores", headers)
            sid = httpx.post(
                base + "/v1/memory_stores", headers=headers, json={"name": "wrk"}
            ).json()["id"]
            mid = httpx.post(
                f"{base}/v1/memory_stores/{sid}/memories",
                headers=headers,
                json={"path": "/a.md", "content": "hello"},
            ).json()["id"]
            return wrk(f"{base}/v1/memory_stores/{sid}/memories/{mid}", headers, seconds, proc.pid)
        finally:
            proc.terminate()
            proc.wait(10)


def bench_starlette(seconds: int) -> tuple[float, float]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", STARLETTE_APP, str(port)])
    try:
        url = f"http://127.0.0.1:{port}/one"
        wait_up(url, {})
        return wrk(url, {}, seconds, proc.pid)
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=10, help="length of each wrk run")
    parser.add_argument("--rounds", type=int, default=1, help="times each server is measured")
    parser.add_argument(
        "--serve",
        action="append",
        default=[],
        help="a command starting memfs serve, before --db and --port; repeatable"
        " (default: this checkout's)",
    )
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        print("wrk_bench: wrk is not installed (apt-get install wrk)", file=sys.stderr)
        return 1
    commands = args.serve or [f"{shlex.quote(sys.executable)} -m memfs serve"]
    for round_ in range(args.rounds):
        starlette, starlette_cpu = bench_starlette(args.seconds)
        print(
            f"round {round_ + 1}: Starlette one route on uvicorn: {starlette:.0f} requests/s,"
            f" {starlette_cpu:.0f} µs server CPU per request"
        )
        for command in commands:
            rate, cpu = bench_serve(command, args.seconds)
            print(
                f"  {command}: {rate:.0f} gets/s ({rate / starlette:.2f} of Starlette's),"
                f" {cpu:.0f} µs server CPU per get"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
