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

from typing import TYPE_CHECKING

from deerflow._lazy import lazy_exports

if TYPE_CHECKING:
    from deerflow.subagents.acceptance import check_acceptance
    from deerflow.subagents.controller import SubagentController
    from deerflow.subagents.executor import SubagentExecutor, SubagentJob
    from deerflow.subagents.integration import create_deerflow_agent
    from deerflow.subagents.outcome import SubagentOutcome
    from deerflow.subagents.receipts import ReceiptLedger, check_citations
    from deerflow.subagents.recorder import ParentLoopRecorder
    from deerflow.subagents.registry import SubagentRegistry, SubagentType
    from deerflow.subagents.runtime import SubagentRuntime
    from deerflow.subagents.task_tool import make_task_tool
    from deerflow.subagents.tools import subagent_tools

_EXPORTS = {
    "SubagentController": "controller",
    "SubagentExecutor": "executor",
    "SubagentJob": "executor",
    "SubagentOutcome": "outcome",
    "SubagentRegistry": "registry",
    "SubagentRuntime": "runtime",
    "SubagentType": "registry",
    "ParentLoopRecorder": "recorder",
    "ReceiptLedger": "receipts",
    "check_acceptance": "acceptance",
    "check_citations": "receipts",
    "create_deerflow_agent": "integration",
    "make_task_tool": "task_tool",
    "subagent_tools": "tools",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)

__all__ = [
    "ParentLoopRecorder", "ReceiptLedger", "SubagentController", "SubagentExecutor", "SubagentJob",
    "SubagentOutcome", "SubagentRegistry", "SubagentRuntime", "SubagentType", "check_acceptance",
    "check_citations", "create_deerflow_agent", "make_task_tool", "subagent_tools",
]
