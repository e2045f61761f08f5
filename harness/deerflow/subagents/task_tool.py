"""The ``task`` tool: the lead delegates one self-contained task to a subagent.

``task(prompt, subagent_type, acceptance_criteria=None, description=None)``:
``description`` is only a progress label (the display falls back to the
prompt); execution never depends on it.  The call

1. resolves the :class:`SubagentRuntime` — the one the tool was bound to
   (``create_deerflow_agent``), else the host's from ``RunContext.services``;
2. prepares the child (unknown type or model → an error the lead can fix)
   and emits ``subagent`` ``started``;
3. runs it with a :class:`ParentLoopRecorder` whose sink is this run's
   stream writer (the run journal): child loop-detection, promotion and
   tool-progress records become the parent's ``notice`` and ``subagent``
   ``running`` events; usage heartbeats too;
4. drains the recorder, emits the terminal ``subagent`` event, and returns a
   ``Command`` adding the ToolMessage (the outcome's text; the full outcome
   as its artifact) and the ledger entry to ``delegations``.

If the parent run is cancelled, the child is cancelled and a ``cancelled``
event is emitted.  :func:`make_task_tool` builds the tool unbound or bound;
both have the same name and argument schema.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Annotated, Any

from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.types import Command

from deerflow.errors import ToolFailure
from deerflow.runtime.context import RunContext
from deerflow.subagents.acceptance import normalize_criteria
from deerflow.subagents.executor import SubagentJob
from deerflow.subagents.outcome import SubagentOutcome, label_for
from deerflow.subagents.recorder import ParentLoopRecorder, Sink
from deerflow.subagents.report_contract import task_description
from deerflow.subagents.runtime import SubagentRuntime, runtime_from_context

TASK_TOOL = "task"
SUBAGENT_TOOL_MARK = "deerflow_subagent_tool"
"""``tool.metadata`` key marking DeerFlow's own delegation tools (so clones can replace them)."""
MAX_PROMPT_CHARS = 50_000

PromptArg = Annotated[str, "Everything the subagent needs to do the task; it cannot see this conversation."]
TypeArg = Annotated[str, "Which kind of subagent to use (see the list of subagent types)."]
CriteriaArg = Annotated[list[str] | None, "Optional checkable conditions, e.g. 'file:/mnt/user-data/outputs/a.md "
                                          "non-empty' or 'tests_passed:pytest -q tests'."]
DescriptionArg = Annotated[str | None, "Optional short label shown while the subagent works (3-8 words)."]
Writer = Callable[[dict[str, Any]], None]


def run_context(runtime: ToolRuntime[Any]) -> RunContext:
    """The parent run's context, required by delegation (thread, files, sandbox, run id)."""
    context = runtime.context
    if not isinstance(context, RunContext):
        raise ToolFailure("delegation needs a RunContext as the graph context (thread, files, run id)",
                          code="subagents_unavailable")
    return context


def journal_sink(writer: Writer, task_id: str, label: str) -> Sink:
    """Turns a child's middleware records into the parent run's events."""
    def sink(key: str, data: dict[str, Any]) -> None:
        detail = {k: v for k, v in data.items() if k != "task_id"}
        if key == "tool_progress":
            writer({"type": "subagent", "task_id": task_id, "status": "running", "label": label, "detail": detail})
        elif key == "loop_detection":
            writer({"type": "notice", "kind": "loop_detected", "text": f"Subagent {label!r}: {detail.get('text', '')}",
                    "data": {"task_id": task_id, **(detail.get("data") or {})}})
        elif key == "tool_promotion":
            names = ", ".join(detail.get("names") or [])
            writer({"type": "notice", "kind": "tools_promoted", "text": f"Subagent {label!r} promoted: {names}",
                    "data": {"task_id": task_id, "names": detail.get("names") or []}})
    return sink


def settle(outcome: SubagentOutcome, context: RunContext, call_id: str) -> Command[Any]:
    """The ToolMessage and ledger entry of a finished delegation."""
    message = ToolMessage(content=outcome.result_text(), tool_call_id=call_id, name=TASK_TOOL,
                          status="success" if outcome.status == "completed" else "error",
                          artifact={"status": outcome.status, "subagent": outcome.to_dict()})
    return Command(update={"messages": [message], "delegations": [outcome.ledger_entry(context.run_id or None)]})


