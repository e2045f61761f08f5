"""The harness's own tools, grouped, for :class:`~deerflow.tools.assembly.ToolSources`."""

from __future__ import annotations

from langchain_core.tools import BaseTool

from deerflow.config.schema import AppConfig
from deerflow.models.factory import ResolvedModel
from deerflow.sandbox.execution.provider import SandboxProvider
from deerflow.skills.projection import reading_the_view
from deerflow.skills.run import RunSkills
from deerflow.tools.assembly import ToolCache, ToolSources


def builtin_groups(
    app_config: AppConfig, model: ResolvedModel | None, *, sandbox: SandboxProvider | None = None,
    skills: RunSkills | None = None, cache: ToolCache | None = None,
) -> dict[str, list[BaseTool]]:
    """Built-in tools by group; later capabilities add their groups here.

    The ``exec`` group (``bash``/``python``) exists only when the host runs a sandbox
    provider; ``bash`` is left out when the provider does not allow it.  ``web``
    (``web_fetch``, ``web_search``, ``image_search``) is on unless ``web.enabled`` is
    false; ``browser`` only with ``browser.enabled``.  ``notebook`` (``read_notebook``,
    ``edit_notebook``) works when the host provides ``services.notebooks``.  The skill
    tools (``describe_skill``, ``install_skill``) join ``builtin`` when the run's
    skills call for them (see :mod:`deerflow.tools.builtins.skill_tools`).

    With a host's ``cache`` the groups built from functions (notebook, exec, web,
    browser) are built once per key and shared by later runs: deriving a tool's
    pydantic schema from its signature costs milliseconds per tool, per run otherwise.
    """
    from deerflow.tools.builtins.clarification import ask_clarification
    from deerflow.tools.builtins.exec_tools import bash_description, exec_tools
    from deerflow.tools.builtins.file_tools import FILE_READ_TOOLS, FILE_WRITE_TOOLS
    from deerflow.tools.builtins.notebook_tools import notebook_tools
    from deerflow.tools.builtins.present_files import present_files
    from deerflow.tools.builtins.skill_tools import skill_tools
    from deerflow.tools.builtins.uploads_tool import list_uploaded_files
    from deerflow.tools.builtins.view_image import view_image

    sees = model is not None and model.supports_vision  # None: the host's catalog, no run
    vision = [view_image] if sees else []  # only a vision model can look
    cache = cache or ToolCache()
    groups = {  # the tools that mount or read /mnt/skills are marked: a run's owed view is built before them
        "builtin": [*reading_the_view([present_files, list_uploaded_files, *vision, *skill_tools(skills)]),
                    ask_clarification],
        "file:read": reading_the_view(FILE_READ_TOOLS),
        "file:write": reading_the_view(FILE_WRITE_TOOLS),
        # the user's notebooks, through the host's services.notebooks (read at call time: cacheable)
        "notebook": cache.get(("notebook",), notebook_tools),
    }
    if sandbox is not None:
        timeout = app_config.sandbox.python_timeout
        key = ("exec", sandbox.allows_bash and bash_description(sandbox), timeout)  # all the tools depend on
        groups["exec"] = cache.get(key, lambda: reading_the_view(exec_tools(sandbox, python_timeout=timeout)))
    if app_config.web.enabled:
        from deerflow.tools.builtins.web_tools import web_tools

        groups["web"] = cache.get(("web",), web_tools)
    if app_config.browser.enabled:  # the host refuses to start when the browser is unusable
        from deerflow.tools.builtins.browser_tools import browser_tools

        groups["browser"] = cache.get(("browser", sees), lambda: browser_tools(vision=sees))
    return groups


def builtin_sources(
    app_config: AppConfig, model: ResolvedModel, *, sandbox: SandboxProvider | None = None,
    skills: RunSkills | None = None, cache: ToolCache | None = None,
) -> ToolSources:
    from deerflow.tools.builtins.acp_tools import acp_tools

    return ToolSources(builtins=builtin_groups(app_config, model, sandbox=sandbox, skills=skills, cache=cache),
                       acp=lambda: acp_tools(app_config))
