"""Every model request of a run goes to the run's own chat model.

The lead agent's compiled graph is shared by runs that would build the same
graph (:mod:`deerflow.agents.graph_cache`), and ``create_agent`` binds the model
it was built with into its model node.  This middleware, the outermost
``wrap_model_call``, swaps in the model of the run being served
(``RunContext.chat_model``), so a cached graph never answers with an earlier run's
model instance (a recording model, a model's per-instance call log, its client).
Without a run model in the context (a graph built for one run only) the request
is left as it is.  Around the call it names the thread's history, so that
LangChain's per-call walks over the request read only what is new
(:mod:`deerflow.agents.model_passes`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse

from deerflow.agents.model_passes import history_for_model


def _run_model(request: ModelRequest) -> Any:
    return getattr(getattr(request.runtime, "context", None), "chat_model", None)


class RunModelMiddleware(AgentMiddleware):
    """Puts the run's chat model into each model request (outermost ``wrap_model_call``)."""

    def _for_run(self, request: ModelRequest) -> ModelRequest:
        model = _run_model(request)
        return request if model is None or model is request.model else request.override(model=model)

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> Any:
        with history_for_model(request.state.get("messages")):
            return handler(self._for_run(request))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> Any:
        with history_for_model(request.state.get("messages")):
            return await handler(self._for_run(request))
