"""The explicit subagent runtime a host owns and hands to the ``task`` and batch tools.

:class:`SubagentRuntime` bundles what delegation needs from its host:

* the **execution controller** (:class:`SubagentController`: where children run);
* an optional **caller-owned config** (else each parent run's config is used
  for the registry, models, tools and limits);
* an optional explicit **model** for ``inherit`` types, and the tool-source
  factory children are assembled from;
* the optional durable **batch submitter** (batch tools exist only while one
  is installed).

The run manager creates one per host and puts it in ``RunContext.services``
as ``services.subagents``; tools built without a runtime look it up
there.  ``create_deerflow_agent`` instead clones the tools bound to the
runtime its caller passes, so that graph uses exactly that runtime — never
another application's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from deerflow.config.schema import AppConfig
from deerflow.errors import ToolFailure
from deerflow.models.factory import ResolvedModel
from deerflow.runtime.services import services_of
from deerflow.subagents.child_agent import ToolSourcesFactory, default_tool_sources
from deerflow.subagents.controller import SubagentController
from deerflow.subagents.executor import SubagentExecutor

if TYPE_CHECKING:
    from deerflow.subagents.batches.submitter import BatchSubmitter

"""Key of the host's :class:`SubagentRuntime` in ``RunContext.services``."""


class SubagentRuntime:
    """What delegation runs on (see the module docstring).

    A plain class, not a dataclass: it travels in ``RunContext.services``, and
    LangChain validates tool inputs (the tool runtime and its context) with
    pydantic, which would walk a dataclass field by field on every tool call.

    Attributes:
        controller: The execution controller children run on.
        config: Caller-owned config snapshot, or None for the parent run's.
        model: Explicit model for ``inherit`` subagent types.
        tool_sources: Builds a child's tool sources.
        submitter: The durable batch submitter, if installed.
        config_file: For error messages.
    """

    def __init__(self, controller: SubagentController, *, config: AppConfig | None = None,
                 model: ResolvedModel | None = None, tool_sources: ToolSourcesFactory = default_tool_sources,
                 submitter: BatchSubmitter | None = None, config_file: str | None = None) -> None:
        self.controller = controller
        self.config = config
        self.model = model
        self.tool_sources = tool_sources
        self.submitter = submitter
        self.config_file = config_file
        self._executor: SubagentExecutor | None = None

    def __repr__(self) -> str:
        return f"SubagentRuntime(batches={self.submitter is not None}, own_config={self.config is not None})"

    @property
    def executor(self) -> SubagentExecutor:
        """The executor bound to this runtime's controller, config, model and tools (created once)."""
        if self._executor is None:
            self._executor = SubagentExecutor(self.controller, config=self.config, model=self.model,
                                              tool_sources=self.tool_sources, config_file=self.config_file)
        return self._executor

    def app_config(self, fallback: AppConfig | None) -> AppConfig:
        """The config in force: the caller's snapshot, else the run's."""
        config = self.config or fallback
        if config is None:
            raise ToolFailure("subagents need a config: pass one to the SubagentRuntime or run with a RunContext",
                              code="subagents_unavailable")
        return config


def runtime_from_context(context: Any) -> SubagentRuntime:
    """The host's runtime from a tool's ``runtime.context`` (a RunContext).

    Raises:
        ToolFailure: ``subagents_unavailable`` when the host installed none.
    """
    found = services_of(context).subagents
    if not isinstance(found, SubagentRuntime):
        raise ToolFailure("delegation is not available in this session (no subagent runtime)",
                          code="subagents_unavailable")
    return found


__all__ = ["SubagentRuntime", "runtime_from_context"]
