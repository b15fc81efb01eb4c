"""parser-serve as a process (issue 61): ``python -m parser.cli.serve`` on a free loopback port
with the tiny pipeline fixture, driven over raw sockets. A client that leaves mid-body or before
reading its answer costs nothing (the next request is answered, no traceback in the log); SIGTERM
answers what is in flight, refuses what comes after and exits with status 0; ``workers=2`` runs
two processes that both answer and both stop. Every wait is bounded; every process started here
is stopped at teardown (its process group killed if it outlived the test)."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, REPO
from tests.serve import word_forms

PIPELINE = FIXTURES / "pre_layers" / "tiny.pipeline"
TEXT = "The dog barked loudly. It ran away."
START = 90.0  # seconds for a process to load its models and listen (about 6 s here)
STOP = 30.0  # seconds for a process to exit after SIGTERM


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``python -m parser.cli.serve models=tiny.pipeline port=<free> *options`` in its own process
    group, its output in ``log``; ``stop()`` kills the group if it is still there."""

    def __init__(self, tmp_path: Path, *options: str) -> None:
        self.port = _free_port()
        self.log = tmp_path / f"serve-{self.port}.log"
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        env.pop("PARSER_SERVE_TOKEN", None)
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "parser.cli.serve", f"models={PIPELINE}",
                 f"port={self.port}", *options],
                cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            self._wait_listening()
        except BaseException:
            self.stop()
            raise

    def _wait_listening(self) -> None:
        deadline = time.monotonic() + START
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"parser-serve exited with {self.process.returncode} before "
                                     f"listening:\n{self.text()}")
            try:
                status, _, _ = request(self.port, "GET", "/models", timeout=5)
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"parser-serve did not answer /models within {START:g} s:\n"
                             f"{self.text()}")

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def terminate(self) -> float:
        """SIGTERM to the server process; the time it was sent."""
        sent = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        return sent

    def wait(self, timeout: float = STOP) -> int:
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"parser-serve did not exit within {timeout:g} s of SIGTERM:\n"
                                 f"{self.text()}") from None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=STOP)
            except subprocess.TimeoutExpired:
                pass
        try:  # workers=N: the worker processes are in the group too
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


@pytest.fixture
def servers(tmp_path):
    started: list[Server] = []

    def start(*options: str) -> Server:
        server = Server(tmp_path, *options)
        started.append(server)
        return server

    try:
        yield start
    finally:
        for server in started:
            server.stop()


