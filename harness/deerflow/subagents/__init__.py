"""Subagents: delegation from the lead agent to isolated child agents.

* ``task`` (:mod:`.task_tool`) delegates one task; the child runs on the
  :class:`SubagentController` loop (:mod:`.controller`) through the
  :class:`SubagentExecutor` (:mod:`.executor`) with its own middlewares
  (:mod:`.middlewares`: receipts, guard, limits) and tools (:mod:`.child_agent`);
* the harness keeps receipts (:mod:`.receipts`) and checks acceptance criteria
  (:mod:`.acceptance`); :mod:`.report_contract` holds the words of the contract;
* :mod:`.recorder` is the one bridge back to the parent run's journal;
* durable batches live in :mod:`.batches`;
* :func:`create_deerflow_agent` (:mod:`.integration`) embeds it all in a
  caller's graph, bound to an explicit :class:`SubagentRuntime` (:mod:`.runtime`).

Names are imported lazily so that importing a submodule stays cheap and
free of import cycles with the agent middlewares.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "SubagentController": "deerflow.subagents.controller",
    "SubagentExecutor": "deerflow.subagents.executor",
    "SubagentJob": "deerflow.subagents.executor",
    "SubagentOutcome": "deerflow.subagents.outcome",
    "SubagentRegistry": "deerflow.subagents.registry",
    "SubagentRuntime": "deerflow.subagents.runtime",
    "SubagentType": "deerflow.subagents.registry",
    "ParentLoopRecorder": "deerflow.subagents.recorder",
    "ReceiptLedger": "deerflow.subagents.receipts",
    "check_acceptance": "deerflow.subagents.acceptance",
    "check_citations": "deerflow.subagents.receipts",
    "create_deerflow_agent": "deerflow.subagents.integration",
    "make_task_tool": "deerflow.subagents.task_tool",
    "subagent_tools": "deerflow.subagents.tools",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(name)
    return getattr(import_module(module), name)
