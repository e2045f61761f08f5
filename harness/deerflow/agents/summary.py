"""Conversation summaries: when to summarize, where to cut, what to write.

Shared by the summarization middleware (during runs) and thread compaction
(``client.compact``, between runs).  The decisions, in one place:

* **The stored history stays truthful.**  Nothing is removed from ``messages``.
  The summary lives in the ``summary_text`` channel and ``summarized_through``
  holds the id of the last message it covers.  Model requests carry the
  summary as a system-prompt section and only the messages after that id.
* **Cuts respect tool calls.**  A cut never separates an AIMessage's tool
  calls from their ToolMessages, and never removes the model's latest answer:
  it stays verbatim so the model continues from its own last words (and a
  scripted model still finds its turn stamp).
* **Triggers** are counted on what the model would be sent of the conversation
  (kept messages plus the summary); the system prompt and tool schemas are
  not counted, so a fraction of the context window should leave room for them.
  A ``trigger_fraction`` becomes a token threshold once the model's context
  window is known.
* **Who writes the summary.**  A real model writes it with LangChain's
  summary prompt.  A model that plays a script cannot summarize (it would
  answer with its next scripted turn), so the summary is *extractive*: the
  first lines of each message, deterministic and bounded.  The same fallback is
  used when a model fails with a :class:`ModelError` (e.g. a replay cassette
  recorded without that summary call).  :class:`Summary` says which was used.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain.agents.middleware.summarization import DEFAULT_SUMMARY_PROMPT
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    TextContentBlock,
    ToolMessage,
    get_buffer_string,
)
from langchain_core.runnables import RunnableConfig
from langgraph.constants import TAG_NOSTREAM

from deerflow.config.schema import SummarizationConfig
from deerflow.models.replay import RecordingChatModel
from deerflow.models.scripted import ModelError, ScriptedChatModel
from deerflow.models.tokens import approximate_tokens

logger = logging.getLogger(__name__)

EXTRACTIVE_HEADER = (
    "[Extractive summary: no model was available to write a summary, so these are the first "
    "lines of the earlier messages, oldest first.]"
)
MAX_EXTRACTIVE_CHARS = 4_000
_LINE_CHARS = {"user": 400, "assistant": 300, "tool": 200}


@dataclass(frozen=True)
class SummaryPolicy:
    """When to summarize and how much to keep verbatim."""

    trigger_tokens: int | None = None
    trigger_messages: int | None = None
    keep_messages: int = 20

    @classmethod
    def from_config(cls, config: SummarizationConfig, *, context_window: int | None) -> SummaryPolicy:
        """The policy of ``config``; a fraction trigger needs ``context_window``.

        Raises:
            ValueError: a fraction trigger but no known context window.
        """
        tokens = config.trigger_tokens
        if config.enabled and config.trigger_fraction is not None:
            if context_window is None:
                raise ValueError("trigger_fraction needs the model's context window: set context_window "
                                 "on the model entry, or use trigger_tokens")
            by_fraction = max(1, int(context_window * config.trigger_fraction))
            tokens = by_fraction if tokens is None else min(tokens, by_fraction)
        if not config.enabled:
            tokens = None
        return cls(tokens, config.trigger_messages if config.enabled else None, config.keep_messages)

    @property
    def summary_chars(self) -> int:
        """Size cap of an extractive summary: about a quarter of the token trigger."""
        return min(MAX_EXTRACTIVE_CHARS, self.trigger_tokens) if self.trigger_tokens else MAX_EXTRACTIVE_CHARS

    @property
    def automatic(self) -> bool:
        """Whether anything triggers a summary during runs."""
        return self.trigger_tokens is not None or self.trigger_messages is not None

    def should_summarize(self, messages: Sequence[BaseMessage], summary: str | None) -> bool:
        """Whether the conversation the model would see crosses a trigger."""
        if self.trigger_messages is not None and len(messages) >= self.trigger_messages:
            return True
        if self.trigger_tokens is None:
            return False
        return conversation_tokens(messages, summary) >= self.trigger_tokens


def conversation_tokens(messages: Sequence[BaseMessage], summary: str | None) -> int:
    """Approximate tokens of the messages plus the summary (4 characters a token)."""
    return approximate_tokens(messages) + math.ceil(len(summary or "") / 4)


def live_messages(messages: Sequence[AnyMessage], through_id: str | None) -> list[AnyMessage]:
    """The messages after ``through_id``: what a request still sends verbatim.

    Leading ToolMessages are dropped (their AIMessage was summarized; a request
    may hold such answers when a middleware patched them in).  An unknown id
    keeps everything: better a long request than lost context.
    """
    if not through_id:
        return list(messages)
    index = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].id == through_id), None)
    if index is None:
        return list(messages)
    kept = list(messages[index + 1 :])
    while kept and isinstance(kept[0], ToolMessage):
        kept.pop(0)
    return kept


def choose_cutoff(messages: Sequence[BaseMessage], keep: int) -> int:
    """How many leading messages to summarize (0: nothing can be).

    Keeps the last ``keep`` messages and the latest AIMessage, then moves the cut
    so no ToolMessage is separated from the AIMessage that called it.
    """
    if len(messages) <= keep:
        return 0
    cut = len(messages) - keep
    last_ai = next((i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], AIMessage)), None)
    if last_ai is not None:
        cut = min(cut, last_ai)
    return safe_cutoff(messages, cut)


def safe_cutoff(messages: Sequence[BaseMessage], cut: int) -> int:
    """``cut`` moved back to the AIMessage whose ToolMessages it would split."""
    if cut >= len(messages) or not isinstance(messages[cut], ToolMessage):
        return cut
    end = cut
    answered: set[str] = set()
    while end < len(messages) and isinstance(message := messages[end], ToolMessage):
        answered.add(message.tool_call_id)
        end += 1
    for i in range(cut - 1, -1, -1):
        message = messages[i]
        if isinstance(message, AIMessage) and answered & {c["id"] for c in message.tool_calls}:
            return i
    return end  # orphan answers: summarize them too


@dataclass(frozen=True)
class Compaction:
    """What one summarization step folds into the summary.

    Attributes:
        messages: The stored messages newly covered by the summary.
        through_id: Id of the last of them (the new ``summarized_through``).
        kept: How many messages remain verbatim after them.
    """

    messages: list[AnyMessage]
    through_id: str
    kept: int


def plan_compaction(stored: Sequence[AnyMessage], through_id: str | None, keep: int) -> Compaction | None:
    """The next summarization step for a stored history, None when nothing can be folded."""
    window = live_messages(stored, through_id)
    cut = choose_cutoff(window, keep)
    if cut <= 0 or not window[cut - 1].id:
        return None
    return Compaction(window[:cut], str(window[cut - 1].id), len(window) - cut)


def summary_section(summary: str) -> str:
    """The system-prompt block that carries the summary into requests."""
    return (
        "<conversation_summary>\n"
        "Earlier parts of this conversation were summarized to fit your context window. "
        "The summary below replaces those messages; rely on it, and re-read files if you need details.\n\n"
        f"{summary.strip()}\n"
        "</conversation_summary>"
    )


def with_summary(system: SystemMessage | None, summary: str | None) -> SystemMessage | None:
    """``system`` with the summary section appended (unchanged without a summary)."""
    if not summary:
        return system
    block: TextContentBlock = {"type": "text", "text": summary_section(summary)}
    if system is None:
        return SystemMessage(content_blocks=[block])
    return SystemMessage(content_blocks=[*system.content_blocks, {"type": "text", "text": "\n\n"}, block])


# -- writing summaries --------------------------------------------------------------


def extractive_summary(previous: str | None, messages: Sequence[BaseMessage], *,
                       max_chars: int = MAX_EXTRACTIVE_CHARS) -> str:
    """A deterministic summary: one line per message, oldest dropped first past ``max_chars``.

    The first user request is always kept (it states the goal).  A previous
    extractive summary contributes its lines; a model-written one becomes one line.
    """
    lines = _previous_lines(previous)
    lines.extend(line for m in messages if (line := _extract_line(m)))
    omitted = 0
    while len(lines) > 2 and sum(len(x) + 1 for x in lines) + len(EXTRACTIVE_HEADER) > max_chars:
        lines.pop(1)
        omitted += 1
    if omitted:
        lines.insert(1, f"- ({omitted} more lines omitted)")
    return "\n".join([EXTRACTIVE_HEADER, *lines])


def _previous_lines(previous: str | None) -> list[str]:
    if not previous:
        return []
    if previous.startswith(EXTRACTIVE_HEADER):
        return [x for x in previous.splitlines()[1:] if x.startswith("- ") and not x.startswith("- (")]
    return ["- earlier summary: " + _clip(previous, 1_500)]


def _extract_line(message: BaseMessage) -> str | None:
    text = message.text.strip()
    if isinstance(message, HumanMessage):
        return f"- user: {_clip(text, _LINE_CHARS['user'])}" if text else None
    if isinstance(message, AIMessage):
        calls = ", ".join(f"{c['name']}({_clip(_args(c['args']), 80)})" for c in message.tool_calls)
        said = _clip(text, _LINE_CHARS["assistant"]) if text else ""
        parts = [p for p in (said, f"called {calls}" if calls else "") if p]
        return f"- assistant: {' — '.join(parts)}" if parts else None
    if isinstance(message, ToolMessage):
        status = " (error)" if message.status == "error" else ""
        return f"- tool {message.name or '?'}{status}: {_clip(text, _LINE_CHARS['tool'])}"
    return None


def _args(args: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in args.items())


def _clip(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


Method = Literal["model", "extractive"]


@dataclass(frozen=True)
class Summary:
    """A written summary and how it was written."""

    text: str
    method: Method


def plays_script(model: BaseChatModel) -> bool:
    """Whether ``model`` answers from a script (and so cannot summarize)."""
    if isinstance(model, RecordingChatModel):
        model = model.inner
    return isinstance(model, ScriptedChatModel)


class Summarizer:
    """Writes summaries with a model, or extractively when the model cannot.

    Args:
        model: The summarization model; ``None`` (or a scripted model) means extractive.
        max_chars: Size cap of extractive summaries.
    """

    def __init__(self, model: BaseChatModel | None, *, max_chars: int = MAX_EXTRACTIVE_CHARS) -> None:
        self.model = None if model is None or plays_script(model) else model
        self.max_chars = max_chars

    def _prompt(self, previous: str | None, messages: Sequence[BaseMessage]) -> str:
        shown = list(messages)
        if previous:
            shown.insert(0, HumanMessage(content=f"Summary of the conversation before these messages:\n{previous}"))
        return DEFAULT_SUMMARY_PROMPT.format(messages=get_buffer_string(shown, format="xml")).rstrip()

    async def asummarize(self, previous: str | None, messages: Sequence[BaseMessage]) -> Summary:
        """Summarize ``messages``, folding in the ``previous`` summary."""
        if self.model is not None:
            try:
                answer = await self.model.ainvoke(self._prompt(previous, messages), config=_quiet())
                if answer.text.strip():
                    return Summary(answer.text.strip(), "model")
            except ModelError as exc:
                logger.warning("summarization model cannot summarize (%s); using an extractive summary", exc)
        return Summary(extractive_summary(previous, messages, max_chars=self.max_chars), "extractive")

    def summarize(self, previous: str | None, messages: Sequence[BaseMessage]) -> Summary:
        """Synchronous :meth:`asummarize`."""
        if self.model is not None:
            try:
                answer = self.model.invoke(self._prompt(previous, messages), config=_quiet())
                if answer.text.strip():
                    return Summary(answer.text.strip(), "model")
            except ModelError as exc:
                logger.warning("summarization model cannot summarize (%s); using an extractive summary", exc)
        return Summary(extractive_summary(previous, messages, max_chars=self.max_chars), "extractive")


def _quiet() -> RunnableConfig:
    """Config that keeps the summary call's tokens out of the run's message stream."""
    return {"tags": [TAG_NOSTREAM], "metadata": {"lc_source": "summarization"}}
