"""The usage meter and the reports over stored runs (no model, no network)."""

from __future__ import annotations

import uuid

import pytest
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, LLMResult

from deerflow.persistence.store import RunRecord
from deerflow.runtime.usage import (
    TokenBudgetExceeded,
    UsageMeter,
    parse_since,
    provider_usage,
    summary_line,
    usage_report,
)

DAY1 = 1767225600.0  # 2026-01-01T00:00:00Z


def answer(usage: dict | None = None, llm_output: dict | None = None) -> LLMResult:
    message = AIMessage(content="ok", usage_metadata=usage) if usage else AIMessage(content="ok")
    return LLMResult(generations=[[ChatGeneration(message=message)]], llm_output=llm_output)


def call(meter: UsageMeter, result: LLMResult, **metadata: str) -> None:
    run_id = uuid.uuid4()
    meter.on_chat_model_start({}, [], run_id=run_id, metadata=metadata)
    meter.on_llm_end(result, run_id=run_id)


def test_provider_usage_reads_the_message_then_the_raw_token_usage_and_never_invents_one():
    assert provider_usage(answer({"input_tokens": 5, "output_tokens": 2, "total_tokens": 7})) == {
        "input_tokens": 5, "output_tokens": 2, "total_tokens": 7}
    assert provider_usage(answer(llm_output={"token_usage": {"prompt_tokens": 3, "completion_tokens": 4}})) == {
        "input_tokens": 3, "output_tokens": 4, "total_tokens": 7}
    assert provider_usage(answer()) is None
    assert provider_usage(answer(llm_output={"token_usage": {}})) is None


def test_the_meter_attributes_calls_to_their_model_and_source_and_counts_unknown_ones():
    meter = UsageMeter(default_model="configured")
    call(meter, answer({"input_tokens": 10, "output_tokens": 1, "total_tokens": 11}), ls_model_name="gpt-x")
    call(meter, answer({"input_tokens": 20, "output_tokens": 2, "total_tokens": 22}), subagent_type="researcher")
    call(meter, answer())
    summary = meter.summary()
    assert summary["total_tokens"] == 33 and summary["calls"] == 3 and summary["unknown_calls"] == 1
    assert summary["by_model"]["gpt-x"]["total_tokens"] == 11
    assert summary["by_model"]["configured"]["calls"] == 2
    assert summary["by_source"]["subagent:researcher"]["input_tokens"] == 20
    assert summary["by_source"]["lead"]["unknown_calls"] == 1
    assert UsageMeter(default_model="m").summary() is None  # no model call: no usage at all


def test_the_meter_hears_model_events_through_a_callback_manager_and_no_chain_events(monkeypatch):
    """LangChain skips the meter for the many chain events of a step (ignore_chain and friends)."""
    import asyncio

    from langchain_core.callbacks import AsyncCallbackManager

    meter = UsageMeter(default_model="m")
    heard: list[str] = []
    for event in ("on_chain_start", "on_chain_end", "on_custom_event", "on_retriever_start", "on_agent_action"):
        monkeypatch.setattr(meter, event, lambda *a, _e=event, **k: heard.append(_e), raising=False)

    async def one_step() -> None:
        manager = AsyncCallbackManager(handlers=[meter], inheritable_handlers=[meter])  # as config callbacks are
        chain = await manager.on_chain_start({}, {"messages": []}, name="model")
        models = await chain.get_child().on_chat_model_start({}, [[]])
        await models[0].on_llm_end(answer({"input_tokens": 4, "output_tokens": 1, "total_tokens": 5}))
        await chain.on_chain_end({})

    asyncio.run(one_step())
    assert heard == []
    assert meter.summary()["total_tokens"] == 5 and meter.summary()["calls"] == 1


def test_the_budget_refuses_the_next_call_not_the_one_that_crossed_it():
    meter = UsageMeter(default_model="m", budget=100)
    call(meter, answer({"input_tokens": 90, "output_tokens": 30, "total_tokens": 120}))
    with pytest.raises(TokenBudgetExceeded, match=r"used 120 tokens.*max_tokens_per_run.* is 100"):
        meter.refuse_over_budget(uuid.uuid4())
    assert len(UsageMeter(default_model="m").callbacks()) == 1  # no budget: no guard to pay for
    assert len(meter.callbacks()) == 2


