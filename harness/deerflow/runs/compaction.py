"""Compacting a thread between runs (``client.compact``).

The same step the summarization middleware takes during a run, applied to the
checkpointed state on demand: fold everything but the last ``keep_messages``
into ``summary_text`` and move ``summarized_through``.  No message is removed;
later runs send the summary plus the remaining messages (see
:mod:`deerflow.agents.summary`).  The state is written with ``aupdate_state``
on a small graph that has the thread's channels, so no agent is built and no
model is called except the one writing the summary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NotRequired

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph

from deerflow.agents.summary import Summarizer, live_messages, plan_compaction
from deerflow.agents.thread_state import ThreadState

_NODE = "compact"


class CompactionState(ThreadState):
    """The thread's channels plus the summarization cut-off."""

    summarized_through: NotRequired[str]


@dataclass(frozen=True)
class CompactResult:
    """What a compaction did.

    Attributes:
        thread_id: The thread compacted.
        summarized: Messages newly folded into the summary (0: nothing to do).
        kept: Messages still sent verbatim to the model.
        method: ``model`` or ``extractive``; None when nothing was summarized.
        summary_text: The thread's summary after compaction (None if it has none).
    """

    thread_id: str
    summarized: int
    kept: int
    method: str | None
    summary_text: str | None


def _writer(checkpointer: BaseCheckpointSaver) -> Any:
    graph = StateGraph(CompactionState)
    graph.add_node(_NODE, lambda state: {})
    graph.add_edge(START, _NODE)
    graph.add_edge(_NODE, END)
    return graph.compile(checkpointer=checkpointer)


async def compact_thread(checkpointer: BaseCheckpointSaver, thread_id: str, *, summarizer: Summarizer,
                         keep_messages: int) -> CompactResult:
    """Summarize all but the last ``keep_messages`` messages of a thread's history.

    The caller makes sure no run is active on the thread meanwhile.
    """
    graph = _writer(checkpointer)
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
    if await checkpointer.aget_tuple(config) is None:
        return CompactResult(thread_id, 0, 0, None, None)
    values = (await graph.aget_state(config)).values
    messages, previous = values.get("messages") or [], values.get("summary_text")
    through = values.get("summarized_through")
    step = plan_compaction(messages, through, keep_messages)
    if step is None:
        return CompactResult(thread_id, 0, len(live_messages(messages, through)), None, previous)
    written = await summarizer.asummarize(previous, step.messages)
    await graph.aupdate_state(config, {"summary_text": written.text, "summarized_through": step.through_id},
                              as_node=_NODE)
    return CompactResult(thread_id, len(step.messages), step.kept, written.method, written.text)
