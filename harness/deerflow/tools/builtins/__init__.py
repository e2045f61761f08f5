"""The harness's own tools, grouped, for :class:`~deerflow.tools.assembly.ToolSources`."""

from __future__ import annotations

from langchain_core.tools import BaseTool

from deerflow.config.schema import AppConfig
from deerflow.models.factory import ResolvedModel
from deerflow.tools.assembly import ToolSources


def builtin_groups(app_config: AppConfig, model: ResolvedModel) -> dict[str, list[BaseTool]]:
    """Built-in tools by group; later capabilities add their groups here."""
    from deerflow.tools.builtins.file_tools import FILE_READ_TOOLS, FILE_WRITE_TOOLS
    from deerflow.tools.builtins.present_files import present_files
    from deerflow.tools.builtins.uploads_tool import list_uploaded_files

    del app_config, model
    return {
        "builtin": [present_files, list_uploaded_files],
        "file:read": list(FILE_READ_TOOLS),
        "file:write": list(FILE_WRITE_TOOLS),
    }


def builtin_sources(app_config: AppConfig, model: ResolvedModel) -> ToolSources:
    return ToolSources(builtins=builtin_groups(app_config, model))
