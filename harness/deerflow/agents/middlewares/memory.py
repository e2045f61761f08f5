"""Memory injection: the user's relevant facts as a data block of the system prompt.

The block (:func:`deerflow.memory.prompt.memory_block`) is computed once per
run, from the store of the host's memory service, ranked against the run's
user message, and added to every model request of the run — the request gets
it, the stored history does not.  A run with ``memory: false`` (``--no-memory``)
or a host without a memory service gets nothing.  Learning from the run is not
this middleware's job: the host queues extraction after the run has settled.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain_core.messages import HumanMessage

from deerflow.agents.middlewares.skill_activation import with_section
from deerflow.memory.service import MemoryService, memory_enabled
from deerflow.runtime.context import RunContext
from deerflow.runtime.notes import note_kind
from deerflow.runtime.projection import message_text

MAX_RUNS_REMEMBERED = 256  # runs whose block one middleware keeps (more than run at once)


def _query(request: ModelRequest[RunContext]) -> str:
    """The user's latest own message (harness notes are not the user's words)."""
    for message in reversed(request.state.get("messages", [])):
        if isinstance(message, HumanMessage) and note_kind(message) is None:
            return message_text(message)
    return ""


def _service(request: ModelRequest[RunContext]) -> MemoryService | None:
    context = request.runtime.context
    if context is None or not memory_enabled(context.options):
        return None
    service = context.services.memory
    return service if isinstance(service, MemoryService) else None


class MemoryMiddleware(AgentMiddleware[AgentState[Any], RunContext]):
    """Adds the ``<user_memory>`` block to each model request of a run."""

    def __init__(self) -> None:
        super().__init__()
        self._blocks: OrderedDict[str, str] = OrderedDict()  # run id -> block (one store read per run)

    def _remember(self, run_id: str, block: str) -> str:
        """Keep the run's block; the oldest runs' are forgotten (a cached graph serves many runs)."""
        self._blocks[run_id] = block
        while len(self._blocks) > MAX_RUNS_REMEMBERED:
            self._blocks.popitem(last=False)
        return block

    def _with_block(self, request: ModelRequest[RunContext], block: str) -> ModelRequest[RunContext]:
        return request.override(system_message=with_section(request.system_message, block)) if block else request

    def _cached(self, request: ModelRequest[RunContext]) -> tuple[MemoryService | None, str, str | None]:
        service = _service(request)
        run_id = getattr(request.runtime.context, "run_id", "") if service else ""
        return service, run_id, self._blocks.get(run_id)

    def wrap_model_call(self, request: ModelRequest[RunContext], handler: Callable[[ModelRequest[RunContext]], ModelResponse]) -> Any:
        service, run_id, block = self._cached(request)
        if service is None:
            return handler(request)
        if block is None:
            context = request.runtime.context
            block = self._remember(run_id, service.block_for(
                context.user_id, context.options.agent_name, _query(request), config=context.config))
        return handler(self._with_block(request, block))

    async def awrap_model_call(
        self, request: ModelRequest[RunContext], handler: Callable[[ModelRequest[RunContext]], Awaitable[ModelResponse]]
    ) -> Any:
        service, run_id, block = self._cached(request)
        if service is None:
            return await handler(request)
        if block is None:
            context = request.runtime.context
            block = self._remember(run_id, await service.prompt_block(
                context.user_id, context.options.agent_name, _query(request), config=context.config))
        return await handler(self._with_block(request, block))
