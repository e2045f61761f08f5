"""``deerflow agents``: what the user reads when a bootstrap creates nothing or a name is unknown
or unsafe (``main`` in this process on a scripted model)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.cli_calls import assert_refused, run_cli

pytestmark = pytest.mark.integration

CONFIG = """\
models:
  - name: chatty
    use: deerflow.models.scripted:ScriptedChatModel
    script: |
      turns: ["Hello! Tell me about the agent you want."]
"""


@pytest.fixture
def config(deerflow_home: Path, tmp_path: Path) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG)
    return str(path)


def test_a_bootstrap_that_creates_no_agent_fails_in_one_line(capsys, config):
    """The offline model (and a model that only chats) never calls ``setup_agent``: the command
    must not report success for an agent that does not exist."""
    code, out, err = run_cli(capsys, "--config", config, "agents", "new", "digest", "a daily digest")
    assert code == 1 and "run finished: success" in out  # the run itself is shown as it went
    assert err.strip() == "deerflow: the bootstrap run did not create 'digest' (the model never called setup_agent)"
    code, out, _ = run_cli(capsys, "--config", config, "agents", "list")
    assert code == 0 and out.startswith("no custom agents yet")


def test_unknown_and_unsafe_agent_names(capsys, config):
    for action in ("show", "delete"):
        assert_refused(run_cli(capsys, "--config", config, "agents", action, "nope"), "unknown agent 'nope'")
        assert_refused(run_cli(capsys, "--config", config, "agents", action, "../x"), "invalid agent name")
    assert_refused(run_cli(capsys, "--config", config, "agents", "new", "../x", "hi"), "invalid agent name")
    assert_refused(run_cli(capsys, "--config", config, "run", "hi", "--agent", "nope"), "unknown agent 'nope'")
