"""End-to-end runs through the embedded client and the CLI on the offline model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deerflow import DeerFlowClient
from deerflow.errors import ConfigError, NotFoundError, UserError
from deerflow.runtime import events as ev

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str, home: Path, cwd: Path, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in {"OPENAI_API_KEY", "DEERFLOW_CONFIG"}}
    env.update({"DEERFLOW_HOME": str(home), **(extra_env or {})})
    return subprocess.run([sys.executable, "-m", "deerflow.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_cli_streams_an_offline_run_that_writes_and_presents_a_file(deerflow_home, tmp_path):
    proc = cli("run", "Write me a report", home=deerflow_home, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "embedded offline model" in out  # the run says it is offline
    assert "→ write_file" in out and "→ present_files" in out
    assert "artifact: /mnt/user-data/outputs/report.md" in out
    assert "run finished: success" in out
    reports = list(deerflow_home.glob("users/local/threads/*/user-data/outputs/report.md"))
    assert len(reports) == 1
    assert reports[0].read_text().startswith("# Report")


def test_cli_json_prints_one_parseable_event_per_line(deerflow_home, tmp_path):
    proc = cli("run", "go", "--json", home=deerflow_home, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    events = [ev.parse_event(line) for line in proc.stdout.splitlines()]
    types = [e.type for e in events]
    assert types[0] == "run_started" and types[-1] == "run_finished"
    assert "message_delta" in types and "tool_result" in types and "artifact" in types
    assert [e.seq for e in events] == sorted(e.seq for e in events)
    assert events[-1].artifacts == ["/mnt/user-data/outputs/report.md"]


def test_threads_and_artifacts_commands(deerflow_home, tmp_path):
    proc = cli("run", "Write me a report", "--json", home=deerflow_home, cwd=tmp_path)
    thread_id = json.loads(proc.stdout.splitlines()[-1])["thread_id"]
    listed = cli("threads", home=deerflow_home, cwd=tmp_path)
    assert thread_id in listed.stdout and "Write me a report" in listed.stdout
    arts = cli("artifacts", thread_id, home=deerflow_home, cwd=tmp_path)
    assert arts.stdout.strip() == "/mnt/user-data/outputs/report.md"


@pytest.mark.parametrize(
    ("config", "env", "needle"),
    [
        ("models: [unclosed\n", {}, "malformed YAML"),
        ("sandbox:\n  use: local\n  bogus: 1\n", {}, "'sandbox.bogus'"),
        ("models:\n  - name: m\n    use: nowhere_pkg.mod:Model\n", {}, "not installed"),
        ("models:\n  - name: m\n    use: langchain_openai:ChatOpenAI\n    api_key: $DF_TEST_MISSING\n", {}, "$DF_TEST_MISSING"),
    ],
)
def test_bad_config_is_one_clear_line_and_exit_2(deerflow_home, tmp_path, config, env, needle):
    cfg = tmp_path / "config.yaml"
    cfg.write_text(config)
    proc = cli("run", "hello", home=deerflow_home, cwd=tmp_path, extra_env=env)
    assert proc.returncode == 2
    assert needle in proc.stderr
    assert str(cfg) in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (deerflow_home / "users").exists()


def test_user_errors_exit_1_without_traceback(deerflow_home, tmp_path):
    empty = cli("run", "   ", home=deerflow_home, cwd=tmp_path)
    assert empty.returncode == 1 and "prompt is empty" in empty.stderr and "Traceback" not in empty.stderr
    unknown = cli("run", "hi", "--thread", "nope", home=deerflow_home, cwd=tmp_path)
    assert unknown.returncode == 1 and "unknown thread 'nope'" in unknown.stderr
    bad_model = cli("run", "hi", "--model", "gpt-x", home=deerflow_home, cwd=tmp_path)
    assert bad_model.returncode == 2 and "unknown model 'gpt-x'" in bad_model.stderr


def test_restart_keeps_messages_and_artifacts(deerflow_home):
    with DeerFlowClient() as client:
        first = client.chat("Write me a report")
    assert first.status == "success"
    with DeerFlowClient() as again:
        view = again.thread(first.thread_id)
        kinds = [m.type for m in view.messages]
        assert kinds[0] == "human" and kinds.count("ai") == 5 and kinds.count("tool") == 4
        assert view.artifacts == ["/mnt/user-data/outputs/report.md"]
        assert again.read_artifact(first.thread_id, "report.md").startswith(b"# Report")
        assert view.record.title == "Write me a report"
        assert [t.thread_id for t in again.threads()] == [first.thread_id]


def test_the_client_exports_a_thread_to_a_zip_file(deerflow_home, tmp_path):
    import zipfile

    with DeerFlowClient() as client:
        run = client.chat("Write me a report")
        (tmp_path / "secret.txt").write_text("host-only")
        outputs = client.home.thread(client.user_id, run.thread_id).outputs
        (outputs / "planted").symlink_to(tmp_path / "secret.txt")
        done = client.export(run.thread_id, tmp_path / "out.zip")
        with zipfile.ZipFile(tmp_path / "out.zip") as archive:
            assert archive.namelist() == done.files == ["outputs/report.md"]
            assert archive.read("outputs/report.md").startswith(b"# Report")
        assert [s.split(":")[0] for s in done.skipped] == ["outputs/planted"]
        with pytest.raises(NotFoundError):
            client.export("no-such-thread", tmp_path / "other.zip")
        assert not (tmp_path / "other.zip").exists()


def test_the_cli_exports_a_thread_and_names_what_it_left_out(deerflow_home, tmp_path):
    import zipfile

    proc = cli("run", "Write me a report", "--json", home=deerflow_home, cwd=tmp_path)
    thread_id = json.loads(proc.stdout.splitlines()[-1])["thread_id"]
    outputs = next(deerflow_home.glob(f"users/*/threads/{thread_id}/user-data/outputs"))
    os.mkfifo(outputs / "pipe")  # planted: an export that opened it would hang
    done = cli("export", thread_id, "--folders", "outputs,workspace", home=deerflow_home, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"wrote {thread_id}.zip: " in done.stdout and "left out outputs/pipe" in done.stdout
    with zipfile.ZipFile(tmp_path / f"{thread_id}.zip") as archive:
        names = archive.namelist()
    assert "outputs/report.md" in names and "outputs/pipe" not in names
    assert all(n.startswith(("outputs/", "workspace/")) for n in names), names
    bad = cli("export", thread_id, "--folders", "secrets", home=deerflow_home, cwd=tmp_path)
    assert bad.returncode == 1 and bad.stderr.strip().count("\n") == 0 and "cannot export 'secrets'" in bad.stderr
    assert zipfile.is_zipfile(tmp_path / f"{thread_id}.zip")  # refused before the file was touched


def test_bad_input_leaves_existing_threads_untouched(deerflow_home):
    with DeerFlowClient() as client:
        done = client.chat("Write me a report")
        before = client.thread(done.thread_id).messages
        with pytest.raises(UserError, match="prompt is empty"):
            client.chat("  ", done.thread_id)
        with pytest.raises(NotFoundError):
            client.chat("hi", "no-such-thread")
        with pytest.raises(ConfigError, match="unknown model"):
            client.chat("hi", done.thread_id, model_name="missing")
        after = client.thread(done.thread_id).messages
    assert [m.id for m in after] == [m.id for m in before]


def test_script_exhaustion_is_a_clear_run_error(deerflow_home, monkeypatch):
    script = deerflow_home / "one-turn.yaml"  # no `when_exhausted`: past the end is an error
    script.write_text("turns:\n  - text: Hello.\n")
    monkeypatch.setenv("DEERFLOW_SCRIPT", str(script))
    with DeerFlowClient() as client:
        first = client.chat("Say hello")
        second = client.chat("and again", first.thread_id)
    assert second.status == "error"
    assert "script" in (second.error or "").lower()
    errors = [e for e in second.events if isinstance(e, ev.Error)]
    assert errors and "Traceback" not in errors[0].message


def test_the_default_offline_model_continues_a_finished_thread_in_words(deerflow_home):
    with DeerFlowClient() as client:
        first = client.chat("Write me a report")
        second = client.chat("Now add a chart", first.thread_id)
        third = client.chat("And a table", first.thread_id)
    assert (second.status, third.status) == ("success", "success")
    assert "offline" in second.text and "“Now add a chart”" in second.text
    assert "“And a table”" in third.text
    assert second.artifacts == []  # said, not done: nothing presented by this run


async def test_a_service_that_fails_to_open_closes_the_ones_opened_before_it(deerflow_home, tmp_path, monkeypatch):
    from deerflow.config.loader import load_config
    from deerflow.config.paths import HomePaths
    from deerflow.runs import manager as manager_module

    closed: list[str] = []
    real_open = manager_module.open_checkpointer

    async def tracked_checkpointer(storage, *, default_path, stack):
        saver = await real_open(storage, default_path=default_path, stack=stack)
        stack.callback(closed.append, "checkpointer")
        return saver

    async def broken_subagents(*args, **kwargs):
        raise RuntimeError("subagent runtime cannot start")

    monkeypatch.setattr(manager_module, "open_checkpointer", tracked_checkpointer)
    monkeypatch.setattr(manager_module, "open_subagent_runtime", broken_subagents)
    config = tmp_path / "config.yaml"
    config.write_text("{}\n")
    with pytest.raises(RuntimeError, match="subagent runtime cannot start"):
        await manager_module.RunManager.open(loaded=load_config(config), home=HomePaths(deerflow_home))
    assert closed == ["checkpointer"]  # the stack was closed, not left to the garbage collector


def test_an_edited_config_applies_from_the_next_run_and_a_broken_edit_refuses_runs(deerflow_home, tmp_path):
    from deerflow.errors import ConfigError

    def model(name: str) -> str:
        return (f"  - name: {name}\n    use: deerflow.models.scripted:ScriptedChatModel\n"
                f"    script: |\n      turns: [\"from the {name} model\"]\n")

    config = tmp_path / "config.yaml"
    config.write_text("models:\n" + model("first"))
    with DeerFlowClient(config_path=config) as client:
        before = client.chat("hello")
        assert before.text == "from the first model" and not before.notices
        # a model added and a sandbox setting changed while the host runs
        config.write_text("models:\n" + model("first") + model("second") + "sandbox:\n  command_timeout: 42\n")
        edited = client.chat("again", model_name="second")
        assert edited.text == "from the second model"
        notes = [n.text for n in edited.notices if n.kind == "config_reloaded"]
        assert len(notes) == 1 and "except sandbox, which take effect when the server" in notes[0]
        assert [m.name for m in client.config.models] == ["first", "second"]
        config.write_text("models: [\n" + model("first"))  # a typo
        with pytest.raises(ConfigError, match=r"config\.yaml"):
            client.chat("refused", before.thread_id)
        assert len(client.thread(before.thread_id).messages) == 2  # nothing ran, nothing written
        config.write_text("models:\n" + model("first"))
        fixed = client.chat("fixed")  # a new thread: the script plays one turn per thread
        assert fixed.status == "success" and [n.kind for n in fixed.notices].count("config_reloaded") == 1
        unchanged = client.chat("no edit")
        assert unchanged.status == "success" and "config_reloaded" not in [n.kind for n in unchanged.notices]


def test_lab_passes_its_options_to_jupyter_lab_and_unknown_options_elsewhere_are_errors(deerflow_home, tmp_path):
    import jupyterlab

    lab = cli("lab", "--version", home=deerflow_home, cwd=tmp_path)
    assert lab.returncode == 0 and lab.stdout.strip() == jupyterlab.__version__
    wrong = cli("threads", "--bogus", home=deerflow_home, cwd=tmp_path)
    assert wrong.returncode == 2 and "unrecognized arguments: --bogus" in wrong.stderr


async def test_concurrent_first_calls_open_one_manager(deerflow_home) -> None:
    """Two runs gathered before any manager exists share one (a second would never be closed)."""
    import asyncio as _asyncio

    from deerflow.client import AsyncDeerFlowClient

    client = AsyncDeerFlowClient()
    try:
        first, second = await _asyncio.gather(client.manager(), client.manager())
        assert first is second
    finally:
        await client.aclose()
