"""``BaseChatModel``'s walks over a request's messages, incremental on the thread's history.

Every model call makes LangChain walk the whole request three times before the provider
sees it: ``_convert_input`` converts each item and validates the list into a
``ChatPromptValue``, ``_format_for_tracing`` copies image and file blocks into the shape
the callbacks expect, and ``_normalize_messages`` converts older content blocks to v1.
Each maps every message on its own, and on a long thread every message but the newest
few was mapped the same way at the previous call: a per-step cost that grew with the
thread, even with tracing off.

During a DeerFlow model call (:func:`history_for_model`, set by
``RunModelMiddleware``) the thread's history is known: the ``IndexedMessages`` list of
the model node's state.  When a request holds exactly that history (compared item by
item at C speed: the same messages, or equal ones) after at most a system message and
before any notes, the stand-ins below map only the messages around it, reuse the
history's items as they are, and redo the few history messages the walk changes (their
positions are remembered per lineage, read incrementally: ``agents.lineage``).  Because
each walk maps each message independently, the result equals LangChain's own on the
whole request; anything else (no DeerFlow call, another list, another model call inside
this one) goes to LangChain's function unchanged.  Installed once per process; tests
compare every stand-in with the original on the same requests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from langchain_core.messages import BaseMessage, convert_to_messages
from langchain_core.prompt_values import ChatPromptValue, PromptValue

from deerflow.agents.lineage import LineageMemo, lineage_of

Walk = Callable[[Any], list[BaseMessage]]

_HISTORY: ContextVar[Sequence[Any] | None] = ContextVar("deerflow_model_history", default=None)


@contextmanager
def history_for_model(messages: Any) -> Iterator[None]:
    """Within this block, model requests that carry ``messages`` (a thread's history) take the fast path."""
    token = _HISTORY.set(messages if messages and lineage_of(messages) is not None else None)
    try:
        yield
    finally:
        _HISTORY.reset(token)


def locate(request: Any) -> tuple[Sequence[Any], int, int] | None:
    """``(history, start, end)`` when ``request[start:end]`` is the history of the current model call."""
    history = _HISTORY.get()
    if history is None or type(request) is not list:
        return None
    size = len(history)
    for start in (1, 0):  # after the system message, or first
        end = start + size
        if len(request) >= end and request[start] is history[0] and request[end - 1] is history[-1] \
                and request[start:end] == history:
            return history, start, end
    return None


class PerMessageWalk:
    """A LangChain walk that maps each message on its own, done for the messages around the history."""

    def __init__(self, original: Walk) -> None:
        self.original = original
        self.memo = LineageMemo(list, self._read)  # per lineage: history positions the walk changes

    def _read(self, changed: list[int], messages: Sequence[Any], start: int) -> None:
        tail = list(messages[start:])
        changed.extend(start + i for i, (out, item) in enumerate(zip(self.original(tail), tail, strict=True))
                       if out is not item)

    def __call__(self, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        where = locate(messages)
        known, changed = self.memo.advance(where[0], tuple) if where is not None else (False, None)
        if where is None or not known or changed is None:
            return self.original(messages)
        _, start, end = where
        out = [*self.original(messages[:start]), *messages[start:end], *self.original(messages[end:])]
        for position in changed:
            out[start + position] = self.original([messages[start + position]])[0]
        return out


def convert_input(original: Callable[[Any, Any], PromptValue]) -> Callable[[Any, Any], PromptValue]:
    """``BaseChatModel._convert_input`` converting only the items around the history.

    The history's items are messages already (the channel's reducer coerced them), which
    ``convert_to_messages`` returns as they are and the prompt value's validation accepts
    as they are, so the value is built from them without a second walk.
    """

    def _convert_input(self: Any, model_input: Any) -> PromptValue:
        where = locate(model_input)
        if where is None:
            return original(self, model_input)
        _, start, end = where
        messages = [*convert_to_messages(model_input[:start]), *model_input[start:end],
                    *convert_to_messages(model_input[end:])]
        return ChatPromptValue.model_construct(messages=messages)

    vars(_convert_input)["__wrapped__"] = original
    return _convert_input


_installed = False


def install() -> None:
    """Put the stand-ins into ``langchain_core``'s chat model module (idempotent)."""
    global _installed
    if _installed:
        return
    from langchain_core.language_models import chat_models

    module: Any = chat_models  # private names, replaced by stand-ins that call them
    module._format_for_tracing = PerMessageWalk(module._format_for_tracing)
    module._normalize_messages = PerMessageWalk(module._normalize_messages)
    module.BaseChatModel._convert_input = convert_input(module.BaseChatModel._convert_input)
    _installed = True
