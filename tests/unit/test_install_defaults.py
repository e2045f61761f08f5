"""What a fresh install does by default: the user id, the offline model's continuation, the
persona default, where packaged files are found, config errors inside a model entry, CLI lines."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from traitlets.config import Config

from deerflow import cli, lab, resources
from deerflow.config.loader import validate_config
from deerflow.config.paths import FALLBACK_USER, UnsafeIdError, default_user
from deerflow.errors import ConfigError
from deerflow.models.factory import DEFAULT_SCRIPT, create_chat_model
from deerflow.models.scripted import (
    OFFLINE_CONTINUATION,
    TURN_STAMP,
    ScriptedChatModel,
    ScriptError,
)
from deerflow.skills.catalog import default_public_root
from deerflow_jupyter.app import PERSONA_ID, set_default_persona

ROOT = Path(__file__).resolve().parents[2]


# --- one identity -------------------------------------------------------------------------------

def test_default_user_is_deerflow_user_then_the_os_user(monkeypatch):
    assert default_user({"DEERFLOW_USER": "alice"}) == "alice"
    monkeypatch.setattr("getpass.getuser", lambda: "bob")
    assert default_user({}) == "bob"
    assert default_user({"DEERFLOW_USER": ""}) == "bob"


def test_an_os_user_that_is_no_safe_id_is_local(monkeypatch):
    monkeypatch.setattr("getpass.getuser", lambda: "../etc")
    assert default_user({}) == FALLBACK_USER

    def no_name() -> str:
        raise KeyError("uid 1234 has no name")

    monkeypatch.setattr("getpass.getuser", no_name)
    assert default_user({}) == FALLBACK_USER


def test_an_unsafe_deerflow_user_is_refused():
    with pytest.raises(UnsafeIdError, match="invalid user id"):
        default_user({"DEERFLOW_USER": "../other"})


def test_the_cli_and_the_client_default_to_the_same_user(monkeypatch, tmp_path):
    from deerflow.client import DeerFlowClient

    monkeypatch.setenv("DEERFLOW_USER", "carol")
    monkeypatch.setenv("DEERFLOW_HOME", str(tmp_path))
    monkeypatch.delenv("DEERFLOW_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    assert cli.build_parser().parse_args(["threads"]).user is None  # resolved by default_user()
    with DeerFlowClient() as client:
        assert client.user_id == "carol"


def test_an_unsafe_deerflow_user_is_one_line_in_the_cli(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("DEERFLOW_USER", "../x")
    monkeypatch.setenv("DEERFLOW_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["threads"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("deerflow: invalid user id") and err.count("\n") == 1


# --- the offline model never dead-ends ----------------------------------------------------------

def test_the_packaged_quickstart_explains_instead_of_failing_past_its_end():
    model = ScriptedChatModel.from_file(DEFAULT_SCRIPT)
    last = len(model.turns) - 1
    history = [HumanMessage("Write a report"),
               AIMessage("Done.", response_metadata={"model_name": "scripted:quickstart", TURN_STAMP: last}),
               HumanMessage("Now add a chart")]
    answer = model.invoke(history)
    assert answer.content == OFFLINE_CONTINUATION.format(request="“Now add a chart”")
    assert not answer.tool_calls
    again = model.invoke([*history, answer, HumanMessage("x" * 500)])
    assert "“" + "x" * 120 + "…”" in again.content  # a long request is shortened


def test_a_script_without_when_exhausted_still_raises():
    from deerflow.models.scripted import ScriptExhaustedError

    model = ScriptedChatModel(script="- text: only")
    with pytest.raises(ScriptExhaustedError):
        model.invoke([HumanMessage("a"), AIMessage("only"), HumanMessage("b")])


def test_when_exhausted_takes_only_known_values():
    with pytest.raises(ScriptError, match="when_exhausted must be one of"):
        ScriptedChatModel(script={"when_exhausted": "loop", "turns": ["hi"]})


# --- config errors name the field inside the model entry ----------------------------------------

def test_a_bad_field_in_a_model_entry_is_named(tmp_path):
    config = validate_config({"models": [{"name": "gpt", "use": "langchain_openai:ChatOpenAI",
                                          "model": "gpt-4.1-mini", "api_key": "sk-secret-value",
                                          "temperature": "hot"}]})
    with pytest.raises(ConfigError) as info:
        create_chat_model(config, env={}, config_file=str(tmp_path / "config.yaml"))
    text = str(info.value)
    assert info.value.key == "models[gpt].temperature"
    assert "'models[gpt].temperature'" in text and "valid number" in text
    assert "validation error for" not in text and "sk-secret-value" not in text


# --- packaged files -----------------------------------------------------------------------------

def test_a_checkout_uses_its_own_skills_and_notebooks():
    if resources.PACKAGED.exists():
        pytest.skip("this deerflow is an installed wheel")
    assert default_public_root() == ROOT / "skills" / "public"
    assert resources.offline_config() == ROOT / "notebooks" / "offline-config.yaml"
    assert resources.lab_workspace().is_file()


def test_the_packaged_copy_wins_when_there_is_one(tmp_path, monkeypatch):
    (tmp_path / "skills" / "public").mkdir(parents=True)
    monkeypatch.setattr(resources, "PACKAGED", tmp_path)
    assert default_public_root() == tmp_path / "skills" / "public"
    assert resources.notebooks_dir() == resources.REPOSITORY / "notebooks"  # not packaged: the checkout's


def test_copy_examples_keeps_what_is_there(tmp_path):
    mine = tmp_path / resources.QUICKSTART
    mine.write_text("my edits")
    added = lab.copy_examples(tmp_path)
    assert mine.read_text() == "my edits" and mine not in added
    assert (tmp_path / "offline-config.yaml").is_file() and (tmp_path / "scripts").is_dir()
    assert lab.copy_examples(tmp_path) == []


def test_the_lab_workspace_is_added_once_and_the_users_layout_kept(tmp_path):
    from jupyterlab_server.workspaces_handler import WorkspacesManager

    assert lab.add_lab_workspace(tmp_path) == "deerflow"
    manager = WorkspacesManager(str(tmp_path))
    tabs = manager.load("deerflow")["data"]["layout-restorer:data"]["main"]["dock"]["widgets"]
    assert "notebook:01_research_quickstart.ipynb" in tabs
    mine = '{"data": {}, "metadata": {"id": "deerflow"}}'  # the user closed every tab: JupyterLab saved it
    manager.save("deerflow", mine)
    assert lab.add_lab_workspace(tmp_path) == "deerflow"
    assert manager.load("deerflow")["data"] == {}


def test_lab_takes_its_own_dir_option():
    assert lab._take_option(["--dir", "x", "--port=1"], "--dir") == ("x", ["--port=1"])
    assert lab._take_option(["--dir=y"], "--dir") == ("y", [])
    assert lab._take_option(["--port=1"], "--dir") == (None, ["--port=1"])


# --- the chat persona ---------------------------------------------------------------------------

def test_deerflow_becomes_the_default_persona_unless_one_is_configured():
    config = Config()
    assert set_default_persona(config)
    assert config.PersonaManager.default_persona_id == PERSONA_ID
    mine = Config({"PersonaManager": {"default_persona_id": "jupyter-ai-personas::x::Y"}})
    assert not set_default_persona(mine)
    assert mine.PersonaManager.default_persona_id == "jupyter-ai-personas::x::Y"
    disabled = Config({"PersonaManager": {"default_persona_id": None}})
    assert not set_default_persona(disabled)


def test_the_persona_id_is_the_one_the_persona_manager_computes():
    from deerflow_jupyter.chat.persona import DeerFlowPersona

    assert f"jupyter-ai-personas::{DeerFlowPersona.__module__.split('.')[0]}::DeerFlowPersona" == PERSONA_ID


# --- CLI log lines ------------------------------------------------------------------------------

def _record(name: str) -> logging.LogRecord:
    try:
        raise ValueError("first line\nsecond line")
    except ValueError:
        return logging.getLogger(name).makeRecord(name, logging.ERROR, __file__, 1, "it failed", (),
                                                  sys.exc_info())


def test_log_records_are_one_line_without_debug():
    from deerflow.cli.log_format import _OneLine

    line = _OneLine("%(message)s", debug=False).format(_record("deerflow.x"))
    assert line == f"deerflow.x: error: it failed: ValueError: first line ({cli.DEBUG_HINT})"
    full = _OneLine("%(message)s", debug=True).format(_record("deerflow.x"))
    assert "Traceback" in full


def test_lab_options_reach_lab_in_order(monkeypatch):
    seen: list[list[str]] = []
    monkeypatch.setattr(lab, "run_lab", lambda extra: seen.append(extra) or 0)
    assert cli.main(["--user", "lab", "lab", "--dir", "d", "--port=1", "x"]) == 0
    assert seen == [["--dir", "d", "--port=1", "x"]]
