"""Builds a thread's owed skills view before the tool calls that need it run.

A run on a thread that has no skills view yet does not copy the skills at its start
(:mod:`deerflow.skills.projection`): its paths owe the view, and whatever mounts or reads
``/mnt/skills`` builds it first.  Most runs never do, and pay nothing.

Built by the tools themselves, the first answer that calls two of them at once (two
``python`` cells) would have both wait for one build, and the second could then reach the
kernel first: ``answer * 2`` before ``answer = 6 * 7``.  So this hook builds it once, in
the model call, as soon as the answer calls a tool marked as reading the view
(:func:`~deerflow.skills.projection.reading_the_view`: the file, exec and subagent
tools), off the event loop, before the tools node starts any of them.  The tools' own
calls to :meth:`~deerflow.config.paths.ThreadPaths.ready_skills_view` stay, for calls
that do not come from a model answer (a consent replay, a tool invoked directly).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage

from deerflow.persistence.offloop import off_loop
from deerflow.skills.projection import VIEW_DEADLINE_S, reads_the_view


def _owing_paths(request: ModelRequest) -> Any:
    paths = getattr(getattr(request.runtime, "context", None), "paths", None)
    return paths if paths is not None and getattr(paths, "owes_skills_view", False) else None


def _answers(response: Any) -> Iterable[AIMessage]:
    inner = getattr(response, "model_response", response)  # an ExtendedModelResponse wraps one
    messages = inner.result if isinstance(inner, ModelResponse) else [inner]
    return (m for m in messages if isinstance(m, AIMessage))


def _calls_a_view_reader(request: ModelRequest, response: Any) -> bool:
    called = {call["name"] for message in _answers(response) for call in message.tool_calls}
    return bool(called) and any(reads_the_view(t) for t in request.tools if getattr(t, "name", None) in called)


class SkillsViewMiddleware(AgentMiddleware):
    """After the model answers: the run's owed view, built when a tool it calls reads it."""

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> Any:
        response = handler(request)
        paths = _owing_paths(request)
        if paths is not None and _calls_a_view_reader(request, response):
            paths.ready_skills_view()
        return response

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> Any:
        response = await handler(request)
        paths = _owing_paths(request)
        if paths is not None and _calls_a_view_reader(request, response):
            await off_loop(paths.ready_skills_view, what="building the thread's skills view",
                           deadline=VIEW_DEADLINE_S)
        return response


__all__ = ["SkillsViewMiddleware"]
