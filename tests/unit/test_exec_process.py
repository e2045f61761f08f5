"""Commands end at their timeout with their whole process group, and output stays bounded."""

from __future__ import annotations

import os
import time
from pathlib import Path

from deerflow.sandbox.execution.process import run_command

ENV = {"PATH": "/usr/bin:/bin"}


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a running (not zombie) process."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def _wait_dead(pid: int, limit: float = 10.0) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_exit_code_and_merged_output(tmp_path: Path) -> None:
    result = run_command(
        ["/bin/sh", "-c", "echo out; echo err >&2; exit 3"],
        env=ENV, cwd=tmp_path, timeout=30, max_output=10_000,
    )  # fmt: skip
    assert result.exit_code == 3
    assert "out" in result.output and "err" in result.output
    assert not result.timed_out and not result.truncated


def test_timeout_kills_background_children_too(tmp_path: Path) -> None:
    result = run_command(
        ["/bin/sh", "-c", "sleep 300 & echo $! > bg.pid; sleep 300"],
        env=ENV, cwd=tmp_path, timeout=1, max_output=10_000,
    )  # fmt: skip
    assert result.timed_out
    assert result.exit_code is None
    assert _wait_dead(int((tmp_path / "bg.pid").read_text()))


def test_background_process_does_not_outlive_a_finished_command(tmp_path: Path) -> None:
    result = run_command(
        ["/bin/sh", "-c", "sleep 300 > /dev/null 2>&1 & echo $! > bg.pid"],
        env=ENV, cwd=tmp_path, timeout=30, max_output=10_000,
    )  # fmt: skip
    assert result.exit_code == 0
    assert _wait_dead(int((tmp_path / "bg.pid").read_text()))


def test_huge_output_keeps_head_and_tail_within_the_cap(tmp_path: Path) -> None:
    result = run_command(
        ["/bin/sh", "-c", "echo FIRST; yes filler | head -n 200000; echo LAST"],
        env=ENV, cwd=tmp_path, timeout=30, max_output=4_000,
    )  # fmt: skip
    assert result.truncated
    assert result.output.startswith("FIRST")
    assert result.output.rstrip().endswith("LAST")
    assert len(result.output) < 4_200
    assert "bytes of output omitted" in result.output


def test_only_the_given_environment_reaches_the_command(tmp_path: Path) -> None:
    os.environ["DEERFLOW_TEST_MARKER"] = "visible"
    try:
        result = run_command(["/usr/bin/env"], env=ENV, cwd=tmp_path, timeout=30, max_output=10_000)
    finally:
        del os.environ["DEERFLOW_TEST_MARKER"]
    assert "DEERFLOW_TEST_MARKER" not in result.output
