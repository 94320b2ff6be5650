"""What any local user can do to a running `memfs serve`, tried on a real
server over loopback: read its token off its command line, send it a body
without end, or hold its connections by connecting and never reading. The
token stays off the command line, a body past the limit is refused as soon
as it passes it, and connections are capped and dropped when they stall."""

from __future__ import annotations

import json
import os
import secrets
import select
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support import ServerProcess, api_headers, cmdlines_holding


def start(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> ServerProcess:
    """A server with no token of the test's own: only those `args` and `env` give."""
    return ServerProcess(
        tmp_path / "s.sqlite3", token="", extra_args=list(args), env=env or {}
    ).start()


def serve_once(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`memfs serve` run to its end (for the ones refused before listening)."""
    env = {k: v for k, v in os.environ.items() if k != "MEMFS_SERVE_TOKEN"}
    return subprocess.run(
        [sys.executable, "-m", "memfs", "serve", "--port", "0", "--db", str(tmp_path / "x.db")]
        + list(args),
        capture_output=True,
        text=True,
        timeout=20,
        env=env,
    )


def status_of(server: ServerProcess, token: str) -> int:
    return httpx.get(f"{server.url}/v1/memory_stores", headers=api_headers(token)).status_code


def proc_status(pid: int, field: str) -> int:
    """A `/proc/PID/status` size in KiB (VmRSS, VmHWM)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def server_holds(server: ServerProcess, client: socket.socket | int) -> bool:
    """Whether the server process still has the far end of `client` (a
    socket, or its local port) open: a descriptor of its on the TCP socket
    whose peer is that port."""
    pid = server.proc.pid
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            inodes.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue
    client_port = client if isinstance(client, int) else client.getsockname()[1]
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            local_port = int(fields[1].split(":")[1], 16)
            remote_port = int(fields[2].split(":")[1], 16)
            ours = (local_port, remote_port) == (server.port, client_port)
            if ours and f"socket:[{fields[9]}]" in inodes:
                return True
    return False


def wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def connect(server: ServerProcess, *, rcvbuf: int | None = None) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(10)
    sock.connect(("127.0.0.1", server.port))
    return sock


def head(method: str, target: str, token: str, extra: str = "") -> bytes:
    headers = "".join(f"{k}: {v}\r\n" for k, v in api_headers(token).items())
    return f"{method} {target} HTTP/1.1\r\nhost: x\r\n{headers}{extra}\r\n".encode()


def read_answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"closed before an answer; got {data!r}"
        data += chunk
    raw, _, rest = data.partition(b"\r\n\r\n")
    lines = raw.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = sock.recv(65536)
        assert chunk, "closed mid-body"
        rest += chunk
    return int(lines[0].split()[1]), headers, rest[:length]


def closed_by_server(sock: socket.socket, timeout: float) -> bool:
    """Whether the server closes the connection within `timeout` seconds
    (whatever it sent before is read and dropped)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([sock], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            continue
        try:
            if not sock.recv(1 << 20):
                return True
        except (ConnectionResetError, TimeoutError):
            return True
    return False


# ---- the server's token --------------------------------------------------------


def test_tokens_come_from_a_file_and_never_show_in_ps(tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text("# who may use this server\nfile-token-one\n\n  file-token-two, other  \n")
    tokens.chmod(0o600)
    server = start(tmp_path, "--token-file", str(tokens), env={"MEMFS_SERVE_TOKEN": "env-token"})
    try:
        for token in ("file-token-one", "file-token-two", "other", "env-token"):
            assert status_of(server, token) == 200, token
        assert status_of(server, "# who may use this server") == 401
        values = [b"file-token-one", b"file-token-two", b"env-token"]
        assert cmdlines_holding(values) == []
        assert not any(v.decode() in server.stderr for v in values)
        assert "warning" not in server.stderr
    finally:
        server.stop()


@pytest.mark.parametrize(
    "content, words",
    [(None, "cannot read the token file"), ("\n# only a comment\n", "holds no token")],
)
def test_a_token_file_that_gives_no_token_is_one_sentence(tmp_path, content, words):
    path = tmp_path / "tokens"
    if content is not None:
        path.write_text(content)
    r = serve_once(tmp_path, "--token-file", str(path))
    assert (r.returncode, r.stdout) == (2, "")
    (sentence,) = r.stderr.splitlines()
    assert sentence.startswith("memfs: ") and words in sentence


def test_a_token_on_the_command_line_warns_and_works_only_on_loopback(tmp_path):
    server = start(tmp_path, "--token", "argv-token-on-loopback")
    try:
        assert status_of(server, "argv-token-on-loopback") == 200
        (warning,) = [line for line in server.stderr.splitlines() if "warning" in line]
        assert "--token-file" in warning and "MEMFS_SERVE_TOKEN" in warning
        assert "argv-token-on-loopback" not in server.stderr
    finally:
        server.stop()
    r = serve_once(tmp_path, "--host", "0.0.0.0", "--token", "argv-token-everywhere")
    assert (r.returncode, r.stdout) == (2, "")
    (sentence,) = r.stderr.splitlines()
    assert sentence.startswith("memfs: --token is refused with --host 0.0.0.0")
    assert "argv-token-everywhere" not in r.stderr


def test_a_token_on_the_command_line_is_gone_from_it_once_the_server_listens(tmp_path):
    one, two = (f"argv-token-{secrets.token_hex(8)}" for _ in range(2))
    server = start(tmp_path, "--token", one, f"--token={two}", env={"MEMFS_SERVE_TOKEN": "env-tok"})
    try:
        for token in (one, two, "env-tok"):
            assert status_of(server, token) == 200, token
        assert cmdlines_holding([one.encode(), two.encode()]) == []
        with open(f"/proc/{server.proc.pid}/cmdline", "rb") as f:
            words = f.read().split(b"\0")
        assert b"serve" in words and str(server.db_path).encode() in words
        assert b"--token" not in words
        assert server.stderr.count("warning: --token") == 1
        assert one not in server.stderr and two not in server.stderr
    finally:
        server.stop()


# ---- bodies --------------------------------------------------------------------

MIB = 1024 * 1024


def test_a_chunked_body_past_the_limit_is_refused_at_once_and_memory_stays_bounded(tmp_path):
    server = start(tmp_path, env={"MEMFS_SERVE_TOKEN": "t"})
    try:
        sid = httpx.post(
            f"{server.url}/v1/memory_stores", headers=api_headers("t"), json={"name": "big"}
        ).json()["id"]
        pid = server.proc.pid
        before = proc_status(pid, "VmHWM")
        sock = connect(server)
        target = f"/v1/memory_stores/{sid}/memories"
        sock.sendall(
            head(
                "POST",
                target,
                "t",
                "content-type: application/json\r\ntransfer-encoding: chunked\r\n",
            )
        )
        chunk = b"x" * MIB
        framed = b"%x\r\n%s\r\n" % (len(chunk), chunk)
        sock.sendall(b'6\r\n{"a":"\r\n')
        sent, answered = 0, False
        while sent < 256 * MIB:
            ready, _, _ = select.select([sock], [], [], 0)
            if ready:
                answered = True
                break
            try:
                sock.sendall(framed)
            except (BrokenPipeError, ConnectionResetError):
                answered = True
                break
            sent += MIB
        assert answered, "the server read 256 MiB without answering"
        assert sent < 32 * MIB, f"the server answered only after {sent // MIB} MiB"
        status, headers, body = read_answer(sock)
        assert status == 413 and headers["connection"] == "close"
        assert json.loads(body)["error"]["type"] == "request_too_large"
        sock.close()
        grown = proc_status(pid, "VmHWM") - before
        assert grown < 40 * 1024, f"the server's peak RSS grew by {grown // 1024} MiB"
        # A body declared too large is refused before it is sent.
        with connect(server) as declared:
            declared.sendall(head("POST", target, "t", f"content-length: {512 * MIB}\r\n"))
            assert read_answer(declared)[0] == 413
        assert status_of(server, "t") == 200
    finally:
        server.stop()


def test_a_client_that_stops_sending_its_body_is_dropped(tmp_path):
    server = start(tmp_path, "--client-timeout", "1", env={"MEMFS_SERVE_TOKEN": "t"})
    try:
        with connect(server) as sock:
            stalled = head("POST", "/v1/memory_stores", "t", "content-length: 100\r\n") + b'{"na'
            sock.sendall(stalled)
            started = time.monotonic()
            wait_until(lambda: server_holds(server, sock), 5, "the connection")
            assert closed_by_server(sock, 5), "the stalled body was never dropped"
            assert 0.8 < time.monotonic() - started < 4
            wait_until(lambda: not server_holds(server, sock), 5, "its descriptor to close")
        assert "Traceback" not in server.stderr and "internal error" not in server.stderr
    finally:
        server.stop()


# ---- connections ------------------------------------------------------------------


def test_a_client_that_stops_reading_is_dropped_after_the_client_timeout(tmp_path):
    server = start(tmp_path, "--client-timeout", "1", env={"MEMFS_SERVE_TOKEN": "t"})
    try:
        headers = api_headers("t")
        sid = httpx.post(
            f"{server.url}/v1/memory_stores", headers=headers, json={"name": "s"}
        ).json()["id"]
        content = "y" * 100_000
        mem = httpx.post(
            f"{server.url}/v1/memory_stores/{sid}/memories",
            headers=headers,
            json={"path": "/big.md", "content": content},
        ).json()
        sock = connect(server, rcvbuf=4096)
        get = head("GET", f"/v1/memory_stores/{sid}/memories/{mem['id']}", "t")
        sock.sendall(get * 300)  # 30 MB of answers, never read
        started = time.monotonic()
        wait_until(lambda: server_holds(server, sock), 5, "the connection")
        # Meanwhile the server answers everyone else.
        assert status_of(server, "t") == 200
        wait_until(lambda: not server_holds(server, sock), 10, "the stuck client to be dropped")
        assert 0.8 < time.monotonic() - started < 6
        sock.close()
        assert status_of(server, "t") == 200
        assert "Traceback" not in server.stderr and "internal error" not in server.stderr
    finally:
        server.stop()


def test_connections_past_the_cap_are_answered_503_and_closed(tmp_path):
    server = start(tmp_path, "--max-connections", "3", env={"MEMFS_SERVE_TOKEN": "t"})
    try:
        idle = [connect(server) for _ in range(3)]  # connected, sending nothing
        wait_until(lambda: all(server_holds(server, c) for c in idle), 5, "three connections")
        with connect(server) as extra:
            extra.sendall(head("GET", "/v1/memory_stores", "t"))
            status, headers, _ = read_answer(extra)
            assert status == 503 and headers["connection"] == "close"
            assert closed_by_server(extra, 5)
            wait_until(lambda: not server_holds(server, extra), 5, "the refused one to close")
        assert all(server_holds(server, c) for c in idle)
        gone = idle.pop()
        port = gone.getsockname()[1]
        gone.close()
        wait_until(lambda: not server_holds(server, port), 5, "one to close")
        assert status_of(server, "t") == 200
        for c in idle:
            c.close()
    finally:
        server.stop()


def test_a_request_head_that_never_ends_is_dropped_after_five_seconds(shared_memfs_server):
    with connect(shared_memfs_server) as sock:
        sock.sendall(b"GET /v1/memory_stores HTTP/1.1\r\nhost: x\r\n")  # and nothing more
        started = time.monotonic()
        assert closed_by_server(sock, 10)
        assert 4 < time.monotonic() - started < 8


def test_a_silent_connection_is_dropped_on_a_server_listening_on_every_address(tmp_path):
    """Bound to 0.0.0.0, the server sees its connections on the address they
    came to (here 127.0.0.1): they are bounded all the same."""
    server = start(tmp_path, "--host", "0.0.0.0", env={"MEMFS_SERVE_TOKEN": "t"})
    try:
        with connect(server) as sock:
            started = time.monotonic()
            assert closed_by_server(sock, 10)
            assert 4 < time.monotonic() - started < 8
    finally:
        server.stop()
