"""Summaries: where the cut falls, what gets written, and how config shapes it."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from deerflow.agents.middlewares.summarization import build_summarization
from deerflow.agents.summary import (
    EXTRACTIVE_HEADER,
    Summarizer,
    SummaryPolicy,
    choose_cutoff,
    extractive_summary,
    live_messages,
    plan_compaction,
    with_summary,
)
from deerflow.config.loader import load_config
from deerflow.config.schema import AppConfig, ModelConfig, SummarizationConfig
from deerflow.errors import ConfigError
from deerflow.models.factory import ResolvedModel
from deerflow.models.scripted import ScriptedChatModel, ScriptExhaustedError


def ai(n: int, calls: int = 0) -> AIMessage:
    return AIMessage(f"step {n}", id=f"a{n}",
                     tool_calls=[{"name": "ls", "args": {"i": k}, "id": f"c{n}_{k}"} for k in range(calls)])


def answers(message: AIMessage) -> list[ToolMessage]:
    return [ToolMessage("ok", tool_call_id=c["id"], name="ls", id=f"t{c['id']}") for c in message.tool_calls]


def history(shape: str) -> list[BaseMessage]:
    """``h`` human, ``a`` plain answer, digit ``k``: an answer with k tool calls and their results."""
    out: list[BaseMessage] = []
    for n, kind in enumerate(shape):
        if kind == "h":
            out.append(HumanMessage(f"ask {n}", id=f"h{n}"))
        else:
            message = ai(n, 0 if kind == "a" else int(kind))
            out += [message, *answers(message)]
    return out


@pytest.mark.parametrize("shape", ["h2a", "h1h3a2", "h111", "h3h3", "hah2", "h1a", "h1hh", "hahhh"])
def test_no_cut_separates_tool_calls_from_results_or_drops_the_last_answer(shape):
    messages = history(shape)
    last_ai = max(i for i, m in enumerate(messages) if isinstance(m, AIMessage))
    for keep in range(1, len(messages) + 1):
        cut = choose_cutoff(messages, keep)
        kept = messages[cut:]
        assert cut <= last_ai
        assert not kept or not isinstance(kept[0], ToolMessage)
        called = {c["id"] for m in kept if isinstance(m, AIMessage) for c in m.tool_calls}
        assert all(m.tool_call_id in called for m in kept if isinstance(m, ToolMessage))


def test_cut_keeps_the_requested_tail_when_that_is_safe():
    messages = history("hahah")  # h a h a h
    assert choose_cutoff(messages, 2) == 3
    assert choose_cutoff(messages, 5) == 0  # nothing to fold


def test_requests_skip_what_the_summary_covers():
    messages = history("h2h1")
    assert live_messages(messages, None) == messages
    assert live_messages(messages, "h0") == messages[1:]
    assert live_messages(messages, "a1") == messages[4:]  # tool results of a summarized call are dropped
    assert live_messages(messages, "unknown") == messages  # never lose context on a bad id

    step = plan_compaction(messages, "h0", keep=2)
    assert step is not None and step.through_id == "h2" and step.kept == 2
    assert [m.id for m in step.messages] == ["a1", "tc1_0", "tc1_1", "h2"]


def test_extractive_summary_is_bounded_and_keeps_the_request():
    messages = [HumanMessage("Build a dashboard of sales by region"),
                *itertools.chain.from_iterable(
                    [ai(n, 1), ToolMessage("x" * 500, tool_call_id=f"c{n}_0", name="ls")] for n in range(40))]
    text = extractive_summary(None, messages, max_chars=1_000)
    assert text == extractive_summary(None, messages, max_chars=1_000)  # deterministic
    assert len(text) <= 1_000 + 40
    lines = text.splitlines()
    assert lines[0] == EXTRACTIVE_HEADER
    assert lines[1] == "- user: Build a dashboard of sales by region"
    assert "more lines omitted" in lines[2]
    assert "step 39" in text  # the most recent survive

    folded = extractive_summary(text, [HumanMessage("Add a map")], max_chars=1_000)
    assert folded.count(EXTRACTIVE_HEADER) == 1  # no nesting
    assert "- user: Build a dashboard" in folded and folded.endswith("- user: Add a map")


def test_a_fraction_trigger_becomes_tokens_of_the_context_window():
    config = SummarizationConfig(enabled=True, trigger_fraction=0.5, trigger_tokens=900, keep_messages=4)
    policy = SummaryPolicy.from_config(config, context_window=1_000)
    assert (policy.trigger_tokens, policy.keep_messages) == (500, 4)
    assert SummaryPolicy.from_config(config, context_window=4_000).trigger_tokens == 900  # the lower wins
    assert not SummaryPolicy.from_config(SummarizationConfig(), context_window=None).automatic
    short = [HumanMessage("hi")]
    assert not policy.should_summarize(short, None)
    assert policy.should_summarize(short, "s" * 2_000)  # the summary counts too


def test_config_errors_name_the_key(tmp_path):
    model = ResolvedModel(ScriptedChatModel(script=["hi"]), "m",
                          ModelConfig(name="m", use="deerflow.models.scripted:ScriptedChatModel"))
    app = AppConfig.model_validate({"summarization": {"enabled": True, "trigger_fraction": 0.8}})
    with pytest.raises(ConfigError, match="context window") as caught:
        build_summarization(app, model)
    assert caught.value.key == "summarization.trigger_fraction"

    config = tmp_path / "config.yaml"
    config.write_text("summarization:\n  enabled: true\n")
    with pytest.raises(ConfigError, match="needs a trigger"):
        load_config(config)
    config.write_text("loop_detection:\n  warn_after: 5\n  stop_after: 5\n")
    with pytest.raises(ConfigError, match="must be greater than warn_after"):
        load_config(config)


def test_the_summary_rides_in_the_system_prompt():
    system = with_summary(SystemMessage("You are DeerFlow."), "The user wants a chart.")
    assert system is not None
    assert system.text.startswith("You are DeerFlow.")
    assert "<conversation_summary>" in system.text and "The user wants a chart." in system.text
    assert with_summary(SystemMessage("x"), None).text == "x"


class EchoSummaryModel(BaseChatModel):
    """Answers every prompt with a fixed summary and remembers the prompt."""

    prompts: list[str] = Field(default_factory=list)
    fail: bool = False

    @property
    def _llm_type(self) -> str:
        return "echo-summary"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        if self.fail:
            raise ScriptExhaustedError("cassette", 0, 0)
        self.prompts.append(messages[-1].text)
        return ChatResult(generations=[ChatGeneration(message=AIMessage("## SESSION INTENT\nA chart."))])


def test_a_real_model_writes_the_summary_and_a_script_cannot():
    messages = [HumanMessage("Make a chart of sales"), AIMessage("Done.")]
    model = EchoSummaryModel()
    written = asyncio.run(Summarizer(model).asummarize("Earlier: data loaded.", messages))
    assert (written.method, written.text) == ("model", "## SESSION INTENT\nA chart.")
    assert "Make a chart of sales" in model.prompts[0] and "Earlier: data loaded." in model.prompts[0]

    scripted = ScriptedChatModel(script=["I am turn zero."])
    written = Summarizer(scripted).summarize(None, messages)
    assert written.method == "extractive" and "- user: Make a chart of sales" in written.text
    assert scripted.calls == []  # never asked: it would answer with a scripted turn

    failing = Summarizer(EchoSummaryModel(fail=True)).summarize(None, messages)
    assert failing.method == "extractive"
