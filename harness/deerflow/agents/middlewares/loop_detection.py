"""Loop detection: notice when the model repeats itself, then stop it.

A model stuck in a loop calls the same tool with the same arguments again and
again, burning time and tokens.  Every model response is reviewed as it comes
back (``wrap_model_call``), before it is stored or any tool runs:

* a tool call's *signature* is its name plus its arguments as canonical JSON;
  counts are kept per run (``UntrackedValue`` channels are never checkpointed,
  so every run starts from zero);
* at ``warn_after`` identical calls the calls still run, and a warning is
  added to the conversation right before the next model call (``before_model``
  — after the tool results, where providers accept a user message); that
  call's review clears it, so it is shown once;
* at ``stop_after`` the response's tool calls are removed: the AIMessage keeps
  its text plus a note saying why, and without tool calls the run ends;
* independently, ``max_calls_per_tool`` caps how often one tool name may be
  called in a run; calls beyond it are answered with an error ToolMessage
  instead of running (the agent loop does not execute an answered call).

Warnings and stops are also reported to the user as ``notice`` events
(``kind="loop_detected"``).  LangChain's ``ToolCallLimitMiddleware`` counts one
tool name (or all tools together) per instance, so the per-name cap for any
tool lives here instead.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain.agents.middleware.types import AgentState, ExtendedModelResponse, PrivateStateAttr
from langchain_core.messages import AIMessage, ToolCall, ToolMessage
from langgraph.channels.untracked_value import UntrackedValue
from langgraph.runtime import Runtime
from langgraph.types import Command

from deerflow.agents.middlewares._review import ResponseReviewMiddleware
from deerflow.config.schema import LoopDetectionConfig
from deerflow.runtime.notes import NOTE_KEY, harness_note


class LoopDetectionState(AgentState):
    """Per-run counters (never checkpointed) and the warning waiting to be shown."""

    loop_call_counts: NotRequired[Annotated[dict[str, int], UntrackedValue, PrivateStateAttr]]
    loop_tool_counts: NotRequired[Annotated[dict[str, int], UntrackedValue, PrivateStateAttr]]
    loop_warning: NotRequired[Annotated[str | None, UntrackedValue, PrivateStateAttr]]


def call_signature(name: str, args: Mapping[str, Any]) -> str:
    """A short stable id of a tool call: its name and canonical arguments."""
    canonical = json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(f"{name}\0{canonical}".encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Repeat:
    """A tool call seen ``count`` times in this run."""

    name: str
    count: int


@dataclass
class LoopVerdict:
    """What one model response means for loops and limits."""

    call_counts: dict[str, int]
    tool_counts: dict[str, int]
    warn: list[Repeat] = field(default_factory=list)
    stop: list[Repeat] = field(default_factory=list)
    refused: list[ToolCall] = field(default_factory=list)


def assess(
    tool_calls: Sequence[ToolCall], call_counts: Mapping[str, int], tool_counts: Mapping[str, int],
    limits: LoopDetectionConfig,
) -> LoopVerdict:
    """Count the response's tool calls and decide: fine, warn, stop or refuse some."""
    verdict = LoopVerdict(dict(call_counts), dict(tool_counts))
    for call in tool_calls:
        signature = call_signature(call["name"], call.get("args") or {})
        count = verdict.call_counts[signature] = verdict.call_counts.get(signature, 0) + 1
        if count >= limits.stop_after:
            verdict.stop.append(Repeat(call["name"], count))
        elif count >= limits.warn_after:
            verdict.warn.append(Repeat(call["name"], count))
        used = verdict.tool_counts[call["name"]] = verdict.tool_counts.get(call["name"], 0) + 1
        if used > limits.max_calls_per_tool:
            verdict.refused.append(call)
    return verdict


def warning_text(repeats: Sequence[Repeat], stop_after: int) -> str:
    """The message the model sees after repeating a call ``warn_after`` times."""
    calls = ", ".join(f"`{r.name}` ({r.count} times)" for r in repeats)
    return (
        f"[Loop detection] You have made the same tool call with the same arguments repeatedly: {calls}. "
        "Repeating it will not give a different result. Change your approach: use different arguments, "
        "another tool, or finish with what you have. At "
        f"{stop_after} identical calls your tool calls will be removed and the run will end."
    )


