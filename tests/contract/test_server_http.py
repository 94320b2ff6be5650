"""`memfs serve`'s HTTP/1.1 as a client sees it on a raw socket: keep-alive,
pipelining, 100-continue, what it refuses before the API sees it, the access
log line, shutdown with connections open, and that an answered write
survives the server being killed at once, under concurrent clients.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import threading
import time

import httpx
import pytest

from tests.support import ServerProcess, api_headers


def connect(server: ServerProcess) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def request(method: str, target: str, body: bytes = b"", extra: str = "") -> bytes:
    headers = "".join(f"{k}: {v}\r\n" for k, v in api_headers().items())
    if body or method == "POST":
        headers += f"content-type: application/json\r\ncontent-length: {len(body)}\r\n"
    return f"{method} {target} HTTP/1.1\r\nhost: x\r\n{headers}{extra}\r\n".encode() + body


class Reader:
    """Answers read off one socket, by their content-length."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.buffer = sock, b""

    def _more(self) -> bool:
        chunk = self.sock.recv(65536)
        self.buffer += chunk
        return bool(chunk)

    def answer(self, head: bool = False) -> tuple[int, dict[str, str], bytes]:
        """The next answer; `head`: the answer to a HEAD, whose body is not sent."""
        while b"\r\n\r\n" not in self.buffer:
            assert self._more(), f"connection closed; got {self.buffer!r}"
        raw, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = 0 if head else int(headers.get("content-length", "0"))
        while len(self.buffer) < length:
            assert self._more(), "connection closed mid-body"
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return status, headers, body

    def closed(self) -> bool:
        """Whether the server closes the connection with nothing more to read."""
        return not self.buffer and not self._more()


def test_keep_alive_and_pipelined_requests_are_answered_in_order(shared_memfs_server):
    sid = shared_memfs_server.create_store("pipelined")["id"]
    with connect(shared_memfs_server) as sock:
        reader = Reader(sock)
        bodies = [json.dumps({"path": f"/p{i}.md", "content": str(i)}).encode() for i in range(3)]
        sock.sendall(
            b"".join(request("POST", f"/v1/memory_stores/{sid}/memories", b) for b in bodies)
            + request("GET", f"/v1/memory_stores/{sid}/memories?limit=10")
        )
        for i in range(3):
            status, headers, body = reader.answer()
            assert status == 200 and json.loads(body)["path"] == f"/p{i}.md"
            assert headers["content-type"] == "application/json" and headers["request-id"]
            assert headers["date"].endswith(" GMT")
        status, _, body = reader.answer()
        assert [m["path"] for m in json.loads(body)["data"]] == ["/p0.md", "/p1.md", "/p2.md"]
        sock.sendall(request("GET", f"/v1/memory_stores/{sid}"))
        assert reader.answer()[0] == 200


def test_expect_100_continue_is_answered_before_the_body(shared_memfs_server):
    with connect(shared_memfs_server) as sock:
        reader = Reader(sock)
        body = json.dumps({"name": "after 100"}).encode()
        head = request("POST", "/v1/memory_stores", b"", "expect: 100-continue\r\n")
        sock.sendall(head.replace(b"content-length: 0", b"content-length: %d" % len(body)))
        status, _, _ = reader.answer()
        assert status == 100
        sock.sendall(body)
        status, _, answer = reader.answer()
        assert status == 200 and json.loads(answer)["name"] == "after 100"


def test_an_answer_given_before_its_body_was_read_says_the_connection_closes(
    shared_memfs_server,
):
    """Refused before its body is read (here: a wrong key), a request's answer
    says `connection: close`, and the connection closes after it: a client
    keeping connections alive opens a new one rather than lose its next
    request on this one."""
    with connect(shared_memfs_server) as sock:
        reader = Reader(sock)
        body = json.dumps({"name": "never read"}).encode()
        head = request("POST", "/v1/memory_stores").replace(b"x-api-key: ", b"x-api-key: wrong-")
        sock.sendall(head.replace(b"content-length: 0", b"content-length: %d" % len(body)))
        status, headers, _ = reader.answer()
        assert status == 401
        assert headers.get("connection") == "close"
        sock.sendall(body)
        assert reader.closed()


@pytest.mark.parametrize(
    "raw",
    [
        b"GET /v1/memory_stores\xff HTTP/1.1\r\nhost: x\r\n\r\n",
        b"POST /v1/memory_stores HTTP/1.1\r\nhost: x\r\ncontent-length: twelve\r\n\r\n",
        b"NOT HTTP AT ALL\r\n\r\n",
    ],
)
def test_what_http_cannot_parse_is_a_400_and_a_close_before_the_api(shared_memfs_server, raw):
    with connect(shared_memfs_server) as sock:
        reader = Reader(sock)
        sock.sendall(raw)
        status, headers, body = reader.answer()
        assert (status, body) == (400, b"Invalid HTTP request received.")
        assert headers["connection"] == "close" and "request-id" not in headers
        assert reader.closed()


