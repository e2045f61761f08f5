"""``batch_task``, ``batch_status``, ``cancel_batch``: durable batches for the lead.

Offered only while a SQL-backed :class:`BatchSubmitter` is installed.  The
tools return progress, never results: a batch's reports and receipts stay
in the database and its owner-scoped JSONL export (``deerflow batches
export ID``, ``GET /deerflow/api/batches/ID/export``), so a hundred items do
not flood the lead's context.  Progress counts describe *execution*;
acceptance verdicts are counted separately; nothing is retried because a
criterion was unmet or unverified.

Each tool also emits a ``subagent`` event for the batch (``task_id`` = the
batch id, ``detail`` = the counts) so notebook and chat views show it as a
row of their subagent table.  Unbound tools use the host runtime's
submitter; tools bound to a runtime (``create_deerflow_agent``) use only
that runtime's submitter.
"""

from __future__ import annotations

from typing import Annotated, Any

from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from deerflow.errors import NotFoundError, ToolFailure
from deerflow.runtime.context import RunContext
from deerflow.subagents.batches.submitter import BatchStatus, BatchSubmitter
from deerflow.subagents.outcome import label_for
from deerflow.subagents.runtime import SubagentRuntime, runtime_from_context
from deerflow.subagents.task_tool import SUBAGENT_TOOL_MARK, run_context


class BatchItem(BaseModel):
    """One item of a batch."""

    prompt: str = Field(description="Everything the subagent needs for this item.")
    subagent_type: str = Field(description="Which kind of subagent runs it.")
    acceptance_criteria: list[str] | None = Field(
        default=None, description="Optional checkable conditions (same forms as for task).")


ItemsArg = Annotated[list[BatchItem], "The items; each runs as its own subagent."]
LabelArg = Annotated[str | None, "Optional short label for the batch."]
BatchIdArg = Annotated[str, "The batch id returned by batch_task."]


def _submitter(bound: SubagentRuntime | None, runtime: ToolRuntime[Any]) -> tuple[BatchSubmitter, SubagentRuntime]:
    sub = bound or runtime_from_context(runtime.context)
    if sub.submitter is None:
        raise ToolFailure("durable batches are not available in this session", code="batches_unavailable")
    return sub.submitter, sub


def status_text(status: BatchStatus) -> str:
    """Progress for the lead: execution and acceptance, never item results."""
    counts, r = status.counts, status.record
    execution = ", ".join(f"{k} {v}" for k, v in counts.execution.items())
    acceptance = ", ".join(f"{k} {v}" for k, v in counts.acceptance.items())
    state = "cancelled" if r.cancel_requested else "finished" if status.done else "in progress"
    return (f"Batch {r.batch_id} ({r.label}): {state}, {counts.finished} of {counts.total} items finished.\n"
            f"Execution (how items ended, not whether they met their criteria): {execution}.\n"
            f"Acceptance (checked by the harness, finished items only): {acceptance}.\n"
            "Unmet and unverified items are never retried automatically. Results are not shown here: the user "
            f"can export them (deerflow batches export {r.batch_id}).")


def _emit(runtime: ToolRuntime[Any], status: BatchStatus) -> None:
    state = "cancelled" if status.record.cancel_requested else "completed" if status.done else "running"
    runtime.stream_writer({"type": "subagent", "task_id": status.record.batch_id, "status": state,
                           "label": f"batch: {status.record.label}", "detail": {"batch": status.to_dict()}})


def make_batch_tools(bound: SubagentRuntime | None = None, *, types_text: str = "") -> list[BaseTool]:
    """The three batch tools, unbound (host runtime) or bound to ``bound``."""

    def batch_task(items: ItemsArg, runtime: ToolRuntime[RunContext], description: LabelArg = None) -> str:
        submitter, sub = _submitter(bound, runtime)
        context = run_context(runtime)
        known = sub.executor.registry(context).names()
        label = label_for(description, f"{len(items)} items")
        context.paths.ready_skills_view()  # items run after this run, in the thread's sandbox: its view must exist
        status = submitter.submit(context, [i.model_dump() if isinstance(i, BaseModel) else dict(i) for i in items],
                                  label=label, known_types=known)
        _emit(runtime, status)
        return (f"Submitted batch {status.record.batch_id} with {status.record.item_count} items; they run in the "
                f"background. Check progress with batch_status(batch_id={status.record.batch_id!r}).\n"
                + status_text(status))

    def batch_status(batch_id: BatchIdArg, runtime: ToolRuntime[RunContext]) -> str:
        submitter, _ = _submitter(bound, runtime)
        status = _owned(lambda: submitter.status(batch_id, run_context(runtime).user_id))
        _emit(runtime, status)
        return status_text(status)

    def cancel_batch(batch_id: BatchIdArg, runtime: ToolRuntime[RunContext]) -> str:
        submitter, _ = _submitter(bound, runtime)
        status = _owned(lambda: submitter.cancel(batch_id, run_context(runtime).user_id))
        _emit(runtime, status)
        return "Cancelled: no new item of this batch will start.\n" + status_text(status)

    tools: list[BaseTool] = [
        StructuredTool.from_function(func=batch_task, name="batch_task", description=(
            "Submit many independent tasks as one durable batch: each item runs as its own subagent in the "
            "background (bounded concurrency, survives restarts). Returns a batch id at once; results are not "
            "returned to you (the user exports them). Each item's report is a self-report; acceptance_criteria "
            "are checked by the harness. Subagent types:\n" + types_text)),
        StructuredTool.from_function(func=batch_status, name="batch_status", description=(
            "Progress of a batch: how many items ended how (execution) and, separately, their acceptance "
            "verdicts. Never the items' results.")),
        StructuredTool.from_function(func=cancel_batch, name="cancel_batch", description=(
            "Cancel a batch durably: pending items never start, running ones are stopped.")),
    ]
    for tool in tools:
        tool.metadata = {SUBAGENT_TOOL_MARK: True}
    return tools


def _owned(read: Any) -> BatchStatus:
    try:
        return read()
    except NotFoundError as exc:
        raise ToolFailure(str(exc), code="not_found") from None


__all__ = ["BatchItem", "make_batch_tools", "status_text"]
