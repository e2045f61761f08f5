"""Summarization: keep a long thread within the model's context window.

The policy (triggers, cuts, who writes the summary) is in
:mod:`deerflow.agents.summary`; this middleware applies it to every model
request (``wrap_model_call``, so it costs no extra graph step):

1. the request is projected: the thread's ``summary_text`` goes into the system
   prompt and only the messages after ``summarized_through`` are sent;
2. if that conversation crosses a trigger, older messages are folded into a new
   summary first, and the two channels are updated with the model's answer;
   a ``notice`` event (``kind="context_summarized"``) tells the user.

LangChain's ``SummarizationMiddleware`` is not used as is because it replaces
the stored messages with a summary message (``RemoveMessage``); here the
history stays whole and only requests are trimmed.  Its summary prompt is
reused.  The middleware is always in the chain, so a summary written by
``client.compact`` is honoured even when automatic summarization is off.

**Default trigger.**  With no trigger configured (and ``enabled`` not set to
false), a real model whose context window is known summarizes once a request
would fill :data:`DEFAULT_WINDOW_FRACTION` of the window, the system prompt and
the tool schemas counted in (on an 8k local model they are a large share).  The
rest is left for the answer and for the 4-characters-a-token estimate's error.
Offline models (scripted, replayed) get no default: their answers do not
depend on the conversation.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NotRequired

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain.agents.middleware.types import AgentState, ExtendedModelResponse
from langchain_core.messages import BaseMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.types import Command

from deerflow.agents.summary import (
    Compaction,
    Summarizer,
    Summary,
    SummaryPolicy,
    live_messages,
    plan_compaction,
    with_summary,
)
from deerflow.config.schema import AppConfig
from deerflow.errors import ConfigError
from deerflow.models.factory import ResolvedModel, create_chat_model
from deerflow.models.tokens import approximate_tokens

DEFAULT_WINDOW_FRACTION = 0.75


class SummarizationState(AgentState):
    """The summary and the id of the last message it covers."""

    summary_text: NotRequired[str]
    summarized_through: NotRequired[str]


def context_window_of(model: ResolvedModel) -> int | None:
    """The model's context window: its config entry's ``context_window``, else its profile."""
    if model.entry is not None and model.entry.context_window:
        return model.entry.context_window
    profile = getattr(model.model, "profile", None) or {}
    window = profile.get("max_input_tokens")
    return window if isinstance(window, int) and window > 0 else None


def summarized_notice(step: Compaction, summary: Summary) -> dict[str, Any]:
    """The ``notice`` event announcing a summarization during a run."""
    how = "a model-written" if summary.method == "model" else "an extractive"
    return {
        "type": "notice", "kind": "context_summarized",
        "text": f"Folded {len(step.messages)} earlier messages into {how} summary to stay within "
                "the model's context window; the full history is kept in the thread.",
        "data": {"messages": len(step.messages), "kept": step.kept, "method": summary.method},
    }


def request_overhead(request: ModelRequest) -> int:
    """Approximate tokens a request spends besides the conversation: system prompt and tool schemas."""
    system = [request.system_message] if request.system_message is not None else []
    return count_tokens_approximately(system) + _schema_tokens(request.tools)


def _schema_tokens(tools: Sequence[Any]) -> int:
    chars = 0
    for tool in tools:
        try:
            chars += len(json.dumps(tool if isinstance(tool, dict) else convert_to_openai_tool(tool)))
        except (TypeError, ValueError):  # a tool whose schema cannot be rendered: count its name only
            chars += len(str(getattr(tool, "name", tool)))
    return chars // 4


def messages_within(messages: Sequence[BaseMessage], tokens: int) -> int:
    """How many of the latest ``messages`` fit in ``tokens`` (at least 2: the last call and its result)."""
    used = kept = 0
    for message in reversed(messages):
        used += approximate_tokens((message,))  # each message counted once per thread, not once per request
        if used > tokens:
            break
        kept += 1
    return max(2, kept)


class SummarizationMiddleware(AgentMiddleware):
    """Projects the thread summary into requests and summarizes when a trigger is crossed.

    ``default_window`` (the model's context window) sets the default trigger of
    each request: :data:`DEFAULT_WINDOW_FRACTION` of it minus the request's
    system prompt and tool schemas, and keeps verbatim only the latest messages
    that fit in half of that.
    """

    state_schema = SummarizationState

    def __init__(self, policy: SummaryPolicy, summarizer: Summarizer, *, default_window: int | None = None) -> None:
        super().__init__()
        self.policy = policy
        self.summarizer = summarizer
        self.default_window = default_window

    def _policy_for(self, request: ModelRequest, live: Sequence[BaseMessage]) -> SummaryPolicy:
        """The configured policy, or the default one sized for this request (trigger and verbatim tail)."""
        if self.default_window is None:
            return self.policy
        budget = int(self.default_window * DEFAULT_WINDOW_FRACTION) - request_overhead(request)
        trigger = max(self.default_window // 8, budget)
        keep = min(self.policy.keep_messages, messages_within(live, trigger // 2))
        return dataclasses.replace(self.policy, trigger_tokens=trigger, keep_messages=keep)

    def _due(self, request: ModelRequest) -> Compaction | None:
        state = request.state
        summary, through = state.get("summary_text"), state.get("summarized_through")
        live = live_messages(request.messages, through)
        policy = self._policy_for(request, live)
        if not policy.automatic or not policy.should_summarize(live, summary):
            return None
        return plan_compaction(state.get("messages") or [], through, policy.keep_messages)

    def _apply(self, request: ModelRequest, step: Compaction | None,
               written: Summary | None) -> tuple[ModelRequest, dict[str, Any] | None]:
        summary, through = request.state.get("summary_text"), request.state.get("summarized_through")
        update = None
        if step is not None and written is not None:
            summary, through = written.text, step.through_id
            update = {"summary_text": summary, "summarized_through": through}
            if request.runtime is not None:
                request.runtime.stream_writer(summarized_notice(step, written))
        if not summary and not through:
            return request, update
        projected = request.override(messages=live_messages(request.messages, through),
                                     system_message=with_summary(request.system_message, summary))
        return projected, update

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse | ExtendedModelResponse:
        step = self._due(request)
        written = self.summarizer.summarize(request.state.get("summary_text"), step.messages) if step else None
        projected, update = self._apply(request, step, written)
        response = handler(projected)
        return ExtendedModelResponse(response, Command(update=update)) if update else response

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse | ExtendedModelResponse:
        step = self._due(request)
        written = await self.summarizer.asummarize(request.state.get("summary_text"), step.messages) if step else None
        projected, update = self._apply(request, step, written)
        response = await handler(projected)
        return ExtendedModelResponse(response, Command(update=update)) if update else response


def summarization_model(app_config: AppConfig, model: ResolvedModel | None, *,
                        config_file: str | None = None) -> ResolvedModel | None:
    """The model that writes summaries: ``summarization.model_name``, else the run's."""
    name = app_config.summarization.model_name
    if name:
        return create_chat_model(app_config, name, config_file=config_file)
    return model


def summarization_setup(app_config: AppConfig, model: ResolvedModel | None, *, config_file: str | None = None,
                        always_write: bool = False) -> tuple[SummaryPolicy, Summarizer]:
    """The policy and summary writer for conversations with ``model``.

    The writing model is only resolved when something will write summaries:
    automatic summarization, or ``always_write`` (manual compaction).

    Raises:
        ConfigError: a fraction trigger without a known context window, or an
            unknown ``summarization.model_name``.
    """
    window = context_window_of(model) if model is not None else None
    try:
        policy = SummaryPolicy.from_config(app_config.summarization, context_window=window)
    except ValueError as exc:
        raise ConfigError(str(exc), file=config_file, key="summarization.trigger_fraction") from None
    writer = None
    if policy.automatic or always_write or default_window(app_config, model) is not None:
        writer = summarization_model(app_config, model, config_file=config_file)
    return policy, Summarizer(writer.model if writer else None, max_chars=policy.summary_chars)


def default_window(app_config: AppConfig, model: ResolvedModel | None) -> int | None:
    """The context window the default trigger is sized by; None when the default does not apply.

    It applies when summarization is not switched off, no trigger is configured,
    and the model is a real one whose window is known.
    """
    config = app_config.summarization
    if not config.enabled or config.has_trigger or model is None or model.offline:
        return None
    return context_window_of(model)


def build_summarization(app_config: AppConfig, model: ResolvedModel | None, *,
                        config_file: str | None = None) -> SummarizationMiddleware:
    """The middleware for a run on ``model`` with the ``summarization`` config."""
    policy, summarizer = summarization_setup(app_config, model, config_file=config_file)
    return SummarizationMiddleware(policy, summarizer, default_window=default_window(app_config, model))
