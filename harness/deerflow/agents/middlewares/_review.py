"""A middleware that inspects (and may rewrite) each model response, sync and async alike."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Awaitable, Callable

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse


class ResponseReviewMiddleware(AgentMiddleware):
    """Runs :meth:`review` on the response of every model call."""

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
