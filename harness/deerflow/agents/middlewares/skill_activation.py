"""Skill activation: record it, and tell the model what it means for this turn.

Which skills are active is derived from the conversation
(:func:`deerflow.skills.activation.active_skills`): a ``/skill-name`` opening
the turn, or a successful ``read_file`` of ``/mnt/skills/<name>/SKILL.md``
during it.  This middleware

* records each activation in ``skill_context`` (references only: name, path,
  description; never the body) — with the turn's first model call for a slash
  command, when the read's result comes back for a read;
* adds a ``<skill_context>`` section to each model request while a skill is
  active: the instructions of a slash-activated skill (the model has not read
  them), and the tool scope, including allowed tools missing from this session.

The request gets the section, the stored history does not, so the thread
stays a truthful record of what the user and the tools said.  Enforcement of
the scope is :mod:`.skill_policy`'s job.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from fnmatch import fnmatchcase
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse, ToolCallRequest
from langchain_core.messages import SystemMessage, TextContentBlock, ToolMessage
from langgraph.types import Command

from deerflow.agents.thread_state import SkillReference
from deerflow.skills.activation import (
    SKILL_READER,
    ActiveSkills,
    active_skills,
    skill_manifest_name,
)
from deerflow.skills.catalog import Skill
from deerflow.skills.prompt import active_skill_section
from deerflow.skills.run import run_skills_of

Result = ToolMessage | Command[Any]


def skill_reference(skill: Skill) -> SkillReference:
    """The ``skill_context`` entry for ``skill``."""
    return {"name": skill.name, "path": skill.virtual_manifest, "description": skill.description}


def tool_names(tools: list[Any]) -> list[str]:
    """Names of the tools in a model request (BaseTool or provider dicts)."""
    names = []
    for t in tools:
        name = t.get("name") if isinstance(t, dict) else getattr(t, "name", None)
        if isinstance(name, str):
            names.append(name)
    return names


def request_section(request: ModelRequest, active: ActiveSkills) -> str:
    """The ``<skill_context>`` text for a request while ``active`` skills are active."""
    scope = active.scope()
    present = tool_names(request.tools)
    missing = [p for p in scope.allowed or () if not any(fnmatchcase(n, p) for n in present)]
    return active_skill_section(slash=active.slash, read=active.read, allowed=scope.allowed, missing=missing)


def with_section(system: SystemMessage | None, text: str) -> SystemMessage:
    """``system`` with ``text`` appended as its own block."""
    block: TextContentBlock = {"type": "text", "text": text}
    if system is None:
        return SystemMessage(content_blocks=[block])
    return SystemMessage(content_blocks=[*system.content_blocks, {"type": "text", "text": "\n\n"}, block])


class SkillActivationMiddleware(AgentMiddleware):
    """Records activations in ``skill_context`` and shows active skills to the model."""

    def _project(self, request: ModelRequest) -> tuple[ModelRequest, Command[Any] | None]:
        """The request with the ``<skill_context>`` section, and the slash activation to record.

        A slash activation is recorded with the turn's first model call (no
        extra graph step); later calls of the turn find it recorded.
        """
        skills = run_skills_of(request.runtime.context)
        if skills is None:
            return request, None
        messages = request.state.get("messages", [])
        active = active_skills(messages, skills.by_name)
        if not active.all:
            return request, None
        record = None
        if active.slash is not None and not active.answered:
            record = Command(update={"skill_context": [skill_reference(active.slash)]})
        section = request_section(request, active)
        return request.override(system_message=with_section(request.system_message, section)), record

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse | ExtendedModelResponse:
        projected, record = self._project(request)
        response = handler(projected)
        return ExtendedModelResponse(response, record) if record else response

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse | ExtendedModelResponse:
        projected, record = self._project(request)
        response = await handler(projected)
        return ExtendedModelResponse(response, record) if record else response

    def _recorded(self, request: ToolCallRequest, result: Result) -> Result:
        call = request.tool_call
        if call["name"] != SKILL_READER or not isinstance(result, ToolMessage) or result.status == "error":
            return result
        skills = run_skills_of(request.runtime.context)
        skill = skills.by_name.get(skill_manifest_name(call["args"].get("path")) or "") if skills else None
        if skill is None:
            return result
        return Command(update={"messages": [result], "skill_context": [skill_reference(skill)]})

    def wrap_tool_call(self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Result]) -> Result:
        return self._recorded(request, handler(request))

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[Result]]
    ) -> Result:
        return self._recorded(request, await handler(request))
