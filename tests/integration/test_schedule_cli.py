"""``deerflow schedule``: ``runs`` and the ``--json`` listings, and what is refused (an unknown
schedule, agent or thread, a bad time zone, an empty prompt) in one line that adds nothing
(``main`` in this process; ``add``, ``list``, ``run-due`` and ``remove`` are in test_schedule_runs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fixtures.cli_calls import assert_refused, run_cli

pytestmark = pytest.mark.integration


@pytest.fixture
def config(deerflow_home: Path, tmp_path: Path) -> str:
    path = tmp_path / "config.yaml"
    path.write_text("models:\n  - name: scripted\n    use: deerflow.models.scripted:ScriptedChatModel\n"
                    "    script: |\n      turns: [Hello.]\n")
    return str(path)


def test_schedule_runs_list_json_and_bad_input(capsys, config):
    base = ["--config", config, "schedule"]
    code, out, err = run_cli(capsys, *base, "add", "Say hello", "--cron", "@daily")
    assert code == 0, err
    schedule_id = out.split()[1]
    code, out, _ = run_cli(capsys, *base, "list", "--json")
    (listed,) = [json.loads(line) for line in out.splitlines()]
    assert listed["schedule_id"] == schedule_id and listed["cron"] == "@daily"
    code, out, _ = run_cli(capsys, *base, "runs", schedule_id)
    assert (code, out) == (0, "")  # never run yet
    assert run_cli(capsys, *base, "runs", schedule_id, "--json")[:2] == (0, "")

    assert_refused(run_cli(capsys, *base, "runs", "nope"), "unknown schedule 'nope'")
    assert_refused(run_cli(capsys, *base, "remove", "../x"), "unknown schedule")
    assert_refused(run_cli(capsys, *base, "add", "x", "--cron", "@daily", "--tz", "Mars/Phobos"), "unknown time zone")
    assert_refused(run_cli(capsys, *base, "add", "x", "--cron", "@daily", "--agent", "nope"), "unknown agent 'nope'")
    assert_refused(run_cli(capsys, *base, "add", "x", "--cron", "@daily", "--thread", "nope"), "unknown thread 'nope'")
    assert_refused(run_cli(capsys, *base, "add", " ", "--cron", "@daily"), "prompt is empty")
    assert_refused(run_cli(capsys, *base, "add", "x"), "--cron", code=2)
    code, out, _ = run_cli(capsys, *base, "list", "--json")
    assert [json.loads(line)["schedule_id"] for line in out.splitlines()] == [schedule_id]  # nothing added
