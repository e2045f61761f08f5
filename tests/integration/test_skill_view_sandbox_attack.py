"""The agent's own code plants links where the next run rebuilds the thread's skills view.

Under the ``local`` provider the agent's ``python`` runs on the host with the thread's
workspace as its working directory, so it can reach the thread's ``skills`` folder (two
levels up) and its private ``sandbox-state``.  A scripted model plays a prompt-injected one:
its cell replaces the view with a symbolic link to a host canary directory and the view's
signature file with a link to the canary's secret file.  The user then disables a skill and
runs again on the thread, which rebuilds the view: the host must neither delete nor write
anything in the canary, and the run must see a correct view.
(The unit attacks, tests/unit/test_skill_view_attacks.py, plant the same links from outside a
run and race the build itself.)
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from deerflow import DeerFlowClient
from deerflow.config.paths import HomePaths
from deerflow.runtime import events as ev
from fixtures.mcp_servers import call, scripted_config

pytestmark = pytest.mark.integration

SECRET = "host-canary-skills-view-local"

PLANT = """
import os, shutil
view = os.path.join('..', '..', 'skills')
shutil.rmtree(view)
os.symlink({canary!r}, view)
marker = os.path.join('..', '..', 'sandbox-state', 'skills-view.json')
if os.path.lexists(marker):
    os.remove(marker)
os.symlink({secret!r}, marker)
print('planted', os.path.islink(view), os.path.islink(marker))
"""
LIST = "import os\nprint(sorted(os.listdir('/mnt/skills')))"


def snapshot(directory: Path) -> dict[str, tuple[str, int]]:
    found = {}
    for root, dirs, files in os.walk(directory):
        for name in dirs + files:
            path = Path(root, name)
            digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
            found[str(path.relative_to(directory))] = (digest, path.lstat().st_mtime_ns)
    return found


def python_results(result: Any) -> list[str]:
    return [e.text for e in result.events if isinstance(e, ev.ToolResult) and e.name == "python"]


def test_a_view_swapped_for_a_host_link_by_the_agents_code_is_rebuilt_never_followed(
        tmp_path: Path, deerflow_home: Path) -> None:
    canary = tmp_path / "host-canary"
    canary.mkdir()
    (canary / "canary.txt").write_text(SECRET)
    plant = PLANT.format(canary=str(canary), secret=str(canary / "canary.txt"))
    turns = [{"tool_calls": [call("python", code=plant)]}, "Planted.",
             {"tool_calls": [call("python", code=LIST)]}, "Done."]
    config, _log = scripted_config(tmp_path, turns, extra={"sandbox": {"use": "local"}})
    before = snapshot(canary)
    with DeerFlowClient(config_path=config, home=deerflow_home) as client:
        first = client.chat("plant")
        assert first.status == "success", first.error
        assert "planted True True" in python_results(first)[0]
        client.disable_skill("deep-research")  # the next run's view differs: it is rebuilt
        second = client.chat("list the skills", first.thread_id)
        view = HomePaths(deerflow_home).thread("local", first.thread_id).skills_view
    assert second.status == "success", second.error
    assert snapshot(canary) == before and (canary / "canary.txt").read_text() == SECRET
    assert view.is_dir() and not view.is_symlink()
    assert sorted(p.name for p in view.iterdir()) == ["data-analysis", "notebook-report", "skill-creator"]
    assert "['data-analysis', 'notebook-report', 'skill-creator']" in python_results(second)[0]
    assert SECRET not in "\n".join(repr(e) for e in first.events + second.events)
