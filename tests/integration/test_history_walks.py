"""A run on a long thread reads its history once per walk, not once per model call.

LangChain walks the whole request at every model call (``create_agent``'s invalid-call
patch, ``BaseChatModel``'s conversion, tracing format and normalization); DeerFlow's
stand-ins (``agents.invalid_calls``, ``agents.model_passes``) read only what a lineage
added.  Counted here on a real run: if the run's model calls stopped naming the history
(``RunModelMiddleware``) or the channel stopped handing out lineage lists, the counts
would be 0 (LangChain's own walks) and the test fails.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from langchain.agents import factory
from langchain_core.language_models import chat_models
from langchain_core.messages import AIMessage, HumanMessage

from deerflow.agents import invalid_calls, model_passes
from deerflow.config.loader import load_config
from deerflow.config.paths import HomePaths
from deerflow.models.scripted import TURN_STAMP
from deerflow.runs.manager import RunManager, RunRequest
from deerflow.runs.thread_ops import state_reader

HISTORY, STEPS = 400, 4


async def test_each_walk_reads_a_long_history_once_per_run(deerflow_home: Path, tmp_path: Path) -> None:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"turns": [
        *[{"tool_calls": [{"name": "wait", "args": {"seconds": 0}}]} for _ in range(STEPS)], "done"]}))
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"models": [
        {"name": "s", "use": "deerflow.models.scripted:ScriptedChatModel", "script": str(script)}]}))
    manager = await RunManager.open(loaded=load_config(config), home=HomePaths(deerflow_home))
    try:
        thread_id = (await manager.acreate_thread("local")).thread_id
        stamp = {"model_name": "scripted:script", TURN_STAMP: -1}  # an old conversation: the script starts afresh
        old: list[Any] = [HumanMessage(f"q{i}") if i % 2 == 0 else AIMessage(f"a{i}", response_metadata=stamp)
                          for i in range(HISTORY)]
        await state_reader(manager.checkpointer).aupdate_state(
            {"configurable": {"thread_id": thread_id}}, {"messages": old}, as_node="model")
        invalid_calls.install()
        model_passes.install()
        walks: dict[str, Any] = {"invalid calls": getattr(factory._patch_invalid_tool_calls, "memo", None),
                                 "tracing": getattr(chat_models._format_for_tracing, "memo", None),
                                 "normalize": getattr(chat_models._normalize_messages, "memo", None)}
        before = {name: memo.walked for name, memo in walks.items() if memo is not None}
        live = await manager.start(RunRequest(prompt="go", thread_id=thread_id))
        finished = await live.wait()
        assert finished.status == "success", finished.error
    finally:
        await manager.close()
    read = {name: memo.walked - before[name] for name, memo in walks.items()}
    calls = STEPS + 1
    for name, count in read.items():  # the loaded history once, then each step's new messages
        assert HISTORY < count < HISTORY + 10 * calls, f"{name}: {count} messages read over {calls} model calls"