def stop_note(repeats: Sequence[Repeat]) -> str:
    """The note appended to an answer whose tool calls were removed."""
    calls = ", ".join(f"`{r.name}` ({r.count} identical calls)" for r in repeats)
    return (
        f"[Stopped by loop detection: the agent kept repeating the same tool call: {calls}. "
        "Its tool calls were not run. Rephrase the request or give more guidance to continue.]"
    )


def refusal_text(name: str, limit: int) -> str:
    """The error the model sees for a call past the per-tool cap."""
    return (
        f"Error: `{name}` has already been called {limit} times in this run, the most allowed. "
        "This call was not run. Do not call it again; continue with another approach or finish."
    )


def strip_tool_calls(message: AIMessage, note: str) -> AIMessage:
    """``message`` without tool calls, its text kept and ``note`` appended."""
    text = message.text.strip()
    kwargs = {k: v for k, v in message.additional_kwargs.items() if k not in {"tool_calls", "function_call"}}
    kwargs[NOTE_KEY] = "loop_stopped"
    return message.model_copy(update={
        "content": f"{text}\n\n{note}" if text else note,
        "tool_calls": [], "invalid_tool_calls": [], "tool_call_chunks": [], "additional_kwargs": kwargs,
    })


class LoopDetectionMiddleware(ResponseReviewMiddleware):
    """Warns on repeated identical tool calls, then strips them; caps calls per tool."""

    state_schema = LoopDetectionState
    guard_name = "loop_detection"

    def __init__(self, limits: LoopDetectionConfig) -> None:
        super().__init__()
        self.limits = limits

    # shows the warning and writes nothing else: the review of the same model call clears it (so the
    # hook can run inside the model call, pre_model_call.py, where a second write of the key would clash)
    folds_into_model_call = True

    def before_model(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        warning = state.get("loop_warning")
        if not warning:
            return None
        return {"messages": [harness_note(warning, "loop_warning")]}

    async def abefore_model(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.before_model(state, runtime)

    def review(self, request: ModelRequest, response: ModelResponse) -> ModelResponse | ExtendedModelResponse:
        index = next((i for i in range(len(response.result) - 1, -1, -1)
                      if isinstance(response.result[i], AIMessage)), None)
        message = response.result[index] if index is not None else None
        state = request.state
        if index is None or not isinstance(message, AIMessage) or not message.tool_calls:
            shown = state.get("loop_warning")  # before this call: cleared, so it is shown once
            return ExtendedModelResponse(model_response=response, command=Command(update={"loop_warning": None})) \
                if shown else response
        verdict = assess(message.tool_calls, state.get("loop_call_counts") or {},
                         state.get("loop_tool_counts") or {}, self.limits)
        update: dict[str, Any] = {"loop_call_counts": verdict.call_counts, "loop_tool_counts": verdict.tool_counts,
                                  "loop_warning": None}  # the one shown before this call, if any
        result = list(response.result)
        if verdict.stop:
            note = stop_note(verdict.stop)
            result[index] = strip_tool_calls(message, note)
            self._notify(request, note, stopped=True, repeats=verdict.stop)
        else:
            if verdict.warn:
                update["loop_warning"] = warning_text(verdict.warn, self.limits.stop_after)
                self._notify(request, update["loop_warning"], stopped=False, repeats=verdict.warn)
            if verdict.refused:
                update["messages"] = [_refusal(call, self.limits.max_calls_per_tool) for call in verdict.refused]
        model_response = ModelResponse(result=result, structured_response=response.structured_response)
        return ExtendedModelResponse(model_response=model_response, command=Command(update=update))

    def _notify(self, request: ModelRequest, text: str, *, stopped: bool, repeats: Sequence[Repeat]) -> None:
        self.notify(request, kind="loop_detected", text=text, stopped=stopped,
                    data={"action": "stopped" if stopped else "warned",
                          "calls": [{"name": r.name, "count": r.count} for r in repeats]})


def _refusal(call: ToolCall, limit: int) -> ToolMessage:
    return ToolMessage(
        content=refusal_text(call["name"], limit), tool_call_id=call["id"] or "", name=call["name"],
        status="error", artifact={"status": "error", "code": "tool_call_limit"},
    )


