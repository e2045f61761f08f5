"""The harness's own tools, grouped, for :class:`~deerflow.tools.assembly.ToolSources`."""

from __future__ import annotations

from langchain_core.tools import BaseTool

from deerflow.config.schema import AppConfig
from deerflow.models.factory import ResolvedModel
from deerflow.sandbox.provider import SandboxProvider
from deerflow.tools.assembly import ToolSources


def builtin_groups(
    app_config: AppConfig, model: ResolvedModel, *, sandbox: SandboxProvider | None = None
) -> dict[str, list[BaseTool]]:
    """Built-in tools by group; later capabilities add their groups here.

    The ``exec`` group (``bash``/``python``) exists only when the host runs a sandbox
    provider; ``bash`` is left out when the provider does not allow it.
    """
    from deerflow.tools.builtins.clarification import ask_clarification
    from deerflow.tools.builtins.exec_tools import exec_tools
    from deerflow.tools.builtins.file_tools import FILE_READ_TOOLS, FILE_WRITE_TOOLS
    from deerflow.tools.builtins.present_files import present_files
    from deerflow.tools.builtins.uploads_tool import list_uploaded_files
    from deerflow.tools.builtins.view_image import view_image

    vision = [view_image] if model.supports_vision else []  # only a vision model can look
    groups = {
        "builtin": [present_files, list_uploaded_files, ask_clarification, *vision],
        "file:read": list(FILE_READ_TOOLS),
        "file:write": list(FILE_WRITE_TOOLS),
    }
    if sandbox is not None:
        groups["exec"] = exec_tools(sandbox, python_timeout=app_config.sandbox.python_timeout)
    return groups


def builtin_sources(
    app_config: AppConfig, model: ResolvedModel, *, sandbox: SandboxProvider | None = None
) -> ToolSources:
    return ToolSources(builtins=builtin_groups(app_config, model, sandbox=sandbox))
