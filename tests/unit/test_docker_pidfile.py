"""A timed-out command is killed by the pid file in the run directory, which the container can rewrite.

The run directory is bound read-write at ``/run/deerflow`` (kernel sockets, pid files), so the
sandboxed code can replace ``exec/<id>.pid`` (it can list the folder) while its command runs out
its time.  The host must read only a regular file there: a link to a host file was followed and
its content handed to ``docker exec`` as the process group to kill (visible to every process in
the container), and a FIFO blocked the host's thread forever.  No engine is needed: the slot's
container is a recorder.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from deerflow.sandbox.docker.provider import DockerSandboxProvider, _Slot

EXEC_ID = "0123456789abcdef0123456789abcdef"


class Container:
    """Records what the provider would run in the container."""

    id = "c0ffee"

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def exec_run(self, argv: list[str], **_: Any) -> None:
        self.calls.append(argv)


def kill(run_dir: Path) -> Container:
    """``DockerSandboxProvider._kill_exec`` on a slot whose run directory is ``run_dir``."""
    container = Container()
    provider = cast(DockerSandboxProvider, SimpleNamespace(_inner_python="python3", user="1000"))
    slot = _Slot(key=run_dir, container=container, fingerprint="f", run_dir=run_dir)
    done = threading.Event()

    def run() -> None:
        DockerSandboxProvider._kill_exec(provider, slot, EXEC_ID)
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(30), "the host blocked on the pid file"  # a hang guard: a FIFO's open blocks forever
    return container


def run_dir_with_exec(tmp_path: Path) -> Path:
    run_dir = tmp_path / "run"
    (run_dir / "exec").mkdir(parents=True)
    return run_dir


def test_a_link_planted_at_the_pid_file_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "host-secret"
    secret.write_text("31337")  # digits, so even a pid check after a followed read would pass it on
    run_dir = run_dir_with_exec(tmp_path)
    os.symlink(secret, run_dir / "exec" / f"{EXEC_ID}.pid")
    assert kill(run_dir).calls == []
    assert not (run_dir / "exec" / f"{EXEC_ID}.pid").exists() and secret.read_text() == "31337"


def test_a_fifo_planted_at_the_pid_file_is_not_waited_on(tmp_path: Path) -> None:
    run_dir = run_dir_with_exec(tmp_path)
    os.mkfifo(run_dir / "exec" / f"{EXEC_ID}.pid")
    assert kill(run_dir).calls == []


def test_only_a_process_group_id_is_passed_into_the_container(tmp_path: Path) -> None:
    run_dir = run_dir_with_exec(tmp_path)
    pidfile = run_dir / "exec" / f"{EXEC_ID}.pid"
    pidfile.write_text("-1; rm -rf /")
    assert kill(run_dir).calls == []
    pidfile.write_text("4242\n")
    (call,) = kill(run_dir).calls
    assert call[-1] == "4242" and not pidfile.exists()
    assert kill(run_dir).calls == []  # gone: the supervisor cleaned up first
