"""In-sandbox supervisor: run one command, optionally bridge the egress proxy, clean up.

This file is executed *inside* a sandbox by whatever Python is there (the
relocated server interpreter, or an image's own ``python3``), so it uses the
standard library only and imports nothing from ``deerflow``.  Providers
bind it read-only at ``/opt/deerflow/supervisor.py`` and run::

    python /opt/deerflow/supervisor.py [--relay 127.0.0.1:3128=/run/egress/proxy.sock]
        [--pidfile PATH] [--watch-stdin] [--rlimit nproc=512 ...] -- COMMAND...

What it does, and why:

* ``--relay`` listens on a loopback TCP port and pipes each connection to the
  egress proxy's UNIX socket.  The sandbox has no network, but a socket file
  crosses the namespace boundary, and clients only know ``HTTP_PROXY`` URLs.
  The listener is up before the command starts.
* The command runs in its own session; its process group id is written to
  ``--pidfile`` so the host can kill the group from outside (``docker exec``
  does not kill the exec'd process when its client goes away).
* ``--watch-stdin`` treats end-of-file on stdin as "the host side is gone":
  the Docker exec shim holds stdin open for as long as it lives, so a killed
  shim (timeout, kernel restart) takes the command's whole group with it.
* ``--rlimit NAME=VALUE`` (``nproc``, ``cpu``, ``as``) sets a resource limit
  (soft and hard) before the command starts, so the command and everything it
  forks inherit it and cannot raise it again.  ``cpu`` gets a hard limit 5 s
  above the soft one: ``SIGXCPU`` first, then ``SIGKILL``.
* When the command ends, its group is killed, so background processes never
  outlive a one-shot command; termination signals are forwarded to the group.

The exit status is the command's (``128 + signal`` when it was killed).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import signal
import socket
import subprocess
import sys
import threading

_CHUNK = 65536


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(_CHUNK)
            if not data:
                break
            dst.sendall(data)
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def _bridge(client: socket.socket, unix_path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(unix_path)
    except OSError:
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
    back.start()
    _pipe(client, upstream)
    back.join()
    client.close()
    upstream.close()


def start_relay(spec: str) -> socket.socket:
    """Listen on ``host:port`` and bridge every connection to the UNIX socket in ``spec``."""
    address, _, unix_path = spec.partition("=")
    host, _, port = address.rpartition(":")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, int(port)))
    listener.listen(64)

    def accept() -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=_bridge, args=(client, unix_path), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return listener


_RLIMITS = {"nproc": resource.RLIMIT_NPROC, "cpu": resource.RLIMIT_CPU, "as": resource.RLIMIT_AS}
_CPU_HARD_GRACE_S = 5


def set_rlimit(spec: str) -> None:
    """Apply one ``NAME=VALUE`` limit to this process (inherited by the command)."""
    name, _, value = spec.partition("=")
    soft = int(value)
    hard = soft + _CPU_HARD_GRACE_S if name == "cpu" else soft
    _, current_hard = resource.getrlimit(_RLIMITS[name])
    if current_hard != resource.RLIM_INFINITY:
        soft, hard = min(soft, current_hard), min(hard, current_hard)
    resource.setrlimit(_RLIMITS[name], (soft, hard))


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pgid, signal.SIGKILL)


def _watch_stdin(pgid: int) -> None:
    try:
        while os.read(0, _CHUNK):
            pass
    except OSError:
        pass
    _kill_group(pgid)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="supervisor")
    parser.add_argument("--relay", action="append", default=[], help="HOST:PORT=UNIX_SOCKET")
    parser.add_argument("--pidfile")
    parser.add_argument("--watch-stdin", action="store_true")
    parser.add_argument("--rlimit", action="append", default=[], help="nproc|cpu|as=VALUE")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")
    for spec in args.relay:
        start_relay(spec)
    for spec in args.rlimit:
        set_rlimit(spec)
    stdin = subprocess.DEVNULL if args.watch_stdin else None
    child = subprocess.Popen(command, start_new_session=True, stdin=stdin)
    if args.pidfile:
        with open(args.pidfile, "w") as out:
            out.write(str(child.pid))

    def forward(signum: int, frame: object) -> None:
        if signum != signal.SIGINT:
            _kill_group(child.pid)
            return
        with contextlib.suppress(OSError):
            os.killpg(child.pid, signal.SIGINT)

    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, forward)
    if args.watch_stdin:
        threading.Thread(target=_watch_stdin, args=(child.pid,), daemon=True).start()
    code = child.wait()
    _kill_group(child.pid)
    if args.pidfile:
        with contextlib.suppress(OSError):
            os.unlink(args.pidfile)
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main())
