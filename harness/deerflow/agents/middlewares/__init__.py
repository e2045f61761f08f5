"""The lead agent's middlewares, one per module, ordered in one place.

Order matters: for ``wrap_*`` hooks the first middleware is the outermost;
``before_*`` hooks run first-to-last and ``after_*`` hooks last-to-first.
Clarification is always last (it must see the final tool calls).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import HumanMessage

from deerflow.agents.middlewares.clarification import ClarificationMiddleware
from deerflow.agents.middlewares.consent import ConsentMiddleware
from deerflow.agents.middlewares.cut_off_tool_calls import CutOffToolCallsMiddleware
from deerflow.agents.middlewares.dangling_tool_calls import DanglingToolCallsMiddleware
from deerflow.agents.middlewares.fusion import fuse_before_agent
from deerflow.agents.middlewares.loop_detection import LoopDetectionMiddleware
from deerflow.agents.middlewares.mcp_notices import mcp_middlewares
from deerflow.agents.middlewares.memory import MemoryMiddleware
from deerflow.agents.middlewares.network_approval import NetworkApprovalMiddleware
from deerflow.agents.middlewares.pre_model_call import fold_before_model
from deerflow.agents.middlewares.run_model import RunModelMiddleware
from deerflow.agents.middlewares.skill_activation import SkillActivationMiddleware
from deerflow.agents.middlewares.skill_policy import SkillToolPolicyMiddleware
from deerflow.agents.middlewares.skills_view import SkillsViewMiddleware
from deerflow.agents.middlewares.subagent_limits import SubagentLimitMiddleware
from deerflow.agents.middlewares.summarization import build_summarization
from deerflow.agents.middlewares.thread_data import THREAD_DATA, ThreadDataMiddleware
from deerflow.agents.middlewares.title import TitleMiddleware, make_title
from deerflow.agents.middlewares.todo_list import PlanModeTodoMiddleware
from deerflow.agents.middlewares.tool_authorization import ToolAuthorizationMiddleware
from deerflow.agents.middlewares.tool_errors import ToolErrorHandlingMiddleware
from deerflow.agents.middlewares.tool_output_budget import ToolOutputBudgetMiddleware
from deerflow.agents.middlewares.uploads import UploadsMiddleware
from deerflow.agents.middlewares.view_image import ViewImageMiddleware
from deerflow.agents.middlewares.wrap_fusion import fuse_wrap_hooks, tracing_enabled
from deerflow.config.schema import AppConfig
from deerflow.mcp.run_tools import McpRunTools
from deerflow.models.factory import ResolvedModel
from deerflow.runtime.interaction_policy import RunInteractionPolicy
from deerflow.runtime.projection import message_text
from deerflow.tools.authorization import ToolPolicy


@dataclass(frozen=True)
class MiddlewareOptions:
    """Run options that change the middleware chain.

    ``interaction`` is the run's interaction policy, resolved once per run.
    """

    is_plan_mode: bool = False
    subagent_enabled: bool = False
    interaction: RunInteractionPolicy = field(default_factory=RunInteractionPolicy)
    max_concurrent_subagents: int | None = None
    max_total_subagents: int | None = None
    mcp: McpRunTools | None = field(default=None, compare=False)  # the run's MCP tools, notices, deferral
    plugin_middlewares: tuple[AgentMiddleware, ...] = field(default=(), compare=False)  # startup plugins'
    new_thread: bool = False  # the thread's first run: its run-start values come with the input (run_start_input)

    @property
    def interaction_mode(self) -> str:
        return self.interaction.mode


def build_middlewares(
    app_config: AppConfig, policy: ToolPolicy, options: MiddlewareOptions, *,
    model: ResolvedModel | None = None, config_file: str | None = None,
) -> list[AgentMiddleware[Any, Any]]:
    """The ordered middleware chain of the lead agent.

    ``model`` is the run's resolved model: summarization sizes its triggers by
    its context window, and images are shown only to a vision model.
    """
    # a thread's first run has no history: nothing to answer (consent, network approval), and its thread
    # data and title are known before it starts (run_start_input): no run-start node, one superstep fewer
    answers = not options.new_thread
    chain: list[AgentMiddleware[Any, Any]] = [
        RunModelMiddleware(),  # the outermost model hook after the pre-model ones: this run's model
        SkillsViewMiddleware(),  # a thread's owed skills view, built before an answer's calls that read it
        *([ThreadDataMiddleware()] if answers else []),
        UploadsMiddleware(),
        *([NetworkApprovalMiddleware()] if answers and app_config.sandbox.network == "allowlist" else []),
        DanglingToolCallsMiddleware(),
        CutOffToolCallsMiddleware(),  # before anything reads the arguments of a call cut off mid-JSON
        ToolAuthorizationMiddleware(policy),
        SkillToolPolicyMiddleware(),  # after user authorization: an active skill only narrows
        *mcp_middlewares(options.mcp),  # MCP notices; deferred schemas (only narrow, like the skill policy)
        SkillActivationMiddleware(),  # outside error handling/budget: sees the final read result
        ToolErrorHandlingMiddleware(),
        ToolOutputBudgetMiddleware(max_chars=app_config.tool_output.max_chars,
                                   synopsis_chars=app_config.tool_output.synopsis_chars),
        *([MemoryMiddleware()] if app_config.memory.enabled and app_config.memory.injection_enabled else []),
    ]
    chain.append(build_summarization(app_config, model, config_file=config_file))
    if options.is_plan_mode:
        chain.append(PlanModeTodoMiddleware())
    if app_config.title.enabled and answers:
        chain.append(TitleMiddleware(max_chars=app_config.title.max_chars))
    if model is not None and model.supports_vision:
        chain.append(ViewImageMiddleware())
    if app_config.loop_detection.enabled:
        chain.append(LoopDetectionMiddleware(app_config.loop_detection))
    if options.subagent_enabled:
        chain.append(SubagentLimitMiddleware(
            max_concurrent=options.max_concurrent_subagents or app_config.subagents.max_concurrent,
            max_total=options.max_total_subagents or app_config.subagents.max_total_per_run))
    chain.extend(options.plugin_middlewares)  # operator plugins: inside everything but clarification
    if answers:
        chain.append(ConsentMiddleware())  # the last before_agent hook: a yes jumps to the tools node
    chain.append(ClarificationMiddleware(options.interaction))  # always last
    # the pre-model hooks run inside the model call (pre_model_call.py), the run-start hooks in one node (fusion.py)
    chain = fuse_before_agent(fold_before_model(chain))
    return chain if tracing_enabled() else fuse_wrap_hooks(chain)  # one traceable wrapper per call


def run_start_input(app_config: AppConfig, message: HumanMessage) -> dict[str, Any]:
    """What a new thread's run-start hooks would write, given with its first run's input instead.

    The chain of a thread's first run (``MiddlewareOptions.new_thread``) has no run-start node:
    its thread data is a constant and its title comes from this, its first user message, exactly
    as :class:`TitleMiddleware` would derive it.
    """
    values: dict[str, Any] = {"thread_data": dict(THREAD_DATA)}
    if app_config.title.enabled and (title := make_title(message_text(message), app_config.title.max_chars)):
        values["title"] = title
    return values


__all__ = ["MiddlewareOptions", "build_middlewares", "run_start_input"]
