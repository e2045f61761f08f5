"""A ``docker exec`` for hosts that have the Python SDK but maybe no CLI.

Run on the host as ``python -m deerflow.sandbox.docker.exec_shim --container ID
[--workdir DIR] -- COMMAND...``.  It starts COMMAND in the container with
the Engine API, copies its stdout and stderr to its own, and exits with its
status.  It is a real process on purpose: the sandbox layer launches
commands and kernels as processes (timeouts kill process groups, the kernel
manager polls and kills its kernel), and this keeps the Docker provider on
that same path.

Its stdin is attached to the exec and never written or closed: the exec's
stdin reaches end-of-file exactly when this process dies.  The in-container
supervisor (``--watch-stdin``) takes that as the signal to kill the
command's process group, because the engine itself does not stop an exec'd
process when its client goes away.  The connection to the engine comes from
the ``DOCKER_*`` environment, as ``docker.from_env`` reads it.

Every command pays this process's start, so a plain ``unix://`` or ``tcp://``
engine is spoken to with the standard library alone (three requests:
create, start hijacked, inspect), skipping the SDK's ~100 ms import; TLS,
``ssh://`` and anything else go through the SDK.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import struct
import sys
import time
from io import BufferedReader
from typing import Any, BinaryIO
from urllib.parse import quote, urlsplit

_STREAMS = {1: "stdout", 2: "stderr"}
_DEFAULT_HOST = "unix:///var/run/docker.sock"
_CHUNK = 65536
_EXIT_WAIT_S = 2.0  # the exec's exit code can lag its stream's end by a moment


def _read_exact(stream: Any, n: int) -> bytes:
    """Up to ``n`` bytes, fewer only at end-of-file (``stream`` has ``read`` or ``recv``)."""
    read = stream.read if hasattr(stream, "read") else stream.recv
    data = b""
    while len(data) < n:
        chunk = read(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def relay(sock: Any, *, stdout: BinaryIO, stderr: BinaryIO) -> None:
    """Copy the exec's multiplexed output frames to ``stdout``/``stderr`` (binary streams).

    Each frame is an 8-byte header (stream number, three zero bytes, big-endian
    payload size) and its payload.  ``sock`` is a socket or a binary file.
    """
    while True:
        header = _read_exact(sock, 8)
        if len(header) < 8:
            return
        stream, size = struct.unpack(">BxxxL", header)
        out = stderr if _STREAMS.get(stream) == "stderr" else stdout
        while size:
            data = _read_exact(sock, min(size, _CHUNK))
            if not data:
                return
            out.write(data)
            out.flush()
            size -= len(data)


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost")
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


class PlainEngine:
    """The three Engine API calls an exec needs, over a plain unix or tcp socket."""

    def __init__(self, host: str) -> None:
        url = urlsplit(host)
        if url.scheme == "unix":
            self._connect = lambda: _UnixConnection(url.path)
        else:
            address, port = url.hostname or "localhost", url.port or 2375
            self._connect = lambda: http.client.HTTPConnection(address, port)

    @classmethod
    def from_env(cls, env: dict[str, str] | os._Environ[str] = os.environ) -> PlainEngine | None:
        """The engine the environment names, or ``None`` if it needs the SDK (TLS, ssh, ...)."""
        host = env.get("DOCKER_HOST") or _DEFAULT_HOST
        if env.get("DOCKER_TLS_VERIFY") or env.get("DOCKER_CERT_PATH"):
            return None
        return cls(host) if urlsplit(host).scheme in ("unix", "tcp", "http") else None

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        conn = self._connect()
        try:
            conn.request(method, path, body=None if body is None else json.dumps(body),
                         headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            data = response.read()
        finally:
            conn.close()
        if response.status >= 300:
            raise RuntimeError(f"docker engine: {method} {path}: {response.status} {data.decode(errors='replace')}")
        return json.loads(data) if data else None

    def exec_create(self, container: str, command: list[str], workdir: str | None) -> str:
        body: dict[str, Any] = {"Cmd": command, "AttachStdin": True, "AttachStdout": True,
                                "AttachStderr": True, "Tty": False}
        if workdir:
            body["WorkingDir"] = workdir
        return str(self._request("POST", f"/containers/{quote(container)}/exec", body)["Id"])

    def exec_start(self, exec_id: str) -> BufferedReader:
        """Start the exec on a hijacked connection; its multiplexed output (stdin stays open)."""
        conn = self._connect()
        conn.connect()
        sock = conn.sock
        body = b'{"Detach": false, "Tty": false}'
        sock.sendall(f"POST /exec/{quote(exec_id)}/start HTTP/1.1\r\nHost: docker\r\n"
                     "Content-Type: application/json\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n"
                     f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        stream = sock.makefile("rb")
        status = stream.readline().decode(errors="replace").strip()
        while stream.readline() not in (b"\r\n", b"\n", b""):
            pass  # the headers: nothing in them matters
        parts = status.split()
        if len(parts) < 2 or parts[1] not in ("101", "200"):
            raise RuntimeError(f"docker engine: exec start: {status} {stream.read(4096).decode(errors='replace')}")
        return stream

    def exec_exit_code(self, exec_id: str) -> int | None:
        deadline = time.monotonic() + _EXIT_WAIT_S
        while True:
            state = self._request("GET", f"/exec/{quote(exec_id)}/json")
            if not state.get("Running") or time.monotonic() > deadline:
                return state.get("ExitCode")
            time.sleep(0.01)


def _run_plain(engine: PlainEngine, container: str, command: list[str], workdir: str | None) -> int | None:
    exec_id = engine.exec_create(container, command, workdir)
    stream = engine.exec_start(exec_id)
    relay(stream, stdout=sys.stdout.buffer, stderr=sys.stderr.buffer)
    return engine.exec_exit_code(exec_id)


def _run_sdk(container: str, command: list[str], workdir: str | None) -> int | None:
    import docker

    api = docker.from_env().api
    exec_id = api.exec_create(container, command, stdin=True, stdout=True, stderr=True, tty=False,
                              workdir=workdir)["Id"]
    sock = api.exec_start(exec_id, socket=True)
    relay(sock, stdout=sys.stdout.buffer, stderr=sys.stderr.buffer)
    return api.exec_inspect(exec_id).get("ExitCode")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="docker_exec")
    parser.add_argument("--container", required=True)
    parser.add_argument("--workdir")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")
    engine = PlainEngine.from_env()
    try:
        if engine is not None:
            code = _run_plain(engine, args.container, command, args.workdir)
        else:
            code = _run_sdk(args.container, command, args.workdir)
    except (RuntimeError, ConnectionError, FileNotFoundError) as exc:
        print(f"docker_exec: {exc}", file=sys.stderr)
        return 125  # as `docker exec` when the engine refuses
    return 1 if code is None else int(code)


if __name__ == "__main__":
    sys.exit(main())
