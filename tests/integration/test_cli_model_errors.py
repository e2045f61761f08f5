"""A model error in ``deerflow run`` is one line and exit status 1; ``--debug`` adds the traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

RUN_TIMEOUT = 300  # a hang guard


def _deerflow(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "deerflow.cli", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=RUN_TIMEOUT, check=False)


def test_a_model_error_is_one_line_unless_debug(tmp_path: Path):
    script = tmp_path / "one-turn.yaml"  # no `when_exhausted`: a second turn is a model error
    script.write_text("turns:\n  - text: Hello.\n")
    env = {k: v for k, v in os.environ.items() if k not in ("DEERFLOW_CONFIG", "OPENAI_API_KEY", "DEERFLOW_SERVER_URL")}
    env |= {"DEERFLOW_HOME": str(tmp_path / "home"), "DEERFLOW_SCRIPT": str(script)}
    first = _deerflow(["run", "Say hello"], env, tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    thread = _deerflow(["threads"], env, tmp_path).stdout.split()[0]

    failed = _deerflow(["run", "--thread", thread, "Again"], env, tmp_path)
    output = failed.stdout + failed.stderr
    assert failed.returncode == 1
    assert "Traceback" not in output
    mentions = [line for line in output.splitlines() if "has 1 turns" in line]
    assert len(mentions) == 1 and mentions[0].startswith("✗ error:"), output
    assert "run finished: error" in output

    debug = _deerflow(["--debug", "run", "--thread", thread, "Again"], env, tmp_path)
    assert debug.returncode == 1
    assert "Traceback (most recent call last)" in debug.stderr and "ScriptExhaustedError" in debug.stderr
