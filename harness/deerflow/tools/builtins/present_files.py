"""``present_files``: connect outputs to what the user sees.

Only files under ``/mnt/user-data/outputs`` can be presented (virtual paths,
or host paths inside this thread's outputs).  Presented paths are added to
the thread's ``artifacts`` (deduplicated by the state reducer) and each one
becomes an ``artifact`` event for the notebook, chat and CLI.
"""

from __future__ import annotations

from typing import Annotated

from langchain.tools import InjectedToolCallId, ToolRuntime
from langchain_core.messages import ToolMessage
from langgraph.types import Command

from deerflow.errors import ToolFailure
from deerflow.runtime.context import RunContext
from deerflow.sandbox.files.virtual_paths import OUTPUTS, VirtualFS
from deerflow.tools.schema import as_tool


def resolve_outputs(vfs: VirtualFS, filepaths: list[str]) -> list[str]:
    """Canonical virtual paths of ``filepaths``; every one must be an existing file in outputs."""
    if not filepaths:
        raise ToolFailure("filepaths is empty: pass the output files to present.", code="bad_arguments")
    presented: list[str] = []
    for raw in filepaths:
        located = vfs.locate(raw, write=False)
        if str(located.mount.virtual) != str(OUTPUTS):
            raise ToolFailure(
                f"{located.virtual} is not under {OUTPUTS}: only deliverables in the outputs directory "
                "can be presented. Write or copy the file there first.", code="not_in_outputs")
        if vfs.size(raw) is None:
            raise ToolFailure(f"{located.virtual} does not exist or is not a regular file.", code="not_found")
        if located.canonical not in presented:
            presented.append(located.canonical)
    return presented


@as_tool("present_files")
def present_files(
    filepaths: list[str],
    runtime: ToolRuntime[RunContext],
    tool_call_id: Annotated[str, InjectedToolCallId],
) -> Command:
    """Show finished deliverables to the user.

    Call this once your output files are written. Only files under
    /mnt/user-data/outputs can be presented; intermediate files stay in the workspace.

    Args:
        filepaths: Paths of the output files, e.g. ["/mnt/user-data/outputs/report.md"].
    """
    ctx = runtime.context
    vfs = VirtualFS(ctx.paths, skills_root=ctx.services.skills_root)
    presented = resolve_outputs(vfs, filepaths)
    text = "Presented to the user: " + ", ".join(presented)
    return Command(update={
        "artifacts": presented,
        "messages": [ToolMessage(content=text, tool_call_id=tool_call_id, name="present_files")],
    })
