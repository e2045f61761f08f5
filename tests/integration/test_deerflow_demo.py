"""``deerflow demo --out DIR``: the quickstart that ships with the package, run headless on the offline
model, everything inside DIR (the wheel test runs it without ``--out`` from the installed package)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

DEMO_TIMEOUT = 600  # a hang guard: a fresh kernel executes the notebook


def test_deerflow_demo_out_puts_everything_in_the_folder(tmp_path: Path):
    work, out = tmp_path / "work", tmp_path / "results"
    work.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("DEERFLOW_CONFIG", "OPENAI_API_KEY", "DEERFLOW_SERVER_URL", "DEERFLOW_SERVER_TOKEN",
                        "DEERFLOW_HOME")}
    done = subprocess.run([sys.executable, "-m", "deerflow.cli", "demo", "--out", str(out)], cwd=work, env=env,
                          capture_output=True, text=True, timeout=DEMO_TIMEOUT, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0 and "Traceback" not in output, output[-3000:]
    assert "without encryption" not in output  # the kernel's transport warning
    assert {"report.md", "evidence.csv", "winter_severity.png"} <= {p.name for p in (out / "artifacts").iterdir()}
    assert (out / "01_research_quickstart.ipynb").is_file() and (out / "home").is_dir()
    assert list(work.iterdir()) == []  # nothing outside --out


def test_an_out_folder_that_is_not_a_demos_is_refused_and_left_alone(tmp_path: Path, capsys):
    """The demo clears ``home/``, ``artifacts/`` and its notebook in ``--out`` before it runs: in a
    folder of the user's (``--out .``) those are theirs.  Refused in one line, before any kernel."""
    from deerflow_kernel.demo import OUT_MARKER, main

    mine = tmp_path / "project"
    (mine / "artifacts").mkdir(parents=True)
    (mine / "artifacts" / "thesis.md").write_text("months of work")
    (mine / "notes.txt").write_text("mine")
    a_file = tmp_path / "a-file"
    a_file.write_text("mine")
    for out, reason in ((mine, "not an earlier demo's"), (a_file, "is not a folder")):
        assert main(["--out", str(out)]) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err.count("\n") == 1 and reason in captured.err, captured
    assert (mine / "artifacts" / "thesis.md").read_text() == "months of work" and a_file.read_text() == "mine"
    assert not (mine / OUT_MARKER).exists()
