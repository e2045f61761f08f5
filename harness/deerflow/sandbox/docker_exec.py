"""A ``docker exec`` for hosts that have the Python SDK but maybe no CLI.

Run on the host as ``python -m deerflow.sandbox.docker_exec --container ID
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
the ``DOCKER_*`` environment (``docker.from_env``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

_STREAMS = {1: "stdout", 2: "stderr"}


def relay(sock: Any, *, stdout: Any, stderr: Any) -> None:
    """Copy the exec's multiplexed output frames to ``stdout``/``stderr`` (binary streams)."""
    from docker.utils.socket import frames_iter  # type: ignore[import-untyped]

    for stream, data in frames_iter(sock, tty=False):
        out = stderr if _STREAMS.get(stream) == "stderr" else stdout
        out.write(data)
        out.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="docker_exec")
    parser.add_argument("--container", required=True)
    parser.add_argument("--workdir")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")
    import docker  # type: ignore[import-untyped]

    api = docker.from_env().api
    exec_id = api.exec_create(args.container, command, stdin=True, stdout=True, stderr=True, tty=False,
                              workdir=args.workdir)["Id"]
    sock = api.exec_start(exec_id, socket=True)
    relay(sock, stdout=sys.stdout.buffer, stderr=sys.stderr.buffer)
    code = api.exec_inspect(exec_id).get("ExitCode")
    return 1 if code is None else int(code)


if __name__ == "__main__":
    sys.exit(main())
