"""Executing one run: stream the graph, project events, settle the outcome.

Kept apart from the run manager so the path from a prompt to events reads in
one place: build input → stream with ``messages``/``updates``/``custom`` →
project → decide the final status → publish ``run_finished``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import StreamMode

from deerflow.agents import invalid_calls, model_passes
from deerflow.agents.lead_agent import LeadAgent
from deerflow.agents.middlewares import run_start_input
from deerflow.errors import UserError, first_line
from deerflow.models.script_format import ModelError
from deerflow.runs.deliverables import DeliveryWatch
from deerflow.runs.stream_seen import install as install_incremental_seen
from deerflow.runtime import events as ev
from deerflow.runtime.context import RunContext
from deerflow.runtime.projection import Projector
from deerflow.runtime.usage import BUDGET_GUARD, TokenBudgetExceeded

logger = logging.getLogger(__name__)

STREAM_MODES: list[StreamMode] = ["values", "messages", "updates", "custom"]
Publish = Callable[[ev.Event], Awaitable[None]]
PublishRaw = Callable[[str, Any], Awaitable[None]]


@dataclass
class Outcome:
    status: ev.RunStatus
    error: str | None
    projector: Projector
    receipt: dict[str, Any] | None = None
    stopped_by: str | None = None  # the guard that ended the run (status ``stopped``)


def guard_stop(event: Any) -> tuple[str, str] | None:
    """``(guard, reason)`` when ``event`` is a guard's notice that it ended the run."""
    if not isinstance(event, ev.Notice):
        return None
    guard = event.data.get(ev.STOPPED_BY)
    if not isinstance(guard, str) or not guard or "task_id" in event.data:  # a subagent's stop ends only it
        return None
    return guard, first_line(Exception(event.text)).strip("[] ") or f"{guard} ended the run"


def graph_config(context: RunContext) -> RunnableConfig:
    """The LangGraph config of a run: only the thread id is persisted in checkpoints."""
    recursion_limit = int(context.options.recursion_limit or 200)
    config: RunnableConfig = {"configurable": {"thread_id": context.thread_id}, "recursion_limit": recursion_limit,
                              "metadata": {"run_id": context.run_id}}
    meter = context.services.usage_meter  # meters every model call of the run (subagents inherit it)
    if meter is not None:
        config["callbacks"] = meter.callbacks()
    return config


async def _ignore_raw(mode: str, chunk: Any) -> None:
    del mode, chunk


async def execute_run(
    lead: LeadAgent, context: RunContext, prompt: str, publish: Publish, publish_raw: PublishRaw = _ignore_raw,
    *, notes: Sequence[Mapping[str, str]] = (),
) -> Outcome:
    """Run the lead agent on ``prompt`` and publish every event; never raises for run failures.

    Raw LangGraph chunks go to ``publish_raw`` first (the HTTP API forwards them), then
    the typed events projected from them go to ``publish``.  Whatever the outcome
    (success, error, cancel), the run ends with its ``workspace_changes`` and, when
    outputs went unpresented, a ``notice``; the delivery receipt rides on the outcome.
    """
    install_incremental_seen()  # once per process (see stream_seen)
    invalid_calls.install()  # likewise (see agents.invalid_calls, agents.model_passes)
    model_passes.install()
    watch = DeliveryWatch(context.paths, new_thread=lead.new_thread)
    outcome = await _stream_run(lead, context, prompt, publish, publish_raw, watch, notes)
    settled = await watch.asettle(outcome.projector)
    for event in settled.events:
        await publish(event)
    outcome.receipt = settled.receipt.to_dict() if settled.receipt else None
    return outcome


async def _stream_run(
    lead: LeadAgent, context: RunContext, prompt: str, publish: Publish, publish_raw: PublishRaw,
    watch: DeliveryWatch, notes: Sequence[Mapping[str, str]],
) -> Outcome:
    projector = Projector(run_id=context.run_id, thread_id=context.thread_id)
    await publish(projector.make(
        ev.RunStarted, model=lead.model.name, offline=lead.model.offline, notice=lead.model.notice,
        interaction_mode=context.interaction_mode,
    ))
    for note in notes:  # the host's notes about this run (an edited config picked up...)
        await publish(projector.make(ev.Notice, kind=note["kind"], text=note["text"]))
    message = HumanMessage(content=prompt)
    inputs: dict[str, Any] = {"messages": [message]}
    if lead.new_thread:  # the thread's first run: what its run-start hooks would write comes with the input
        inputs |= run_start_input(context.config, message)
        projector.title = inputs.get("title")
    stop: tuple[str, str] | None = None
    try:
        await watch.start()
        async for mode, chunk in lead.graph.astream(
            inputs, graph_config(context), context=context, stream_mode=STREAM_MODES
        ):
            await publish_raw(mode, chunk)
            for event in projector.feed(mode, chunk):
                stop = stop or guard_stop(event)
                await publish(event)
    except asyncio.CancelledError:
        return Outcome("cancelled", None, projector)
    except TokenBudgetExceeded as exc:  # raised before a model call: no tool is cut
        await publish(projector.make(ev.Notice, kind=BUDGET_GUARD, text=str(exc), data={ev.STOPPED_BY: BUDGET_GUARD}))
        return Outcome("stopped", str(exc), projector, stopped_by=BUDGET_GUARD)
    except UserError as exc:
        await publish(projector.make(ev.Error, kind="user", message=str(exc)))
        return Outcome("error", str(exc), projector)
    except ModelError as exc:  # the model's failure, named and classified: one log line, no traceback
        message = model_error_message(exc)
        logger.warning("run %s on thread %s failed: %s", context.run_id, context.thread_id, " | ".join(
            line.strip() for line in message.splitlines() if line.strip()))
        logger.debug("run %s: the model call's traceback", context.run_id, exc_info=exc)
        await publish(projector.make(ev.Error, kind="model", message=message))
        return Outcome("error", message, projector)
    except Exception as exc:
        logger.exception("run %s on thread %s failed", context.run_id, context.thread_id)
        message = f"{type(exc).__name__}: {first_line(exc)}"
        await publish(projector.make(ev.Error, kind="runtime", message=message))
        return Outcome("error", message, projector)
    if projector.clarification is not None:
        return Outcome("interrupted", None, projector)
    if stop is not None:
        guard, reason = stop
        return Outcome("stopped", reason, projector, stopped_by=guard)
    return Outcome("success", None, projector)


def model_error_message(exc: BaseException, limit: int = 2_000) -> str:
    """The whole message of a model failure (every line of the provider's words), bounded."""
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"

