"""``deerflow run|reply|usage`` and the command line itself: what a user mistypes or an attacker
passes (an unsafe ``--user`` or id, a cassette that cannot be read or written, a malformed
option) is one line on stderr and a failing status, before a run starts or a file is touched."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deerflow.cli import main
from deerflow.client import DeerFlowClient
from deerflow.persistence.store import MetadataStore
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


def test_the_real_process_ends_quietly_when_its_reader_has_gone(deerflow_home, tmp_path: Path):
    """``deerflow usage | head -0`` as a process: Python's own flush at exit (after ``main``
    returned) would print "Exception ignored ... BrokenPipeError" and exit 120."""
    env = {k: v for k, v in os.environ.items() if k not in {"OPENAI_API_KEY", "DEERFLOW_CONFIG", "DEERFLOW_USER"}}
    env["DEERFLOW_HOME"] = str(deerflow_home)
    proc = subprocess.Popen([sys.executable, "-m", "deerflow.cli", "usage"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    proc.stdout.close()  # gone long before the command has imported enough to print
    _, err = proc.communicate(timeout=120)
    assert (proc.returncode, err) == (141, "")


SCRIPTED = "models:\n  - name: scripted\n    use: deerflow.models.scripted:ScriptedChatModel\n" \
           "    script: |\n      turns: [Hello there.]\n"


class _Unwritable(io.StringIO):
    """A stdout whose reader is gone (``deerflow ... | head -1``) or whose disk is full."""

    def __init__(self, error: OSError) -> None:
        super().__init__()
        self.error = error

    def write(self, text: str) -> int:
        raise self.error


def test_a_reader_that_goes_away_ends_the_command_quietly(capsys, monkeypatch, deerflow_home, tmp_path):
    """``deerflow run --json | head -1``: no "BrokenPipeError" line, no warning at exit; status 141
    (what a shell reports for SIGPIPE), and the run is not left running."""
    config = tmp_path / "config.yaml"
    config.write_text(SCRIPTED)
    with monkeypatch.context() as patched:
        patched.setattr(sys, "stdout", _Unwritable(BrokenPipeError(32, "Broken pipe")))
        for argv in (["run", "hi", "--json"], ["threads"], ["doctor"]):
            assert main(["--config", str(config), *argv]) == 141, argv
    assert capsys.readouterr().err == ""
    with DeerFlowClient(config_path=config) as client:
        (thread,) = client.threads()
        runs = MetadataStore(client.home.metadata).list_runs(thread.thread_id, client.user_id)
    assert [r.status for r in runs] in (["cancelled"], ["success"])  # ended (or done first), not left running


def test_debug_with_a_full_disk_on_stdout_raises_instead_of_hanging(deerflow_home, tmp_path):
    """``deerflow --debug run ... > /dev/full``: the write fails, ``--debug`` lets it propagate, and its
    traceback held the run's event stream open: the process never exited (a real process: the hang
    was in its shutdown)."""
    config = tmp_path / "config.yaml"
    config.write_text(SCRIPTED)
    env = {k: v for k, v in os.environ.items() if k not in {"OPENAI_API_KEY", "DEERFLOW_CONFIG", "DEERFLOW_USER"}}
    env["DEERFLOW_HOME"] = str(deerflow_home)
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "deerflow.cli", "--debug", "--config", str(config), "run", "hi",
                               "--json"], cwd=tmp_path, env=env, stdout=full, stderr=subprocess.PIPE, text=True,
                              timeout=120, check=False)  # a hang guard: well under a second of work
    assert done.returncode == 1 and "OSError: [Errno 28]" in done.stderr, done.stderr[-2000:]


def test_record_then_replay_elsewhere_and_the_run_options(capsys, deerflow_home, tmp_path):
    """``--record`` then ``--replay`` in a fresh ``--home``; ``--mode``, ``--plan`` and ``--ref`` reach the run."""
    config = tmp_path / "config.yaml"
    config.write_text(SCRIPTED)
    cassette = tmp_path / "run.jsonl"
    code, out, err = run_cli(capsys, "--config", str(config), "run", "hi", "--record", str(cassette), "--json")
    recorded = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and recorded[-1]["status"] == "success", err
    assert len(cassette.read_text().splitlines()) == 1

    fresh = tmp_path / "elsewhere"
    code, out, err = run_cli(capsys, "--home", str(fresh), "--config", str(config), "run", "hi", "--replay",
                             str(cassette), "--json")
    replayed = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and replayed[0]["model"] == "replay:run.jsonl", err
    assert [e["text"] for e in replayed if e["type"] == "message"] == ["Hello there."]
    assert (fresh / "deerflow.db").is_file()  # the replay's home, not the recording's

    code, out, err = run_cli(capsys, "--config", str(config), "run", "and now", "--ref", recorded[0]["thread_id"],
                             "--mode", "autonomous", "--plan", "--json")
    started = json.loads(out.splitlines()[0])
    assert code == 0 and started["interaction_mode"] == "autonomous", err
    assert_refused(run_cli(capsys, "--config", str(config), "run", "x", "--mode", "sometimes"),
                   "unknown interaction mode 'sometimes'", code=2)
