"""Gives a thread a title from its first user message.

The title is derived from the first user message (whitespace collapsed, cut at
a word boundary).  It is deterministic and costs no model call, which keeps
offline runs and replays reproducible.  Since it needs nothing the model says,
it is set when the thread's first run starts (a ``before_agent`` hook, fused with
the others into the run's first node) rather than in a node of its own after the
agent: one superstep and checkpoint write fewer per run.
"""

from __future__ import annotations

import re
from typing import Any

from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain_core.messages import HumanMessage
from langgraph.runtime import Runtime

from deerflow.runtime.context import RunContext
from deerflow.runtime.projection import message_text


def make_title(text: str, max_chars: int) -> str | None:
    """A short single-line title for ``text`` (None when there is no text)."""
    flat = re.sub(r"\s+", " ", text).strip().lstrip("/")
    if not flat:
        return None
    if len(flat) <= max_chars:
        return flat
    cut = flat[: max_chars - 1]
    if " " in cut[max_chars // 2 :]:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,.;:") + "…"


class TitleMiddleware(AgentMiddleware[AgentState[Any], RunContext]):
    """When a run starts: set ``title`` once, from the first human message."""

    def __init__(self, *, max_chars: int = 60) -> None:
        super().__init__()
        self.max_chars = max_chars

    def before_agent(self, state: Any, runtime: Runtime[RunContext]) -> dict[str, Any] | None:
        del runtime
        if state.get("title"):
            return None
        first = next((m for m in state.get("messages", []) if isinstance(m, HumanMessage)), None)
        title = make_title(message_text(first), self.max_chars) if first else None
        return {"title": title} if title else None

    async def abefore_agent(self, state: Any, runtime: Runtime[RunContext]) -> dict[str, Any] | None:
        return self.before_agent(state, runtime)