def _head(method: str, path: str, body: bytes = b"", *, length: int | None = None) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    if method == "POST":
        lines += ["Content-Type: application/x-www-form-urlencoded",
                  f"Content-Length: {len(body) if length is None else length}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _read_answer(sock: socket.socket, timeout: float) -> bytes:
    """Everything until the server closes the connection (``Connection: close``), bounded."""
    deadline = time.monotonic() + timeout
    chunks = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"no complete answer within {timeout:g} s: "
                                 f"{b''.join(chunks)[:200]!r}")
        sock.settimeout(left)
        chunk = sock.recv(1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _parse_answer(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    headers = {k.lower(): v for k, v in headers.items()}
    assert int(headers.get("content-length", len(body))) == len(body), "a truncated answer"
    return int(lines[0].split()[1]), headers, body


def request(port: int, method: str, path: str, body: bytes = b"", *,
            timeout: float = 60) -> tuple[int, dict[str, str], bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(_head(method, path, body) + body)
        return _parse_answer(_read_answer(sock, timeout))


def _form(data: str, **params: str) -> bytes:
    return urllib.parse.urlencode({"data": data, **params}).encode()


def _parsed(port: int, body: bytes, timeout: float = 60) -> list[list[str]]:
    status, _, answer = request(port, "POST", "/process", body, timeout=timeout)
    assert status == 200, answer[:300]
    result = json.loads(answer)["result"]
    heads = [line.split("\t")[6] for line in result.split("\n")
             if line and not line.startswith("#")]
    assert heads and all(head.isdigit() for head in heads), "words without a head"
    return word_forms(result)


SHORT = _form(TEXT, tokenizer="", tagger="", parser="")
SHORT_WORDS = [["The", "dog", "barked", "loudly", "."], ["It", "ran", "away", "."]]
# a request that keeps the worker busy for a moment (about 2 s here: a tree's cost is cubic in
# its length): 40 sentences of 201 words, within max_words and max_body
LONG_SENTENCE = " ".join(["the dog barked loudly at the old man in the park"] * 20) + " ."
LONG = _form("\n".join([LONG_SENTENCE] * 40), input="horizontal", tagger="", parser="")


def _no_traceback(server: Server) -> None:
    log = server.text()
    assert "Traceback" not in log and "Exception in ASGI" not in log, log


def test_clients_that_leave_mid_request_cost_nothing(servers):
    server = servers()
    port = server.port
    body = SHORT
    # 1. headers announcing more body than is sent, part of the body, then gone
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(_head("POST", "/process", length=len(body) + 1000) + body[:20])
        time.sleep(0.2)
    # 2. half of the headers, then gone
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(_head("POST", "/process", length=len(body))[:30])
        time.sleep(0.2)
    # 3. a whole request (a short one), closed before reading the answer
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(_head("POST", "/process", body) + body)
    # 4. a whole request that takes the worker a while, closed while it is parsed, twice: the
    # second waits in the queue behind the first
    for _ in range(2):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(_head("POST", "/process", LONG) + LONG)
            time.sleep(0.3)
    # 5. a body sent with RST instead of FIN (SO_LINGER 0): the server sees a reset
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        sock.sendall(_head("POST", "/process", length=len(body) + 1000) + body[:20])
    started = time.monotonic()
    assert _parsed(port, SHORT) == SHORT_WORDS
    assert time.monotonic() - started < 30, "the worker was held by the clients that left"
    for _ in range(3):  # still serving, the same answer each time
        assert _parsed(port, SHORT) == SHORT_WORDS
    status, _, answer = request(port, "GET", "/models")
    assert status == 200 and json.loads(answer)["default_model"] == "tiny"
    assert server.process.poll() is None
    _no_traceback(server)


def test_sigterm_answers_what_is_in_flight_then_exits_0(servers):
    server = servers()
    port = server.port
    # the worker parses LONG; SHORT waits behind it in the queue: both are in flight at SIGTERM
    long = socket.create_connection(("127.0.0.1", port), timeout=10)
    short = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        long.sendall(_head("POST", "/process", LONG) + LONG)
        time.sleep(0.3)
        short.sendall(_head("POST", "/process", SHORT) + SHORT)
        time.sleep(0.5)
        unanswered = select.select([long, short], [], [], 0)[0]
        assert not unanswered, "answered before SIGTERM: make LONG longer"
        sent = server.terminate()
        while "Shutting down" not in server.text():  # uvicorn has closed its listening socket
            assert time.monotonic() - sent < STOP, server.text()
            time.sleep(0.05)
        # a request after SIGTERM: refused, or the connection closed; never hung
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as late:
                late.sendall(_head("GET", "/models"))
                late.settimeout(10)
                answer = late.recv(1 << 16)
            assert answer == b"" or answer.split(b" ")[1] in (b"503",), answer[:200]
        except (ConnectionRefusedError, ConnectionResetError):
            pass
        long_status, _, long_body = _parse_answer(_read_answer(long, STOP))
        short_status, _, short_body = _parse_answer(_read_answer(short, STOP))
    finally:
        long.close()
        short.close()
    assert long_status == 200, long_body[:300]
    assert word_forms(json.loads(long_body)["result"]) == [LONG_SENTENCE.split()] * 40
    assert short_status == 200, short_body[:300]
    assert word_forms(json.loads(short_body)["result"]) == SHORT_WORDS
    assert server.wait() == 0, server.text()
    assert time.monotonic() - sent < STOP
    _no_traceback(server)
    assert "POST /process" not in server.text()  # no access log unless asked (access_log=true)


def test_access_log_writes_a_line_per_request_when_asked(servers):
    server = servers("access_log=true")
    status, _, body = request(server.port, "POST", "/process", SHORT)
    assert status == 200, body[:300]
    deadline = time.monotonic() + 10
    while '"POST /process HTTP/1.1" 200' not in server.text():
        assert time.monotonic() < deadline, server.text()
        time.sleep(0.05)


def _worker_pids(server: Server) -> set[int]:
    """The worker processes the log announces (uvicorn's "Started server process [pid]")."""
    found = {int(pid) for pid in re.findall(r"Started server process \[(\d+)\]", server.text())}
    return found - {server.process.pid}


def _answering_pid(sock: socket.socket, server_port: int, pids: set[int]) -> int | None:
    """Which of ``pids`` holds the server's end of the connection ``sock`` (Linux's /proc)."""
    client_port = sock.getsockname()[1]
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = fields[1], fields[2]
        if (int(local.split(":")[1], 16) == server_port
                and int(remote.split(":")[1], 16) == client_port):
            inodes.add(f"socket:[{fields[9]}]")
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                try:
                    if os.readlink(fd) in inodes:
                        return pid
                except OSError:
                    continue
        except OSError:
            continue
    return None


def _read_kept_alive(sock: socket.socket) -> bytes:
    """One answer on a connection the server keeps open: its head, then Content-Length bytes
    (each recv bounded by the socket's timeout)."""
    raw = b""
    while True:
        head, found, body = raw.partition(b"\r\n\r\n")
        if found:
            length = re.search(rb"content-length: (\d+)", head, re.IGNORECASE)
            if length is not None and len(body) >= int(length.group(1)):
                return raw
        chunk = sock.recv(1 << 16)
        assert chunk, f"the connection closed mid-answer: {raw[:200]!r}"
        raw += chunk


def _alive(pid: int) -> bool:
    """``pid`` runs (a zombie waiting to be reaped does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_two_workers_both_answer_and_both_stop(servers):
    server = servers("workers=2")
    deadline = time.monotonic() + START
    while len(_worker_pids(server)) < 2 or server.text().count("Application startup complete") < 2:
        assert time.monotonic() < deadline, server.text()
        time.sleep(0.2)
    workers = _worker_pids(server)
    assert len(workers) == 2 and all(_alive(pid) for pid in workers), server.text()
    answered: dict[int, int] = {}
    deadline = time.monotonic() + 30
    for _ in range(200):  # connections one after another until both have answered (bounded)
        assert time.monotonic() < deadline, f"answered by {answered} only"
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            sock.sendall(b"GET /models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")  # keep-alive
            status, _, body = _parse_answer(_read_kept_alive(sock))
            assert status == 200 and json.loads(body)["default_model"] == "tiny"
            pid = _answering_pid(sock, server.port, workers)
            if pid is not None:
                answered[pid] = answered.get(pid, 0) + 1
        if len(answered) == 2 and min(answered.values()) >= 2:
            break
    assert set(answered) == workers, f"answered by {answered}, workers {workers}"
    sent = server.terminate()
    assert server.wait() == 0, server.text()
    while any(_alive(pid) for pid in workers):
        assert time.monotonic() - sent < STOP, f"workers {workers} outlived SIGTERM"
        time.sleep(0.1)
    _no_traceback(server)
