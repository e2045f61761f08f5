"""Running one subagent: prepare it, drive it on the controller loop, supervise it, settle it.

:meth:`SubagentExecutor.run` is the one path every delegation takes — the
``task`` tool and durable batch items alike:

1. **prepare** (caller's loop): resolve the type, the model (``inherit`` =
   the lead's), the tools and allowlists; build the execution's
   :class:`ChildRun` and context; reuse a compiled child graph when one
   fits (graphs are stateless; everything per-execution is in the context);
   snapshot the ``file_written`` targets;
2. **drive** (controller loop): stream the child graph from a single task
   message, forward its loop-detection and promotion records, keep its
   latest text;
3. **supervise** (caller's loop): poll the child; report usage as it grows;
   at the time limit, take the latest receipts *first*, then cancel the
   child — so a timed-out delegation still shows what it did; if the caller
   itself is cancelled, cancel the child too;
4. **settle**: check the acceptance criteria in the thread's sandbox, cross-
   check the report's citations against the receipts, return a
   :class:`SubagentOutcome`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.errors import GraphRecursionError
from langgraph.graph.state import CompiledStateGraph

from deerflow.config.schema import AppConfig
from deerflow.errors import ToolFailure, UserError
from deerflow.models.factory import ResolvedModel, create_chat_model
from deerflow.models.script_format import ModelError
from deerflow.runtime.context import RunContext
from deerflow.runtime.projection import message_text
from deerflow.sandbox.files.virtual_paths import VirtualFS
from deerflow.subagents.acceptance import (
    AcceptanceContext,
    AcceptanceReport,
    asnapshot_targets,
    check_acceptance,
)
from deerflow.subagents.child_agent import (
    ToolSourcesFactory,
    allowlist_layers,
    build_child_graph,
    child_context,
    child_middlewares,
    default_tool_sources,
    parent_skill_allowlist,
    resolve_child_tools,
)
from deerflow.subagents.child_run import ChildRun, Record
from deerflow.subagents.controller import SubagentController
from deerflow.subagents.outcome import SubagentOutcome, TerminalStatus
from deerflow.subagents.receipts import Receipt, check_citations
from deerflow.subagents.registry import SubagentRegistry, SubagentType
from deerflow.subagents.report_contract import child_system_prompt, child_task_message

logger = logging.getLogger(__name__)

CANCEL_GRACE_S = 2.0
Progress = Callable[[dict[str, Any]], None]


@dataclass
class SubagentJob:
    """One delegation to execute.

    Attributes:
        task_id: Unique id (ledger entry, events, batch item).
        prompt: The lead's instructions (the child sees nothing else of the parent).
        subagent_type: A registry type name.
        criteria: Acceptance criteria (checked by the harness afterwards).
        label: Progress label.
        parent: The delegating run's context (thread, files, services, run id).
        record: The parent-loop recorder's ``record_middleware`` (None: no journal).
        on_progress: Called on the caller's loop with usage as it grows.
        parent_state: The parent's graph state when known (its active skills' scope
            narrows the child's tools).
    """

    task_id: str
    prompt: str
    subagent_type: str
    criteria: list[str]
    label: str
    parent: RunContext
    record: Record | None = None
    on_progress: Progress | None = None
    tool_call_id: str | None = None
    parent_state: Any = None


@dataclass
class PreparedJob:
    job: SubagentJob
    kind: SubagentType
    child: ChildRun
    graph: CompiledStateGraph[Any, RunContext, Any, Any]
    context: RunContext
    acceptance: AcceptanceContext
    latest_text: str = ""


@dataclass
class _ChildResult:
    status: TerminalStatus
    stop_reason: str
    error: str | None = None
    receipts: list[Receipt] | None = None


class SubagentExecutor:
    """Executes delegations for one :class:`SubagentRuntime` (see module docstring).

    Compiled child graphs, resolved models and assembled tool lists are cached
    here (none holds per-execution state; tools are cached per config, model,
    sandbox and user, since building tool schemas costs far more than a child's
    own step).

    Args:
        controller: Where children run.
        config: Caller-owned config snapshot; None = each parent run's config.
        model: Explicit model for ``inherit`` types (else resolved by the parent's model name).
        tool_sources: How a child's tool sources are built.
        config_file: For error messages.
    """

    def __init__(self, controller: SubagentController, *, config: AppConfig | None = None,
                 model: ResolvedModel | None = None, tool_sources: ToolSourcesFactory = default_tool_sources,
                 config_file: str | None = None) -> None:
        self.controller = controller
        self.config = config
        self.model = model
        self.tool_sources = tool_sources
        self.config_file = config_file
        self._models: dict[tuple[int, str | None], ResolvedModel] = {}
        self._graphs: dict[tuple[Any, ...], CompiledStateGraph[Any, RunContext, Any, Any]] = {}
        self._tools: dict[tuple[Any, ...], list[BaseTool]] = {}

    def app_config(self, parent: RunContext) -> AppConfig:
        return self.config or parent.config

    def registry(self, parent: RunContext) -> SubagentRegistry:
        sandbox = parent.services.sandbox
        return SubagentRegistry.from_config(self.app_config(parent).subagents,
                                            bash_allowed=bool(sandbox is not None and sandbox.allows_bash))

    async def run(self, job: SubagentJob) -> SubagentOutcome:
        """Execute ``job`` to its outcome.

        Raises:
            ToolFailure: the delegation cannot start (unknown type, model problem).
            asyncio.CancelledError: the caller was cancelled (the child is cancelled too).
        """
        return await self.execute(self.prepare(job))

    async def execute(self, prep: PreparedJob) -> SubagentOutcome:
        """Drive, supervise and settle a prepared delegation (see :meth:`run`)."""
        job, started = prep.job, time.time()
        if job.criteria:  # before the child starts, off the loop (ToolFailure past its deadline: nothing started)
            acc = prep.acceptance
            acc.before = await asnapshot_targets(job.criteria, acc.vfs, offloader=acc.offloader, key=acc.key)
        future = self.controller.submit(self._drive(prep))
        result = await self._supervise(future, prep)
        receipts = result.receipts if result.receipts is not None else prep.child.receipts.snapshot()
        acceptance = (await check_acceptance(job.criteria, prep.acceptance)) if job.criteria \
            else AcceptanceReport(())
        enabled = prep.child.receipts_enabled
        turns, usage = prep.child.progress()
        return SubagentOutcome(
            task_id=job.task_id, subagent_type=prep.kind.name, label=job.label, status=result.status,
            stop_reason=result.stop_reason, report=prep.latest_text, receipts=receipts, acceptance=acceptance,
            citations=check_citations(prep.latest_text, receipts) if enabled else None, receipts_enabled=enabled,
            turns=turns, usage=usage, error=result.error, started_at=started, finished_at=time.time(),
            tool_call_id=job.tool_call_id,
        )

    # -- prepare (caller's loop) --------------------------------------------------------------
    def prepare(self, job: SubagentJob) -> PreparedJob:
        """Resolve everything the child needs; raises ToolFailure for what the lead can fix."""
        parent, config = job.parent, self.app_config(job.parent)
        kind = self.registry(parent).get(job.subagent_type)
        model = self._model(kind, parent, config)
        parent_skills = parent_skill_allowlist(parent, job.parent_state)
        child = ChildRun(job.task_id, kind.limits, allowlist_layers(kind, parent_skills),
                         config.subagents.receipts_enabled, job.record)
        tools = [t for t in self._available_tools(config, model, parent) if child.permits(t.name)]
        skills = [t.name for t in tools] if (parent_skills is not None or kind.skills is not None) else None
        context = child_context(parent, child, config=config, model_name=model.name, skill_allowlist=skills)
        key = (kind, model.name, id(model.model), tuple(t.name for t in tools), id(config),
               id(parent.services.sandbox), child.receipts_enabled)
        graph = self._graphs.get(key)
        if graph is None:
            prompt = child_system_prompt(kind.prompt, receipts_enabled=child.receipts_enabled)
            graph = self._graphs[key] = build_child_graph(model, tools, prompt, child_middlewares(config, parent.user_id))
        skills_root = parent.services.skills_root
        paths = parent.paths if parent.folders_ready else parent.paths.ensure()  # made off the loop before
        vfs = VirtualFS(paths, skills_root=Path(skills_root) if skills_root else None)
        acceptance = AcceptanceContext(parent.paths, vfs, parent.services.sandbox,
                                       {}, config.sandbox.command_timeout,  # before: taken in execute, off the loop
                                       offloader=parent.services.offloader, key=str(parent.thread_id))
        return PreparedJob(job, kind, child, graph, context, acceptance)

    def _available_tools(self, config: AppConfig, model: ResolvedModel, parent: RunContext) -> list[BaseTool]:
        mcp_run = parent.services.mcp_run  # its tools are the catalog's: stable across runs
        mcp_ids = tuple(id(t) for t in mcp_run.tools) if mcp_run is not None else ()
        key = (id(config), model.name, id(model.model), id(parent.services.sandbox), parent.user_id, mcp_ids)
        if key not in self._tools:
            self._tools[key] = resolve_child_tools(config, model, parent, sources=self.tool_sources)
        return self._tools[key]

    def _model(self, kind: SubagentType, parent: RunContext, config: AppConfig) -> ResolvedModel:
        if kind.model == "inherit" and self.model is not None:
            return self.model
        name = parent.model_name if kind.model == "inherit" else kind.model
        key = (id(config), name)
        if key not in self._models:
            try:
                self._models[key] = create_chat_model(config, name, config_file=self.config_file)
            except UserError as exc:
                raise ToolFailure(f"the model for subagent type {kind.name!r} is not available: {exc}",
                                  code="subagent_model_unavailable") from None
        return self._models[key]

    # -- drive (controller loop) --------------------------------------------------------------
    async def _drive(self, prep: PreparedJob) -> _ChildResult:
        child = prep.child
        inputs = {"messages": [HumanMessage(content=child_task_message(prep.job.prompt, prep.job.criteria))]}
        config: RunnableConfig = {"recursion_limit": child.limits.max_turns * 6 + 20,
                                  "metadata": {"run_id": prep.context.run_id, "subagent_type": prep.kind.name}}
        meter = prep.context.services.usage_meter  # the parent run's usage meter counts the child's calls
        if meter is not None:
            config["callbacks"] = meter.callbacks()
        try:
            async for mode, chunk in prep.graph.astream(inputs, config, context=prep.context,
                                                        stream_mode=["updates", "custom"]):
                if mode == "custom":
                    _forward_custom(child, chunk)
                elif text := _latest_ai_text(chunk):
                    prep.latest_text = text
        except (ModelError, UserError, ToolFailure) as exc:
            return _ChildResult("failed", "error", str(exc))
        except GraphRecursionError:
            return _ChildResult("failed", "turn_limit", "the subagent exceeded its step budget")
        except Exception as exc:  # a child's crash is its outcome; logged with context
            logger.exception("subagent %s (%s) failed", child.task_id, prep.kind.name)
            return _ChildResult("failed", "error", f"{type(exc).__name__}: {str(exc).strip()[:300]}")
        stop = child.stop_reason or "finished"
        return _ChildResult("completed" if stop == "finished" else "failed", stop)

    # -- supervise (caller's loop) ------------------------------------------------------------
    async def _supervise(self, future: concurrent.futures.Future[_ChildResult], prep: PreparedJob) -> _ChildResult:
        wrapped = asyncio.wrap_future(future)
        deadline = time.monotonic() + prep.child.limits.timeout_seconds
        poll = self.app_config(prep.job.parent).subagents.poll_interval
        shown: tuple[int, int, int] | None = (0, 0, 0)  # report only once there is progress
        try:
            while not wrapped.done():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return await _time_out(wrapped, prep)
                await asyncio.wait({wrapped}, timeout=min(poll, remaining))
                shown = _heartbeat(prep, shown)
        except asyncio.CancelledError:
            wrapped.cancel()
            raise
        if wrapped.cancelled():
            return _ChildResult("cancelled", "cancelled", receipts=prep.child.receipts.snapshot(interrupted=True))
        return wrapped.result()


async def _time_out(wrapped: asyncio.Future[_ChildResult], prep: PreparedJob) -> _ChildResult:
    """The safety timeout: keep the latest receipts, then cancel the child."""
    receipts = prep.child.receipts.snapshot(interrupted=True)
    prep.child.stop("time_limit")
    wrapped.cancel()
    await asyncio.wait({wrapped}, timeout=CANCEL_GRACE_S)
    limit = prep.child.limits.timeout_seconds
    return _ChildResult("timed_out", "time_limit", f"no result within {limit:g}s", receipts=receipts)


def _heartbeat(prep: PreparedJob, shown: tuple[int, int, int] | None) -> tuple[int, int, int] | None:
    """Report usage to the caller when it changed since the last report."""
    if prep.job.on_progress is None:
        return shown
    turns, usage = prep.child.progress()
    now = (turns, usage["total_tokens"], len(prep.child.receipts))
    if now != shown:
        prep.job.on_progress({"turns": turns, "usage": usage, "receipts": now[2]})
    return now


def _forward_custom(child: ChildRun, chunk: Any) -> None:
    """A child's own stream events that matter to its parent go through the recorder."""
    if not isinstance(chunk, Mapping):
        return
    kind = chunk.get("type")
    if kind == "notice" and chunk.get("kind") == "loop_detected":
        data = found if isinstance(found := chunk.get("data"), Mapping) else {}
        if data.get("action") == "stopped":
            child.stop("loop_detected")
        child.emit("loop_detection", {"text": str(chunk.get("text", "")), "data": dict(data)})
    elif kind in {"tool_promotion", "tools_promoted"}:
        child.emit("tool_promotion", {"names": list(chunk.get("names") or [])})


def _latest_ai_text(chunk: Any) -> str:
    """The text of the newest AI message in an ``updates`` chunk ("" if none)."""
    if not isinstance(chunk, Mapping):
        return ""
    text = ""
    for update in chunk.values():
        messages = update.get("messages") if isinstance(update, Mapping) else None
        for message in messages if isinstance(messages, list) else []:
            if isinstance(message, AIMessage) and message_text(message).strip():
                text = message_text(message)
    return text


__all__ = ["PreparedJob", "SubagentExecutor", "SubagentJob"]
