"""``deerflow run|reply|usage`` and the command line itself: what a user mistypes or an attacker
passes (an unsafe ``--user`` or id, a cassette that cannot be read or written, a malformed
option) is one line on stderr and a failing status, before a run starts or a file is touched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.cli_calls import assert_refused, run_cli

pytestmark = pytest.mark.integration


def test_an_unsafe_user_is_refused_before_anything_is_opened(capsys, deerflow_home):
    for user in ("../x", "", "a/b"):
        assert_refused(run_cli(capsys, "--user", user, "threads"), "invalid user id", code=2)
    assert list(deerflow_home.iterdir()) == []  # no store was created for it


def test_unsafe_ids_in_commands_are_one_line(capsys, deerflow_home):
    assert_refused(run_cli(capsys, "schedule", "add", "x", "--cron", "@daily", "--thread", "../x"),
                   "invalid thread id '../x'", code=1)
    assert_refused(run_cli(capsys, "memory", "list", "--agent", "../x"), "invalid agent id '../x'", code=1)
    assert_refused(run_cli(capsys, "run", "hi", "--thread", "../x"), "unknown thread '../x'", code=1)


def test_malformed_options_are_one_line_with_status_2(capsys, deerflow_home):
    assert_refused(run_cli(capsys, "threads", "--bogus"), "unrecognized arguments: --bogus", code=2)
    assert_refused(run_cli(capsys, "usage", "--by", "weekday"), "invalid choice: 'weekday'", code=2)
    assert_refused(run_cli(capsys, "memory"), "deerflow memory: error", code=2)
    assert_refused(run_cli(capsys), "required: command", code=2)


def test_a_cassette_that_cannot_be_read_or_written_stops_before_the_run(capsys, deerflow_home, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("mine")
    assert_refused(run_cli(capsys, "run", "hi", "--replay", str(tmp_path / "none.jsonl")),
                   "none.jsonl does not exist")
    corrupt = tmp_path / "corrupt.jsonl"
    corrupt.write_text("{not json\n")
    assert_refused(run_cli(capsys, "run", "hi", "--replay", str(corrupt)), "line 1: invalid JSON")
    assert_refused(run_cli(capsys, "run", "hi", "--record", str(blocker / "c.jsonl")), "is not a directory")
    assert_refused(run_cli(capsys, "run", "hi", "--record", str(tmp_path)), "it is a directory")
    assert blocker.read_text() == "mine" and corrupt.read_text() == "{not json\n"
    code, out, _ = run_cli(capsys, "threads")
    assert code == 0 and out == ""  # no run started a thread


def test_reply_and_run_without_what_they_need(capsys, deerflow_home):
    assert_refused(run_cli(capsys, "run"), "give a prompt")
    assert_refused(run_cli(capsys, "run", "--continue"), "--continue needs --thread")
    assert_refused(run_cli(capsys, "reply", "nope", "yes"), "unknown thread 'nope'")
    assert_refused(run_cli(capsys, "reply", "nope"), "give an answer text")
    assert_refused(run_cli(capsys, "reply", "nope", "yes", "--field", "a=b"), "not both")
    assert_refused(run_cli(capsys, "reply", "nope", "--field", "novalue"), "--field expects NAME=VALUE")


def test_usage_with_no_runs(capsys, deerflow_home):
    assert run_cli(capsys, "usage")[:2] == (0, "no usage recorded\n")
    code, out, _ = run_cli(capsys, "usage", "--by", "model", "--since", "2026-01-01", "--all-users", "--json")
    assert code == 0 and json.loads(out) == []
    assert_refused(run_cli(capsys, "usage", "--since", "2026-13-01"), "--since expects a date")


def test_the_entry_point_exits_with_the_status_it_prints(deerflow_home, tmp_path: Path):
    """The real process: an unsafe ``--user`` is one line and status 2, with no store created."""
    env = {k: v for k, v in os.environ.items() if k not in {"OPENAI_API_KEY", "DEERFLOW_CONFIG", "DEERFLOW_USER"}}
    env["DEERFLOW_HOME"] = str(deerflow_home)
    done = subprocess.run([sys.executable, "-m", "deerflow.cli", "--user", "../x", "threads"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr.startswith("deerflow: invalid user id '../x'") and done.stderr.count("\n") == 1
    assert list(deerflow_home.iterdir()) == []
