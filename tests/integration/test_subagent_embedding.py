"""``create_deerflow_agent``: delegation inside a caller's own graph, bound to the caller's runtime."""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from deerflow.config.paths import ThreadPaths
from deerflow.config.schema import AppConfig, SubagentsConfig
from deerflow.models.factory import ResolvedModel
from deerflow.models.scripted import ScriptedChatModel
from deerflow.runtime.context import RunContext
from deerflow.runtime.services import HostServices
from deerflow.subagents import (
    SubagentController,
    SubagentRuntime,
    create_deerflow_agent,
    subagent_tools,
)
from deerflow.subagents.batches.sql import SqliteBackend
from deerflow.subagents.batches.store import BatchStore
from deerflow.subagents.batches.submitter import BatchSubmitter
from deerflow.tools.assembly import ToolSources

SCRIPT = """
turns:
  - tool_calls: [{name: task, args: {prompt: "CHILD summarize", subagent_type: general-purpose}}]
  - tool_calls: [{name: batch_task, args: {items: [{prompt: "CHILD later", subagent_type: general-purpose}]}}]
  - "First run done."
  - tool_calls: [{name: task, args: {prompt: "CHILD again", subagent_type: general-purpose}}]
  - "Second run done."
conversations:
  - {match: CHILD, turns: ["Summary written."]}
"""


def runtime(tmp_path: Path, name: str, **kwargs: Any) -> SubagentRuntime:
    # opened on a thread of its own: some tests build it inside their event loop (the loop guard)
    with ThreadPoolExecutor(1) as pool:
        store = pool.submit(lambda: BatchStore(SqliteBackend(tmp_path / f"{name}.db"))).result()
    submitter = BatchSubmitter(store, max_items=10)
    return SubagentRuntime(SubagentController(name=name), submitter=submitter, **kwargs)


def context(tmp_path: Path, config: AppConfig, *, run_id: str, services: dict[str, Any]) -> RunContext:
    paths = ThreadPaths(tmp_path / "users" / "u" / "threads" / "t").ensure()
    return RunContext(user_id="u", thread_id="t", run_id=run_id, paths=paths, config=config, model_name="embedded",
                      services=HostServices(**services))


def test_bound_tools_keep_the_names_and_schemas_of_the_ordinary_ones(tmp_path):
    config = AppConfig(subagents=SubagentsConfig(enabled=True))
    mine = runtime(tmp_path, "mine", config=config)
    unbound = {t.name: t for t in subagent_tools(mine, config, bash_allowed=False)}
    bound = {t.name: t for t in subagent_tools(mine, config, bash_allowed=False, bound=True)}
    assert list(unbound) == list(bound) == ["task", "batch_task", "batch_status", "cancel_batch"]
    for name, tool in bound.items():
        assert tool is not unbound[name]
        assert tool.tool_call_schema.model_json_schema() == unbound[name].tool_call_schema.model_json_schema()
        assert tool.description == unbound[name].description
    mine.controller.close()


async def test_the_graph_delegates_through_the_callers_runtime_only(tmp_path, caplog):
    model = ScriptedChatModel(SCRIPT)
    config = AppConfig(subagents=SubagentsConfig(enabled=True))
    mine = runtime(tmp_path, "mine", config=config, model=ResolvedModel(model, "embedded", None))
    foreign_sources: list[Any] = []
    other = runtime(tmp_path, "other", tool_sources=lambda *a: foreign_sources.append(a) or ToolSources())
    graph = create_deerflow_agent(model, subagent_runtime=mine, checkpointer=InMemorySaver(), max_total_subagents=1)
    thread = {"configurable": {"thread_id": "t"}}
    try:
        first = await graph.ainvoke({"messages": [HumanMessage("go")]}, thread,
                                    context=context(tmp_path, config, run_id="run-1", services={"subagents": other}))
        (entry,) = first["delegations"]
        assert entry["status"] == "completed" and entry["run_id"] == "run-1"
        assert foreign_sources == []  # the host runtime in the context was never used
        assert [b.record.item_count for b in await asyncio.to_thread(mine.submitter.list, "u")] == [1]
        assert await asyncio.to_thread(other.submitter.list, "u") == []

        with caplog.at_level(logging.WARNING):
            second = await graph.ainvoke({"messages": [HumanMessage("again")]}, thread,
                                         context=context(tmp_path, config, run_id="", services={}))
        refused = [m for m in second["messages"] if m.type == "tool" and m.name == "task"][-1]
        assert "used all 1 subagent delegations" in refused.text  # no run id: the whole ledger counts
        assert "fail-restrictive" in caplog.text
        assert len(second["delegations"]) == 1
    finally:
        mine.controller.close()
        other.controller.close()
