"""The halves of Docker execution that need no engine: the supervisor and the exec shim.

The supervisor is plain Python that the provider runs inside every container
(and inside bwrap in allowlist mode); the exec shim's frame relay reads the
Engine API's multiplexed stream format, and its standard-library client is
checked against a fake engine on a unix socket.
"""

from __future__ import annotations

import io
import json
import signal
import socket
import socketserver
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from deerflow.sandbox.docker import exec_shim as docker_exec
from deerflow.sandbox.docker.exec_shim import PlainEngine, relay
from deerflow.sandbox.execution.egress_bridge import supervisor_source

pytestmark = pytest.mark.integration

SUPERVISOR = [sys.executable, str(supervisor_source())]
# The shim by path, with no site-packages: its plain path needs the standard library only.
SHIM = f"import runpy, sys; sys.argv[0] = 'docker_exec'; runpy.run_path({docker_exec.__file__!r}, run_name='__main__')"


def _running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie (killed orphans may wait for a reaper)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _group_alive(pgid: int) -> bool:
    """Whether any running process is still in process group ``pgid``."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _running(int(entry.name)):
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except FileNotFoundError:
                continue
            if int(fields[2]) == pgid:
                return True
    return False


def _wait_for(path: Path) -> int:
    """The pid the supervisor records (polled: it is written right after the command starts)."""
    for _ in range(400):
        if path.exists() and path.read_text():
            return int(path.read_text())
        threading.Event().wait(0.05)
    raise AssertionError("the supervisor never wrote its pid file")


def test_closing_stdin_kills_the_whole_command_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "cmd.pid"
    proc = subprocess.Popen([*SUPERVISOR, "--watch-stdin", "--pidfile", str(pidfile), "--",
                             "bash", "-c", "sleep 300 & sleep 300"], stdin=subprocess.PIPE)
    pgid = _wait_for(pidfile)
    assert _group_alive(pgid)
    assert proc.stdin is not None
    proc.stdin.close()  # what the engine does when the exec shim dies
    assert proc.wait(timeout=30) == 128 + signal.SIGKILL
    assert not _group_alive(pgid)
    assert not pidfile.exists()


def test_the_exit_status_is_kept_and_background_processes_do_not_survive(tmp_path: Path) -> None:
    pidfile = tmp_path / "cmd.pid"
    result = subprocess.run([*SUPERVISOR, "--pidfile", str(pidfile), "--", "bash", "-c",
                             "sleep 300 & echo $! > bg.pid; echo started; exit 3"],
                            cwd=tmp_path, capture_output=True, timeout=30)
    assert result.returncode == 3 and result.stdout == b"started\n"
    assert not _running(int((tmp_path / "bg.pid").read_text()))


def test_the_relay_bridges_loopback_tcp_to_the_proxy_socket(tmp_path: Path) -> None:
    path = tmp_path / "proxy.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()

    def answer() -> None:
        conn, _ = server.accept()
        with conn:
            conn.sendall(b"proxy saw: " + conn.recv(100))

    threading.Thread(target=answer, daemon=True).start()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = (f"import socket; s = socket.create_connection(('127.0.0.1', {port})); s.sendall(b'hello'); "
              "s.shutdown(socket.SHUT_WR); print(s.recv(100).decode())")
    result = subprocess.run([*SUPERVISOR, "--relay", f"127.0.0.1:{port}={path}", "--", sys.executable, "-c", client],
                            capture_output=True, timeout=30)
    server.close()
    assert result.stdout == b"proxy saw: hello\n", result.stderr


def test_the_exec_relay_splits_the_engines_stream_into_stdout_and_stderr() -> None:
    ours, engine = socket.socketpair()
    frames = [(1, b"out-1 "), (2, b"err-1"), (1, b"out-2")]
    engine.sendall(b"".join(struct.pack(">BxxxL", stream, len(data)) + data for stream, data in frames))
    engine.close()
    stdout, stderr = io.BytesIO(), io.BytesIO()
    relay(ours, stdout=stdout, stderr=stderr)
    assert (stdout.getvalue(), stderr.getvalue()) == (b"out-1 out-2", b"err-1")


# -- the exec shim's own Engine API client ----------------------------------------------


class FakeEngine(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """Just enough of the Engine API for one exec: create, start (hijacked), inspect."""

    daemon_threads = True

    def __init__(self, path: Path, frames: list[tuple[int, bytes]], exit_code: int) -> None:
        self.frames, self.exit_code = frames, exit_code
        self.requests: list[tuple[str, str, dict[str, object]]] = []
        self.stdin_closed = threading.Event()
        super().__init__(str(path), FakeEngineHandler)


class FakeEngineHandler(socketserver.StreamRequestHandler):
    server: FakeEngine

    def handle(self) -> None:
        method, path, _ = self.rfile.readline().decode().split(" ", 2)
        length = 0
        while (line := self.rfile.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        body = json.loads(self.rfile.read(length) or b"{}")
        self.server.requests.append((method, path, body))
        if path.endswith("/start"):
            self.wfile.write(b"HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\n"
                             b"Connection: Upgrade\r\nUpgrade: tcp\r\n\r\n")
            for stream, data in self.server.frames:
                self.wfile.write(struct.pack(">BxxxL", stream, len(data)) + data)
            self.wfile.flush()
            self.request.shutdown(socket.SHUT_WR)  # the command ended; its stdin stays ours
            if self.rfile.read() == b"":
                self.server.stdin_closed.set()
            return
        if path.endswith("/exec"):
            reply: dict[str, object] = {"Id": "exec-1"}
        else:
            reply = {"Running": False, "ExitCode": self.server.exit_code}
        data = json.dumps(reply).encode()
        self.wfile.write(b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(data), data))


def test_the_exec_shim_speaks_the_engine_api_without_the_sdk(tmp_path: Path) -> None:
    sock = tmp_path / "docker.sock"
    engine = FakeEngine(sock, [(1, b"out "), (2, b"err"), (1, b"more")], exit_code=3)
    threading.Thread(target=engine.serve_forever, daemon=True).start()
    env = {"PATH": "/usr/bin:/bin", "DOCKER_HOST": f"unix://{sock}"}
    result = subprocess.run([sys.executable, "-S", "-c", SHIM, "--container", "c1", "--workdir", "/w", "--",
                             "bash", "-c", "x"], env=env, capture_output=True, timeout=30)
    engine.shutdown()
    engine.server_close()
    assert (result.returncode, result.stdout, result.stderr) == (3, b"out more", b"err")
    assert [(m, p) for m, p, _ in engine.requests] == [
        ("POST", "/containers/c1/exec"), ("POST", "/exec/exec-1/start"), ("GET", "/exec/exec-1/json")]
    assert engine.requests[0][2] == {"Cmd": ["bash", "-c", "x"], "AttachStdin": True, "AttachStdout": True,
                                     "AttachStderr": True, "Tty": False, "WorkingDir": "/w"}
    assert engine.stdin_closed.wait(5)  # the exec's stdin ends when the shim does


@pytest.mark.parametrize(("env", "plain"), [
    ({}, True),
    ({"DOCKER_HOST": "unix:///tmp/d.sock"}, True),
    ({"DOCKER_HOST": "tcp://127.0.0.1:2375"}, True),
    ({"DOCKER_HOST": "tcp://127.0.0.1:2376", "DOCKER_TLS_VERIFY": "1"}, False),
    ({"DOCKER_HOST": "ssh://user@host"}, False),
])
def test_engines_needing_tls_or_ssh_go_through_the_sdk(env: dict[str, str], plain: bool) -> None:
    assert (PlainEngine.from_env(env) is not None) == plain
