"""``deerflow batches ...`` through the CLI's ``main``: a worker run to idle, then list, status,
export and cancel of the user's own batch; an unknown batch is one line and a failing exit.

In-process, as ``test_skill_cli``: the CLI is a host of the client like any other, so it gets the
config and paths from the client's public ``loaded`` and ``home``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deerflow.cli import main
from deerflow.config.loader import load_config
from deerflow.config.paths import HomePaths, default_user
from deerflow.runtime.context import RunContext
from deerflow.subagents.batches.sql import open_backend
from deerflow.subagents.batches.store import BatchStore
from deerflow.subagents.batches.submitter import BatchSubmitter
from fixtures.cli_calls import assert_refused, leftovers, run_cli

pytestmark = pytest.mark.integration

CONFIG = """\
models:
  - name: scripted
    use: deerflow.models.scripted:ScriptedChatModel
    script: |
      turns: ["Done [r1]."]
subagents:
  enabled: true
  poll_interval: 0.1
  batches:
    enabled: true
"""


def submit(home: Path, config: Path, count: int) -> str:
    loaded = load_config(config)
    paths = HomePaths(home)
    submitter = BatchSubmitter(BatchStore(open_backend(loaded.config.subagents.batches, paths)), max_items=100)
    context = RunContext(user_id=default_user(), thread_id="t1", run_id="run-1",
                         paths=paths.thread(default_user(), "t1"), config=loaded.config, model_name="scripted")
    items = [{"prompt": f"ITEM {i}", "subagent_type": "general-purpose"} for i in range(count)]
    return submitter.submit(context, items, label="cli batch", known_types=["general-purpose"]).record.batch_id


def run(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_worker_list_status_export_cancel(capsys, deerflow_home, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    batch_id = submit(deerflow_home, config, 2)

    code, out, err = run(capsys, "--config", str(config), "batches", "worker", "--until-idle")
    assert code == 0, err
    assert "worker done: 2 items finished" in out

    code, out, err = run(capsys, "--config", str(config), "batches", "list")
    assert code == 0, err
    assert batch_id in out and "done  2/2" in out and "cli batch" in out

    target = tmp_path / "items.jsonl"
    code, out, err = run(capsys, "--config", str(config), "batches", "export", batch_id, "--out", str(target))
    assert code == 0, err
    rows = [json.loads(line) for line in target.read_text().splitlines()]
    assert len(rows) == 2 and "wrote 2 items" in err

    second = submit(deerflow_home, config, 1)
    code, out, err = run(capsys, "--config", str(config), "batches", "cancel", second)
    assert code == 0, err
    assert out.startswith(second) and "cancelled" in out


def test_an_unknown_batch_is_one_line_and_a_failing_exit(capsys, deerflow_home, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    code, out, err = run(capsys, "--config", str(config), "batches", "status", "no-such-batch")
    assert code != 0 and out == ""
    assert len(err.strip().splitlines()) == 1 and "no-such-batch" in err


def test_an_export_that_fails_leaves_the_file_there_as_it_was(capsys, deerflow_home, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    target = tmp_path / "results.jsonl"
    target.write_text("last week's results\n")
    assert_refused(run_cli(capsys, "--config", str(config), "batches", "export", "no-such-batch", "--out",
                           str(target)), "unknown batch 'no-such-batch'")
    batch_id = submit(deerflow_home, config, 1)
    assert_refused(run_cli(capsys, "--config", str(config), "batches", "export", batch_id, "--out", str(tmp_path)),
                   f"cannot write {tmp_path}: it is a directory")
    assert target.read_text() == "last week's results\n" and leftovers(tmp_path) == []


def test_a_worker_refuses_a_lease_or_concurrency_that_is_not_positive(capsys, deerflow_home, tmp_path):
    for option, value in (("--lease", "0"), ("--lease", "-5"), ("--concurrency", "0"), ("--concurrency", "two")):
        assert_refused(run_cli(capsys, "batches", "worker", option, value, "--until-idle"), f"argument {option}",
                       code=2)


@pytest.mark.parametrize("argv", [["--bogus"], ["--lease", "0"], ["--concurrency", "two"], ["extra"]])
def test_the_worker_process_refuses_a_bad_command_line_in_one_line(capsys, argv):
    """``python -m deerflow.subagents.batches.worker_main`` as the CLI does: one line, status 2, no usage."""
    from deerflow.subagents.batches import worker_main

    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        worker_main.main(argv)
    out, err = capsys.readouterr()
    assert_refused((exited.value.code, out, err), "deerflow batches worker: error:", code=2)
    assert "usage:" not in err


def test_the_worker_process_reports_a_sandbox_it_cannot_reach_in_one_line(capsys, tmp_path, deerflow_home,
                                                                           monkeypatch):
    """A config error found once the worker opens its services (no Docker engine at DOCKER_HOST) is one
    line and the configuration status, as in the CLI, not a traceback."""
    from deerflow.subagents.batches import worker_main

    config = tmp_path / "config.yaml"
    config.write_text(CONFIG + "sandbox:\n  use: docker\n")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'no-docker.sock'}")
    capsys.readouterr()
    code = worker_main.main(["--config", str(config), "--home", str(deerflow_home), "--until-idle"])
    out, err = capsys.readouterr()
    assert_refused((code, out, err), "no Docker engine reachable", code=2)


def test_the_worker_process_reports_a_failure_with_no_user_error_in_one_line(capsys, tmp_path):
    """``--home`` naming a file: the worker cannot make its folders; one line and status 1, no traceback."""
    from deerflow.subagents.batches import worker_main

    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    home = tmp_path / "home-is-a-file"
    home.write_text("not a folder")
    capsys.readouterr()
    code = worker_main.main(["--config", str(config), "--home", str(home), "--until-idle"])
    out, err = capsys.readouterr()
    assert_refused((code, out, err), "deerflow: the batch worker stopped: ", code=1)
    assert home.read_text() == "not a folder"
