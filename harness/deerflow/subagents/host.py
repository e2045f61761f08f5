"""Installing delegation into a host (the run manager).

A host opens one :class:`SubagentRuntime` (:func:`open_subagent_runtime`):
its controller — and, with ``subagents.batches.enabled``, its SQL batch
submitter and worker pool — are closed by the host's exit stack.  For each
run, :func:`with_subagent_source` plugs the subagent tools into the run's
:class:`ToolSources`; they are offered only when the run has
``subagent_enabled``.
"""

from __future__ import annotations

from contextlib import AsyncExitStack

from deerflow.config.paths import HomePaths
from deerflow.config.schema import AppConfig
from deerflow.runtime.services import HostServices
from deerflow.skills.projection import reading_the_view
from deerflow.subagents.controller import SubagentController
from deerflow.subagents.runtime import SubagentRuntime
from deerflow.subagents.tools import subagent_tools
from deerflow.tools.assembly import ToolSources


async def open_subagent_runtime(config: AppConfig, home: HomePaths, stack: AsyncExitStack, *,
                                services: HostServices, config_file: str | None = None) -> SubagentRuntime:
    """The host's runtime; closed (children cancelled, batch workers stopped) with ``stack``.

    ``services`` are the host's execution services (sandbox, kernels) batch items run with.
    """
    controller = SubagentController()
    stack.push_async_callback(controller.aclose)
    runtime = SubagentRuntime(controller, config_file=config_file)
    if config.subagents.batches.enabled:
        from deerflow.subagents.batches.submitter import open_batch_submitter

        runtime.submitter = await open_batch_submitter(config, home, runtime, stack, services)
    return runtime


def with_subagent_source(sources: ToolSources, services: HostServices, config: AppConfig) -> ToolSources:
    """``sources`` with the subagent tools of the host's runtime (if it has one)."""
    runtime = services.subagents
    if isinstance(runtime, SubagentRuntime):
        sandbox = services.sandbox
        bash = bool(sandbox is not None and sandbox.allows_bash)
        # a child mounts and reads the parent thread's view: a run's owed view is built before it starts
        sources.subagents = lambda: reading_the_view(subagent_tools(runtime, config, bash_allowed=bash))
    return sources


__all__ = ["open_subagent_runtime", "with_subagent_source"]
