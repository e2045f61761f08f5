"""A 1500-deep ``mkdir -p a/a/a/...`` made by the agent's own code must not break the host's walks.

The agent's python cell (``local`` sandbox, and ``bwrap`` where it is installed) makes the chain in
its workspace and outputs.  Every host-side walk of those folders used to recurse once per level
and raise ``RecursionError`` past ~1000, which none of its callers catch: the change summary at the
end of the run, the export (client and ``deerflow export``), and the ``glob``/``grep`` tools.  Now
the walk stops at :data:`deerflow.threadfs.MAX_WALK_DEPTH` levels and says so.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import deerflow
from deerflow import DeerFlowClient
from deerflow.client import RunResult
from deerflow.runtime import events as ev
from deerflow.sandbox.execution.bwrap import find_bwrap
from deerflow.threadfs import MAX_WALK_DEPTH
from fixtures.mcp_servers import call, scripted_config

pytestmark = [pytest.mark.integration]

WS = "/mnt/user-data/workspace"
DEPTH = 1500
# Relative to the cell's working directory (the workspace, in every sandbox); ``mkdir -p`` of a
# ~3000-character path, then a file at the bottom and one beside the chain.
PLANT = f"""
import os, subprocess
for top in ('.', '../outputs'):
    deep = top + '/' + '/'.join(['a'] * {DEPTH})
    subprocess.run(['mkdir', '-p', deep], check=True)
    with open(deep + '/bottom.txt', 'w') as f:
        f.write('deep needle')
    with open(top + '/z.txt', 'w') as f:
        f.write('shallow needle')
print('planted', os.path.isfile(deep + '/bottom.txt'))
"""


@pytest.fixture(params=["local", "bwrap"])
def sandbox(request: pytest.FixtureRequest, deerflow_home: Path) -> Iterator[dict[str, Any]]:
    """The sandbox the chain is made from; afterwards the chain is removed with ``rm -rf`` (pytest's
    own clean-up, ``shutil.rmtree``, recurses too and would fail on it)."""
    if request.param == "bwrap" and find_bwrap() is None:
        pytest.skip("bubblewrap (bwrap) is not installed")
    yield {"use": request.param}
    subprocess.run(["rm", "-rf", str(deerflow_home / "users")], check=False)


def _text(result: RunResult) -> str:
    return "\n".join(repr(e) for e in result.events)


def _answers(result: RunResult) -> dict[str, ev.ToolResult]:
    return {e.name: e for e in result.events if isinstance(e, ev.ToolResult)}


def test_a_1500_deep_chain_leaves_the_summary_the_tools_and_the_export_working(
        tmp_path: Path, deerflow_home: Path, sandbox: dict[str, Any]) -> None:
    turns = [{"tool_calls": [call("python", code=PLANT)]},
             {"tool_calls": [call("ls", path=WS), call("glob", pattern="**/*.txt"),
                             call("grep", pattern="needle")]},
             "Done."]
    config, _log = scripted_config(tmp_path, turns, extra={"sandbox": sandbox})
    with DeerFlowClient(config_path=config, home=deerflow_home) as client:
        result = client.chat("make a deep tree")
        assert result.status == "success", result.error
        done = client.export(result.thread_id, tmp_path / "out.zip", folders=("outputs", "workspace"))
    text = _answers(result)
    assert "planted True" in text["python"].text, text["python"].text
    assert "RecursionError" not in _text(result) and "Traceback" not in _text(result)
    for name in ("ls", "glob", "grep"):
        assert text[name].status == "success", text[name].text
    assert f"{WS}/z.txt" in text["glob"].text and f"{WS}/z.txt" in text["grep"].text
    (summary,) = [e.changes for e in result.events if isinstance(e, ev.WorkspaceChanges)]
    created = {c["path"] for c in summary["created"]}
    assert {f"{WS}/z.txt", "/mnt/user-data/outputs/z.txt"} <= created
    assert summary["truncated"] is True  # the chain's bottom was not reached, and the summary says so

    with zipfile.ZipFile(tmp_path / "out.zip") as archive:
        assert {"outputs/z.txt", "workspace/z.txt"} <= set(archive.namelist())
    deep = "/".join(["a"] * MAX_WALK_DEPTH)
    assert f"outputs/{deep}/: more than {MAX_WALK_DEPTH} folders deep; not exported" in done.skipped

    env = {k: v for k, v in os.environ.items() if k not in {"OPENAI_API_KEY", "DEERFLOW_CONFIG"}}
    harness = str(Path(deerflow.__file__).parents[1])  # the CLI runs the code under test, whatever the cwd
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [harness, env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-m", "deerflow.cli", "export", result.thread_id, "--folders",
                           "outputs,workspace"],
                          cwd=tmp_path, env={**env, "DEERFLOW_HOME": str(deerflow_home)},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "RecursionError" not in proc.stdout + proc.stderr
    assert zipfile.is_zipfile(tmp_path / f"{result.thread_id}.zip")
