"""Run options have one home (``deerflow.run_options.RunOptions``): a typo is an error, never ignored."""

import pytest
from IPython.core.error import UsageError

from deerflow.client import DeerFlowClient
from deerflow.errors import UserError
from deerflow.run_options import INTERACTION_OPTIONS, INTERNAL_OPTIONS, PUBLIC_OPTIONS, RunOptions
from deerflow_jupyter.bodies import RunCreate
from deerflow_kernel.options import parse_cell_line


def _body(**extra) -> RunCreate:
    return RunCreate(assistant_id="lead_agent", input={"messages": [{"role": "user", "content": "hi"}]}, **extra)


def test_a_misspelt_option_names_itself_and_the_closest_valid_one():
    with pytest.raises(UserError) as info:
        RunOptions.parse({"modle_name": "x"})
    assert str(info.value) == "unknown run option 'modle_name'; did you mean 'model_name'?"


def test_a_wrongly_typed_option_is_one_line_naming_it():
    with pytest.raises(UserError, match="run option 'max_total_subagents'") as info:
        RunOptions.parse({"max_total_subagents": "many"})
    assert "\n" not in str(info.value)


def test_options_keep_only_what_was_asked():
    options = RunOptions.parse({"model_name": "m", "is_plan_mode": "true", "agent_name": None})
    assert options.to_dict() == {"model_name": "m", "is_plan_mode": True}
    assert RunOptions.parse(options) is options


def test_the_client_refuses_a_typo_before_running(deerflow_home):
    with DeerFlowClient() as client:
        with pytest.raises(UserError) as info:
            client.chat("hi", modle_name="x")
        assert "'modle_name'" in str(info.value) and "'model_name'" in str(info.value)
        assert client.threads() == []  # nothing was written


def test_http_options_suggest_among_the_public_ones_and_ignore_langgraph_keys():
    with pytest.raises(UserError, match="did you mean 'model_name'"):
        _body(config={"configurable": {"modle_name": "x"}}).options()
    with pytest.raises(UserError, match="'replay' is internal-only"):
        _body(context={"replay": "/etc/passwd"}).options()
    with pytest.raises(UserError, match="internal-only"):
        _body(context={"interaction_mode": "autonomous"}).options()
    options = _body(config={"configurable": {"thread_id": "t", "model_name": "m"}, "recursion_limit": 50}).options()
    assert options.to_dict() == {"model_name": "m", "recursion_limit": 50}


def test_a_misspelt_magic_flag_suggests_the_real_one():
    with pytest.raises(UsageError) as info:
        parse_cell_line("--modle x")
    first = str(info.value).splitlines()[0]
    assert "--modle" in first and "--model" in first


def test_the_scopes_split_the_options_and_the_policy_keys_are_internal():
    assert not PUBLIC_OPTIONS & INTERNAL_OPTIONS
    assert INTERACTION_OPTIONS <= INTERNAL_OPTIONS
    assert set(RunOptions.model_fields) >= PUBLIC_OPTIONS | INTERNAL_OPTIONS


def test_the_server_backend_refuses_the_internal_options_naming_their_flags():
    from deerflow_kernel.backend import BackendError
    from deerflow_kernel.server import FLAG_OF, ServerBackend

    asked = {*parse_cell_line("--model m --plan --subagents --mode scheduled --record r --agent a --ref t")
             .run_options().to_dict(), *parse_cell_line("--replay r").run_options().to_dict()}
    assert asked - PUBLIC_OPTIONS == set(FLAG_OF) and set(FLAG_OF) <= INTERNAL_OPTIONS
    backend = ServerBackend("http://127.0.0.1:9/")  # refused before any request is made
    try:
        with pytest.raises(BackendError, match=r"^--mode, --record only work when the harness runs in the kernel"):
            backend.start("hi", "t", parse_cell_line("--mode scheduled --record r").run_options())
    finally:
        backend.close()
