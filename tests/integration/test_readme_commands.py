"""The README's "Using it" block, run as written, in order, on the offline model.

Each command runs in bash with the venv's ``bin`` on PATH (what the README tells the reader to
do), in an empty directory; ``THREAD`` is the thread the latest run printed.  Every command must
exit 0 with no traceback, the ``--thread`` continuation included.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
COMMAND_TIMEOUT = 600  # a hang guard: the demo executes a notebook in a fresh kernel


def using_it_commands(readme: str) -> list[str]:
    """The commands of the first bash block under "## Using it", comments removed."""
    section = readme.split("\n## Using it", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "no bash block in the README's 'Using it' section"
    commands = [re.sub(r"\s+#.*$", "", line).strip() for line in block.group(1).splitlines()]
    return [c for c in commands if c and not c.startswith("#")]


def test_the_using_it_block_runs_as_written(tmp_path: Path):
    commands = using_it_commands((ROOT / "README.md").read_text(encoding="utf-8"))
    assert any("--thread THREAD" in c for c in commands), commands
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("DEERFLOW_CONFIG", "OPENAI_API_KEY", "DEERFLOW_SERVER_URL", "DEERFLOW_SERVER_TOKEN",
                        "DEERFLOW_SCRIPT", "DEERFLOW_USER")}
    env |= {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
            "DEERFLOW_HOME": str(tmp_path / "home")}
    thread = None
    for command in commands:
        if "THREAD" in command:
            assert thread, f"{command!r} needs a thread, and no command before it printed one"
            command = command.replace("THREAD", thread)
        done = subprocess.run(["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True,
                              timeout=COMMAND_TIMEOUT, check=False)
        output = done.stdout + done.stderr
        assert "Traceback" not in output, f"{command!r} printed a traceback:\n{output[-3000:]}"
        if command.endswith("--continue"):  # documented: only a run a stop or a cancel ended resumes;
            # after the block's finished runs it is the one-line user error, never a traceback
            assert done.returncode in (0, 1), output
            assert done.returncode == 0 or (output.count("\n") == 1 and "nothing to continue" in output), output
            continue
        assert done.returncode == 0, f"{command!r} exited {done.returncode}:\n{output[-3000:]}"
        assert "without encryption" not in output, f"{command!r}: the kernel's transport warning"
        printed = re.findall(r"^thread: (\S+)", done.stdout, re.M)
        thread = printed[-1] if printed else thread
        if "--thread" in command:
            assert "offline" in done.stdout and "run finished: success" in done.stdout, done.stdout
        if command.startswith("deerflow demo"):
            artifacts = {p.name for p in (work / "demo-output" / "artifacts").iterdir()}
            assert {"report.md", "evidence.csv", "winter_severity.png"} <= artifacts, artifacts
