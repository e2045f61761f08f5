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
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, NotRequired

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain.agents.middleware.types import AgentState, ExtendedModelResponse
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


class SummarizationMiddleware(AgentMiddleware):
    """Projects the thread summary into requests and summarizes when a trigger is crossed."""

    state_schema = SummarizationState

    def __init__(self, policy: SummaryPolicy, summarizer: Summarizer) -> None:
        super().__init__()
        self.policy = policy
        self.summarizer = summarizer

    def _due(self, request: ModelRequest) -> Compaction | None:
        state = request.state
        if not self.policy.automatic:
            return None
        summary, through = state.get("summary_text"), state.get("summarized_through")
        if not self.policy.should_summarize(live_messages(request.messages, through), summary):
            return None
        return plan_compaction(state.get("messages") or [], through, self.policy.keep_messages)

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
    if policy.automatic or always_write:
        writer = summarization_model(app_config, model, config_file=config_file)
    return policy, Summarizer(writer.model if writer else None, max_chars=policy.summary_chars)


def build_summarization(app_config: AppConfig, model: ResolvedModel | None, *,
                        config_file: str | None = None) -> SummarizationMiddleware:
    """The middleware for a run on ``model`` with the ``summarization`` config."""
    return SummarizationMiddleware(*summarization_setup(app_config, model, config_file=config_file))