def test_a_refused_model_call_leaves_no_handlers_event_unawaited():
    """LangChain makes every handler's start coroutine first, then awaits the inline ones in turn: a
    refusal from an inline handler left the others never awaited.  The guard refuses from the gather."""
    import asyncio
    import gc
    import warnings

    from langchain_core.callbacks import AsyncCallbackManager, BaseCallbackHandler

    class Listener(BaseCallbackHandler):  # another inline handler after the meter (as LangGraph's stream handler is)
        run_inline = True

        def __init__(self) -> None:
            self.starts = 0

        def on_chat_model_start(self, *args, **kwargs) -> None:
            self.starts += 1

    meter = UsageMeter(default_model="m", budget=100)
    call(meter, answer({"input_tokens": 90, "output_tokens": 30, "total_tokens": 120}))
    listener = Listener()
    handlers = [*meter.callbacks(), listener]

    async def start() -> None:
        manager = AsyncCallbackManager(handlers=handlers, inheritable_handlers=handlers)
        await manager.on_chat_model_start({}, [[]])

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(TokenBudgetExceeded):
            asyncio.run(start())
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)]
    assert listener.starts == 1 and meter.summary()["calls"] == 1  # the refused call is not counted


def test_summary_line_says_unknown_rather_than_zero():
    assert summary_line(None) == "tokens: none (no model call)"
    assert summary_line({"calls": 2, "unknown_calls": 2, "total_tokens": 0, "input_tokens": 0,
                         "output_tokens": 0}).startswith("tokens: unknown")
    line = summary_line({"calls": 3, "unknown_calls": 1, "total_tokens": 1234, "input_tokens": 1200,
                         "output_tokens": 34})
    assert line == "tokens: 1,234 (1,200 in / 34 out) in 3 model calls, 1 without usage data"


def run(user: str, thread: str, created: float, usage: dict | None) -> RunRecord:
    return RunRecord(uuid.uuid4().hex, thread, user, "success", created, created,
                     result={"usage": usage} if usage is not None else {})


def test_reports_group_stored_runs_by_user_day_thread_and_model():
    u1 = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15, "calls": 1, "unknown_calls": 0,
          "by_model": {"a": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15, "calls": 1}}}
    u2 = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0, "calls": 1, "unknown_calls": 1,
          "by_model": {"b": {"calls": 1, "unknown_calls": 1}}}
    runs = [run("ann", "t1", DAY1, u1), run("ann", "t1", DAY1 + 86400, u1), run("bob", "t2", DAY1, u2),
            run("bob", "t3", DAY1, None)]
    by_user = {r.key: r.to_dict() for r in usage_report(runs, by="user")}
    assert by_user["ann"]["total_tokens"] == 30 and by_user["ann"]["runs"] == 2
    assert by_user["bob"]["total_tokens"] is None  # only calls without usage data: unknown
    assert [r.key for r in usage_report(runs, by="day")] == ["2026-01-01", "2026-01-02"]
    assert {r.key: r.runs for r in usage_report(runs, by="thread")} == {"t1": 2, "t2": 1}
    assert {r.key: r.tally.calls for r in usage_report(runs, by="model")} == {"a": 2, "b": 1}
    with pytest.raises(ValueError, match="--by must be one of"):
        usage_report(runs, by="week")


def test_since_is_a_utc_day_and_a_bad_one_says_the_form():
    assert parse_since("2026-01-01") == DAY1
    assert parse_since(None) is None
    with pytest.raises(ValueError, match="--since expects a date like"):
        parse_since("last week")


def test_the_cli_offers_every_usage_grouping() -> None:
    """The CLI restates the groupings to keep `--help` free of LangChain; they must not drift."""
    from deerflow.cli import USAGE_GROUPINGS
    from deerflow.runtime.usage import GROUPINGS

    assert USAGE_GROUPINGS == GROUPINGS