async def delegate(
    sub: SubagentRuntime, runtime: ToolRuntime[Any], *, prompt: str, subagent_type: str,
    acceptance_criteria: list[str] | None, description: str | None,
) -> Command[Any]:
    """Run one delegation for the ``task`` tool (see the module docstring)."""
    context = run_context(runtime)
    if not prompt.strip():
        raise ToolFailure("the prompt is empty: say what the subagent should do", code="invalid_argument")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise ToolFailure(f"the prompt is longer than {MAX_PROMPT_CHARS} characters; put long inputs in a file "
                          "under /mnt/user-data/workspace and point to it", code="invalid_argument")
    task_id, label = uuid.uuid4().hex[:12], label_for(description, prompt)
    writer: Writer = runtime.stream_writer

    def emit(status: str, detail: dict[str, Any]) -> None:
        writer({"type": "subagent", "task_id": task_id, "status": status, "label": label, "detail": detail})

    recorder = ParentLoopRecorder(asyncio.get_running_loop(), journal_sink(writer, task_id, label))
    job = SubagentJob(task_id, prompt, subagent_type, normalize_criteria(acceptance_criteria), label, context,
                      record=recorder.record_middleware, on_progress=lambda d: emit("running", d),
                      tool_call_id=runtime.tool_call_id, parent_state=runtime.state)
    prepared = sub.executor.prepare(job)
    emit("started", {"subagent_type": prepared.kind.name, "criteria": job.criteria})
    try:
        outcome = await sub.executor.execute(prepared)
    except asyncio.CancelledError:
        recorder.fence()
        emit("cancelled", {"subagent_type": prepared.kind.name, "stop_reason": "cancelled",
                           "receipt_log": [r.to_dict() for r in prepared.child.receipts.snapshot(interrupted=True)]})
        raise
    await recorder.drain()
    emit(outcome.status, outcome.summary_detail())
    return settle(outcome, context, runtime.tool_call_id or "")


def make_task_tool(
    bound: SubagentRuntime | None = None, *, types_text: str = "", receipts_enabled: bool = True,
    max_concurrent: int | None = None,
) -> BaseTool:
    """The ``task`` tool, unbound (host runtime from the context) or bound to ``bound``.

    Args:
        bound: The runtime to use; None = ``RunContext.services.subagents``.
        types_text: The subagent types, one per line, for the description.
        receipts_enabled: Whether reports carry ``[rN]`` citations (changes the description).
        max_concurrent: Per-response limit to state in the description.
    """

    async def atask(prompt: PromptArg, subagent_type: TypeArg, runtime: ToolRuntime[RunContext],
                    acceptance_criteria: CriteriaArg = None, description: DescriptionArg = None) -> Command[Any]:
        sub = bound or runtime_from_context(runtime.context)
        return await delegate(sub, runtime, prompt=prompt, subagent_type=subagent_type,
                              acceptance_criteria=acceptance_criteria, description=description)

    def task(prompt: PromptArg, subagent_type: TypeArg, runtime: ToolRuntime[RunContext],
             acceptance_criteria: CriteriaArg = None, description: DescriptionArg = None) -> Command[Any]:
        return _run_blocking(atask(prompt, subagent_type, runtime, acceptance_criteria, description))

    return StructuredTool.from_function(
        func=task, coroutine=atask, name=TASK_TOOL,
        description=task_description(types_text, receipts_enabled=receipts_enabled, max_concurrent=max_concurrent),
        metadata={SUBAGENT_TOOL_MARK: True},
    )


def _run_blocking(coro: Any) -> Any:
    """Run a delegation from a synchronous agent (no event loop in this thread)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    coro.close()
    raise ToolFailure("task cannot block inside a running event loop; invoke the agent asynchronously",
                      code="subagents_unavailable")


__all__ = ["SUBAGENT_TOOL_MARK", "TASK_TOOL", "delegate", "journal_sink", "make_task_tool", "run_context", "settle"]
