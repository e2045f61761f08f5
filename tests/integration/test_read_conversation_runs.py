"""``read_conversation`` through real runs: bound only with a grant, owner-checked, paged."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from deerflow import DeerFlowClient
from deerflow.errors import NotFoundError, UserError
from deerflow.runtime import events as ev
from deerflow.tools.builtins.conversation import paginate, visible_history
from fixtures.logging_model import read_log

LONG = " ".join(f"finding-{i:04d}" for i in range(300))  # about 3,900 characters
MAX_CHARS = 1000


@pytest.fixture
def workdir(deerflow_home: Path, tmp_path: Path) -> Path:
    (tmp_path / "long.yaml").write_text(yaml.safe_dump({"turns": [LONG]}))
    (tmp_path / "reader.yaml").write_text("turns: ['placeholder']\n")
    data = {"tool_output": {"max_chars": MAX_CHARS},
            "models": [{"name": name, "use": "fixtures.logging_model:LoggingScriptedModel",
                        "log": str(tmp_path / f"{name}.jsonl"), "script": str(tmp_path / f"{name}.yaml")}
                       for name in ("long", "reader")]}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(data))
    return tmp_path


def reader_script(workdir: Path, source: str, seq: int, offset: int) -> None:
    turns = [{"tool_calls": [{"name": "read_conversation", "args": {"thread_id": source}}]},
             {"tool_calls": [{"name": "read_conversation",
                              "args": {"thread_id": source, "message_seq": seq, "offset": offset}}]},
             "I read both pages."]
    (workdir / "reader.yaml").write_text(yaml.safe_dump({"turns": turns}))


def test_a_referenced_thread_is_read_page_by_page(workdir):
    with DeerFlowClient(config_path=workdir / "config.yaml") as client:
        source = client.chat("Write the long findings", model_name="long").thread_id
        visible = visible_history(client.thread(source).messages)
        first = paginate(source, None, visible, message_seq=0, offset=0, budget=MAX_CHARS)
        assert first.next_seq == 1  # the long answer does not fit one page
        reader_script(workdir, source, first.next_seq, first.next_offset)
        run = client.chat("Continue from my other conversation", model_name="reader", referenced_threads=[source])
    assert run.status == "success", run.error
    page1, page2 = [e for e in run.events if isinstance(e, ev.ToolResult)]
    assert page1.status == page2.status == "success"
    assert f"message_seq=1, offset={first.next_offset})]" in page1.text
    assert f"[#1 assistant, from character {first.next_offset}]" in page2.text
    cut_at = first.next_offset
    assert LONG[cut_at:cut_at + 40] in page2.text and LONG[cut_at - 40:cut_at] in page1.text
    assert all(len(p.text) <= MAX_CHARS for p in (page1, page2))  # inline, never externalized
    assert "read_conversation" in read_log(workdir / "reader.jsonl")[0]["tools"]


def test_without_a_reference_the_tool_is_not_offered(workdir):
    with DeerFlowClient(config_path=workdir / "config.yaml") as client:
        source = client.chat("Write the long findings", model_name="long").thread_id
        reader_script(workdir, source, 1, 10)
        run = client.chat("Read my other conversation", model_name="reader")
    assert "read_conversation" not in read_log(workdir / "reader.jsonl")[0]["tools"]
    first = next(e for e in run.events if isinstance(e, ev.ToolResult))
    assert first.status == "error" and "finding-0000" not in first.text


def test_another_users_thread_or_a_bootstrap_run_gets_no_grant(workdir):
    config = workdir / "config.yaml"
    with DeerFlowClient(config_path=config) as alice:
        source = alice.chat("Write the long findings", model_name="long").thread_id
        with pytest.raises(UserError, match="bootstrap"):
            alice.chat("/bootstrap ada analyst", model_name="reader", referenced_threads=[source])
    with DeerFlowClient(config_path=config, user_id="bob") as bob:
        with pytest.raises(NotFoundError):
            bob.chat("Read alice's thread", model_name="reader", referenced_threads=[source])
        assert bob.threads() == []
    assert not read_log(workdir / "reader.jsonl")  # the model never ran
