"""Run the pre-model hooks inside the model call: no pre-model superstep per agent step.

:mod:`~deerflow.agents.middlewares.fusion` put the ``before_model`` hooks (upload
announcements, the loop warning, the clarification end-of-turn check) into one graph
node, but that node is still a Pregel superstep with its own checkpoint write on every
agent step, one of three per step (``bench/harness_overhead.py``).

:func:`fold_before_model` moves them into the model node: :class:`PreModelCall`, the
outermost ``wrap_model_call``, runs the hooks in list order (each sees the state as the
previous ones left it), hands the model request the resulting messages and state, and
returns the hooks' messages *before* the model's answer in the node's update, so the
history reads exactly as before (note, then answer) and every key still goes through
its reducer.  A hook that jumps to the end (the clarification check: a question is
waiting for a person) ends the sequence and the model is not called: the node writes
the hooks' updates and ``jump_to="end"``, which the model node's own edge follows.

Only hooks that declare ``folds_into_model_call = True`` are folded; that declaration
is their promise that they only *append* messages, jump at most to ``"end"``, and write
no key that a ``wrap_model_call`` hook also writes (two writes of one channel in one
step).  A chain with any other ``before_model`` hook (an operator plugin's), or with
``after_model`` hooks (plan mode: its after-model node would run between the model node
and the jump), keeps the one pre-model node of :func:`~.fusion.fuse_before_model`.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse
from langchain_core.messages import AnyMessage, BaseMessage
from langgraph.types import Command

from deerflow.agents.middlewares.fusion import (
    HookSequence,
    _advance,
    _has_before_model,
    _jumps,
    _without_before_model,
    fuse_before_model,
)

FOLDABLE = "folds_into_model_call"
"""The class attribute by which a middleware's ``before_model`` hook declares it foldable (see the module doc)."""


@dataclass
class _PreModel:
    """What the hooks did so far: the state they see, the messages and other keys they wrote, a jump."""

    view: dict[str, Any]
    messages: list[AnyMessage] = field(default_factory=list)
    other: dict[str, Any] = field(default_factory=dict)
    jump: str | None = None

    def add(self, update: dict[str, Any] | None) -> bool:
        """Take one hook's update; True when it jumps (the sequence stops)."""
        if not update:
            return False
        written = update.get("messages")
        written = [] if written is None else written if isinstance(written, list) else [written]
        for message in written:  # ids now, so the state and the model request hold the same messages
            if isinstance(message, BaseMessage) and message.id is None:
                message.id = str(uuid.uuid4())
        self.view = _advance(self.view, update)
        self.messages += written
        self.other.update({k: v for k, v in update.items() if k not in ("messages", "jump_to")})
        self.jump = update.get("jump_to") or None
        return self.jump is not None

    def request(self, request: ModelRequest) -> ModelRequest:
        """``request`` as the model node would have built it from the hooks' state."""
        if not self.messages and not self.other:
            return request
        return request.override(messages=[*request.messages, *self.messages], state=cast(Any, self.view))

    def response(self, answer: ModelResponse | None) -> ModelResponse | ExtendedModelResponse:
        """The node's result: the hooks' messages before the answer (none when jumping), their keys, the jump."""
        result = [*self.messages, *(answer.result if answer else [])]
        response = ModelResponse(result=result, structured_response=answer.structured_response if answer else None)
        update = {**self.other, **({"jump_to": self.jump} if self.jump else {})}
        return ExtendedModelResponse(model_response=response, command=Command(update=update)) if update else response


class PreModelCall(HookSequence):
    """Runs the ``before_model`` hooks of ``parts`` at the start of the model call (see the module doc)."""

    @property
    def name(self) -> str:
        return "PreModel"

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse | ExtendedModelResponse:
        pre = _PreModel(dict(request.state))
        for part in self.parts:
            hook = part.__class__.before_model
            if hook is not AgentMiddleware.before_model and pre.add(
                    part.before_model(cast(AgentState, pre.view), request.runtime)):
                return pre.response(None)
        return pre.response(handler(pre.request(request)))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse | ExtendedModelResponse:
        pre = _PreModel(dict(request.state))
        for part in self.parts:
            cls = part.__class__
            if cls.abefore_model is not AgentMiddleware.abefore_model:
                update = await part.abefore_model(cast(AgentState, pre.view), request.runtime)
            elif cls.before_model is not AgentMiddleware.before_model:
                update = part.before_model(cast(AgentState, pre.view), request.runtime)
            else:
                continue
            if pre.add(update):
                return pre.response(None)
        return pre.response(await handler(pre.request(request)))


def _foldable(chain: Sequence[AgentMiddleware[Any, Any]], parts: Sequence[AgentMiddleware[Any, Any]]) -> bool:
    return (all(getattr(m, FOLDABLE, False) and set(_jumps(m)) <= {"end"} for m in parts)
            and not any(_has_before_model(m, "after_model") for m in chain))


def fold_before_model(chain: Sequence[AgentMiddleware[Any, Any]]) -> list[AgentMiddleware[Any, Any]]:
    """``chain`` with its ``before_model`` hooks run by the model call, or in one node when they cannot be.

    :class:`PreModelCall` goes first (the outermost ``wrap_model_call``: every other
    model hook sees the state and messages the pre-model hooks left, as it did when they
    were a node of their own).
    """
    parts = [m for m in chain if _has_before_model(m)]
    if not parts:
        return list(chain)
    if not _foldable(chain, parts):
        return fuse_before_model(chain)
    return [PreModelCall(parts), *(_without_before_model(m) if m in parts else m for m in chain)]


__all__ = ["FOLDABLE", "PreModelCall", "fold_before_model"]
