"""The services a host gives its runs: one typed field per service.

The run manager opens the host-wide services once (:meth:`RunManager.open
<deerflow.runs.manager.RunManager.open>`) and gives each run a copy with
its own per-run services filled in (:meth:`HostServices.for_run`); a
subagent's context gets the parent's copy minus the delegation services
(:meth:`HostServices.for_child`).  Middlewares and tools read them from
``runtime.context.services`` as attributes.  A service the host does not
provide is ``None``: the consumer says it is unavailable (or, for the
offloader, uses the process's), exactly as before.

The service types are imported for type checkers only, so this module stays
cheap to import and every package may use it.

A new host service: add a field here (``None`` by default), set it where the
host opens it (the run manager, or the Jupyter extension for ``notebooks``),
and read ``context.services.NAME`` where it is used.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic_core import CoreSchema

    from deerflow.acp.mcp_servers import McpServerConfigs
    from deerflow.browser.manager import BrowserSessionManager
    from deerflow.mcp.manager import McpManager
    from deerflow.mcp.run_tools import McpRunTools
    from deerflow.memory.service import MemoryService
    from deerflow.notebooks.access import NotebookAccess
    from deerflow.runtime.consent import ConsentGrants
    from deerflow.runtime.usage import UsageMeter
    from deerflow.sandbox.execution.provider import SandboxProvider
    from deerflow.sandbox.kernels.kernel_pool import KernelPool
    from deerflow.skills.library import SkillLibrary
    from deerflow.skills.run import RunSkills
    from deerflow.subagents.child_run import ChildRun
    from deerflow.subagents.runtime import SubagentRuntime
    from deerflow.tools.assembly import ToolCache
    from deerflow.tools.offload import Offloader
    from deerflow.web.service import WebService


@dataclass
class HostServices:
    """What a run may use besides its paths and config (``None``: not available here).

    Host-wide services (opened once with the run manager):

    Attributes:
        sandbox: Runs commands for ``bash`` and the file tools' executions.
        kernels: The sandboxed Python kernels of ``python``.
        tool_cache: Built-in tools built once per config, shared by runs.
        skills: The skill library (public, custom and installed skills).
        mcp: The MCP servers' manager (connections, catalog, credentials).
        mcp_server_configs: The MCP servers an ACP agent is handed (a callable).
        subagents: The delegation runtime (``task``, batches); never given to a subagent.
        memory: What DeerFlow remembers about the user.
        web: ``web_search`` / ``web_fetch``.
        browser: The browser session manager (when ``browser.enabled``).
        notebooks: The user's notebooks (the Jupyter server's contents, or a folder).
        offloader: Runs blocking file work off the event loop (None: the process's).

    Per run (set by the run manager for one run):

    Attributes:
        run_skills: The run's enabled skills.
        skills_root: The thread's view of those skills (a host directory).
        mcp_run: The run's MCP tools, notices and deferred schemas.
        usage_meter: Counts the run's model calls (subagents share the parent's).
        consent_grants: Changes a person approved in this run (set by the consent middleware).
        subagent_run: The child run a subagent's context belongs to.
    """

    sandbox: SandboxProvider | None = None
    kernels: KernelPool | None = None
    tool_cache: ToolCache | None = None
    skills: SkillLibrary | None = None
    mcp: McpManager | None = None
    mcp_server_configs: McpServerConfigs | None = None
    subagents: SubagentRuntime | None = None
    memory: MemoryService | None = None
    web: WebService | None = None
    browser: BrowserSessionManager | None = None
    notebooks: NotebookAccess | None = None
    offloader: Offloader | None = None
    # per run
    run_skills: RunSkills | None = None
    skills_root: str | None = None
    mcp_run: McpRunTools | None = None
    usage_meter: UsageMeter | None = None
    consent_grants: ConsentGrants | None = None
    subagent_run: ChildRun | None = None

    @classmethod
    def __get_pydantic_core_schema__(cls, source: object, handler: object) -> CoreSchema:
        """Carried, never validated: a tool schema that mentions ``RunContext`` sees an opaque instance.

        Without this, pydantic would resolve the service annotations, which are
        imported for type checkers only.
        """
        from pydantic_core import core_schema

        return core_schema.is_instance_schema(cls)

    def for_run(self, **per_run: Any) -> HostServices:
        """A copy for one run, with its per-run services set (the host's copy is left as it is)."""
        return replace(self, **per_run)

    def for_child(self, child: ChildRun) -> HostServices:
        """A subagent's services: the parent's, without delegation (no nesting), with its child run."""
        return replace(self, subagents=None, subagent_run=child)


def services_of(context: object) -> HostServices:
    """The services on a run context; none for a call outside a run (a tool invoked directly)."""
    found = getattr(context, "services", None)
    return found if isinstance(found, HostServices) else HostServices()


__all__ = ["HostServices", "services_of"]
