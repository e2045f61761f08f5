"""Running one command with a timeout and bounded output.

Design:

* The command gets its own session (``start_new_session``), so its process
  group holds everything it spawns.  On timeout the whole group is killed with
  ``SIGKILL``, not just the shell, otherwise ``sleep 999 &`` or a pipeline
  would outlive the deadline.  Once the command ends normally the group is
  killed as well: a command is one-shot and must not leave background
  processes running on the host.
* stdout and stderr are merged (the model reads them together, in order) and
  read by a helper thread that keeps only the first and last ``max_output / 2``
  bytes, so ``yes`` running for a minute cannot exhaust memory.
* The result is structured (:class:`ExecResult`); callers never parse text to
  learn the exit status.
* A long-lived process (a kernel) cannot rely on its group being killed, so
  :func:`kill_strays` kills a process tree except a kept *spine* (the kernel
  and the sandbox processes above it): everything a cell forked, however it
  re-grouped itself.  In a pid namespace orphans are re-parented to the
  namespace's init, which is in the tree, so nothing can step outside it.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

_READ_CHUNK = 65536
_READER_GRACE_S = 2.0
_STRAY_ROUNDS = 200
_STRAY_PAUSE_S = 0.01


@dataclass(frozen=True)
class ExecResult:
    """Outcome of one shell command.

    Attributes:
        output: Merged stdout/stderr, decoded as UTF-8 (invalid bytes replaced).
        exit_code: The command's exit status; ``None`` when it was killed on timeout.
        truncated: Whether the middle of the output was dropped to respect the cap.
        timed_out: Whether the command hit its timeout and was killed.
    """

    output: str
    exit_code: int | None
    truncated: bool = False
    timed_out: bool = False


class _BoundedReader(threading.Thread):
    """Drains a pipe, keeping its head and tail within a byte budget."""

    def __init__(self, stream: object, limit: int) -> None:
        super().__init__(daemon=True, name="sandbox-output")
        self._stream = stream
        self._half = max(limit // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def run(self) -> None:
        read = cast(io.BufferedReader, self._stream).read1  # Popen's pipes are buffered readers
        while chunk := read(_READ_CHUNK):
            room = self._half - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            self.tail += chunk
            excess = len(self.tail) - self._half
            if excess > 0:
                del self.tail[:excess]
                self.dropped += excess

    def text(self) -> str:
        """The captured output with a marker where bytes were dropped."""
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        if not self.dropped:
            return head + tail
        return f"{head}\n... [{self.dropped} bytes of output omitted] ...\n{tail}"


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the command's process group; tolerate it being gone already."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    except PermissionError:
        # The group leader exited and its pgid was reused by nobody we own.
        proc.kill()


def run_command(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    timeout: float,
    max_output: int,
    pass_fds: Sequence[int] = (),
    after_spawn: Callable[[], None] | None = None,
) -> ExecResult:
    """Run ``argv`` to completion or until ``timeout`` seconds have passed.

    Args:
        argv: The full command line (a sandbox wrapper plus the shell, usually).
        env: The complete environment of the child; nothing else is inherited.
        cwd: Host directory to start in.
        timeout: Seconds before the process group is killed.
        max_output: Bytes of output kept (half from the start, half from the end).
        pass_fds: Descriptors the child inherits (``bwrap --bind-fd``).
        after_spawn: Called once the child is spawned, or the spawn failed (it
            closes ``pass_fds`` in this process).

    Returns:
        The structured result; a timeout is a result, not an exception.
    """
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
            pass_fds=tuple(pass_fds),
        )
    finally:
        if after_spawn is not None:
            after_spawn()
    reader = _BoundedReader(proc.stdout, max_output)
    reader.start()
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        _kill_group(proc)
        proc.wait()
    reader.join(_READER_GRACE_S)
    if not reader.is_alive() and proc.stdout is not None:
        # A process that escaped the group (setsid) may still hold the pipe;
        # then the daemon reader keeps it until that process exits.
        proc.stdout.close()
    return ExecResult(
        output=reader.text(),
        exit_code=None if timed_out else proc.returncode,
        truncated=reader.dropped > 0,
        timed_out=timed_out,
    )


def _parents() -> dict[int, int]:
    """Every visible live process and its parent, from ``/proc`` (zombies left out)."""
    parents: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:  # exited meanwhile
            continue
        if fields[0] not in (b"Z", b"X"):
            parents[int(entry.name)] = int(fields[1])
    return parents


def descendants(root: int) -> set[int]:
    """The processes below ``root`` (not ``root`` itself)."""
    children: dict[int, list[int]] = {}
    for pid, ppid in _parents().items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def kill_strays(root: int, keep: Collection[int]) -> int:
    """SIGKILL every descendant of ``root`` not in ``keep``, until none is left.

    Forks racing the kill are caught by the next round; the rounds are
    bounded so a runaway tree cannot hold the caller forever.

    Returns:
        How many processes were signalled.
    """
    killed = 0
    for _ in range(_STRAY_ROUNDS):
        strays = descendants(root) - set(keep)
        if not strays:
            break
        for pid in strays:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
        time.sleep(_STRAY_PAUSE_S)
    return killed