def test_head_answers_carry_no_body_and_http_1_0_closes(shared_memfs_server):
    with connect(shared_memfs_server) as sock:
        reader = Reader(sock)
        sock.sendall(request("HEAD", "/v1/memory_stores"))
        status, headers, _ = reader.answer(head=True)
        assert status == 200 and int(headers["content-length"]) > 0
        # The body a GET would have is not sent: the next answer follows at once.
        length = int(headers["content-length"])
        sock.sendall(request("GET", "/v1/memory_stores"))
        status, headers, body = reader.answer()
        assert status == 200 and len(body) == length
    with connect(shared_memfs_server) as sock:
        reader = Reader(sock)
        sock.sendall(request("GET", "/v1/memory_stores").replace(b"HTTP/1.1", b"HTTP/1.0", 1))
        assert reader.answer()[0] == 200
        assert reader.closed()


def test_access_log_keeps_its_line(tmp_path):
    server = ServerProcess(tmp_path / "s.sqlite3", extra_args=["--access-log"]).start()
    try:
        with server.http() as http:
            assert http.get("/v1/memory_stores", params={"limit": 5}).status_code == 200
        deadline = time.monotonic() + 10
        line = re.compile(
            r"127\.0\.0\.1:\d+ - - \[\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}\] "
            r'"GET /v1/memory_stores 1\.1" 200 \d+ "-" "python-httpx/[\d.]+"'
        )
        while not line.search(server.stderr):
            assert time.monotonic() < deadline, server.stderr
            time.sleep(0.05)
    finally:
        server.stop()


def test_open_connections_do_not_hold_up_shutdown(memfs_server):
    """An idle keep-alive connection is closed at once; a request still
    arriving gets the graceful two seconds, then is cut off."""
    idle = connect(memfs_server)
    busy = connect(memfs_server)
    head = request("POST", "/v1/memory_stores", b"")
    busy.sendall(head.replace(b"content-length: 0", b"content-length: 100"))
    time.sleep(0.3)
    proc = memfs_server.proc
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == 0
    assert time.monotonic() - started < 5
    assert idle.recv(10) == b""
    idle.close()
    busy.close()
    memfs_server.proc = None


def test_every_answered_write_survives_sigkill_under_concurrent_clients(memfs_server):
    """Eight clients create and update as fast as they can; the server is
    killed mid-stream. Every write that was answered is there after a restart,
    with the version it was answered with."""
    sid = memfs_server.create_store("killed")["id"]
    answered: dict[str, tuple[str, str]] = {}  # memory id -> (content, version id)
    stop = threading.Event()
    lock = threading.Lock()
    failures: list[str] = []

    def client(k: int) -> None:
        with httpx.Client(base_url=memfs_server.url, headers=api_headers(), timeout=10) as http:
            last = ""
            for i in range(10_000):
                if stop.is_set():
                    return
                content = f"client {k} write {i}"
                try:
                    if i % 2 == 0:
                        r = http.post(
                            f"/v1/memory_stores/{sid}/memories",
                            json={"path": f"/k{k}/{i}.md", "content": content},
                        )
                    else:
                        r = http.post(
                            f"/v1/memory_stores/{sid}/memories/{last}", json={"content": content}
                        )
                except httpx.HTTPError:
                    return
                if r.status_code != 200:
                    failures.append(r.text)
                    return
                with lock:
                    answered[r.json()["id"]] = (content, r.json()["memory_version_id"])
                last = r.json()["id"]

    threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 20
    while len(answered) < 200 and time.monotonic() < deadline:
        time.sleep(0.01)
    memfs_server.kill()
    stop.set()
    for t in threads:
        t.join(20)
    with lock:
        expected = dict(answered)
    assert not failures and len(expected) >= 100
    memfs_server.start()
    with memfs_server.http() as http:
        for memory_id, (content, version) in expected.items():
            got = http.get(f"/v1/memory_stores/{sid}/memories/{memory_id}").json()
            # A later write may have landed without its answer reaching us.
            if got["memory_version_id"] != version:
                versions = http.get(
                    f"/v1/memory_stores/{sid}/memory_versions",
                    params={"memory_id": memory_id, "limit": 100, "view": "basic"},
                ).json()["data"]
                assert version in [v["id"] for v in versions], (memory_id, content)
            else:
                assert got["content"] == content
