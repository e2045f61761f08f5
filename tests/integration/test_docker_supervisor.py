"""The in-container halves of Docker execution, run on the host: the supervisor and the exec relay.

These need no engine: the supervisor is plain Python that the provider runs
inside every container (and inside bwrap in allowlist mode), and the exec
shim's frame relay reads the Engine API's multiplexed stream format.
"""

from __future__ import annotations

import io
import signal
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from deerflow.sandbox.docker_exec import relay
from deerflow.sandbox.egress_bridge import supervisor_source

pytestmark = pytest.mark.integration

SUPERVISOR = [sys.executable, str(supervisor_source())]


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
