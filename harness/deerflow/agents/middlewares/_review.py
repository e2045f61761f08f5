"""A middleware that inspects (and may rewrite) each model response, sync and async alike.

Such a middleware is a *guard*: when it ends the run (strips the tool calls that
would continue it), it says so with :meth:`ResponseReviewMiddleware.notify`
and ``stopped=True``; the run then finishes with status ``stopped`` and the
guard's name (:mod:`deerflow.runs.execution`) instead of ``success``.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse

STOPPED_BY = "stopped_by"  # deerflow.runtime.events.STOPPED_BY: the notice data key naming the guard


class ResponseReviewMiddleware(AgentMiddleware):
    """Runs :meth:`review` on the response of every model call.

    ``guard_name`` is the name a stopped run reports (``stopped_by``).
    """

    guard_name: str = "guard"

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse | ExtendedModelResponse:
        return self.review(request, handler(request))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse | ExtendedModelResponse:
        return self.review(request, await handler(request))

    @abstractmethod
    def review(self, request: ModelRequest, response: ModelResponse) -> ModelResponse | ExtendedModelResponse:
        """The response to use instead of ``response`` (the same object when nothing changes)."""

    def notify(self, request: ModelRequest, *, kind: str, text: str, data: Mapping[str, Any],
               stopped: bool = False) -> None:
        """Tell the user (a ``notice`` event); ``stopped`` marks that this guard ended the run."""
        runtime = request.runtime
        if runtime is None:
            return
        payload = dict(data)
        if stopped:
            payload[STOPPED_BY] = self.guard_name
        runtime.stream_writer({"type": "notice", "kind": kind, "text": text, "data": payload})
