"""``list_uploaded_files``: what the user has given this thread.

The agent could ``ls /mnt/user-data/uploads``, but a dedicated tool lets the
prompt point at it and returns sizes and times in one compact table, built from
the same :func:`deerflow.sandbox.files.uploads.list_uploads` the UI uses.
"""

from __future__ import annotations

from datetime import UTC, datetime

from langchain.tools import ToolRuntime

from deerflow.runtime.context import RunContext
from deerflow.sandbox.files.uploads import UploadInfo, list_uploads
from deerflow.tools.builtins.file_tools import model_errors, thread_fs
from deerflow.tools.schema import as_tool


def render_uploads(files: list[UploadInfo]) -> str:
    """One line per file: virtual path, size, modification time (UTC)."""
    if not files:
        return "No files have been uploaded to this thread."
    lines = [
        f"{len(files)} uploaded file(s), read-only (copy to /mnt/user-data/workspace to modify):"
    ]
    for f in files:
        when = datetime.fromtimestamp(f.mtime, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")
        lines.append(f"- {f.virtual_path} ({f.size:,} bytes, {when})")
    return "\n".join(lines)


@as_tool("list_uploaded_files")
def list_uploaded_files(runtime: ToolRuntime[RunContext]) -> str:
    """List the files the user uploaded to this conversation, with their paths under /mnt/user-data/uploads (read-only), sizes and upload times."""
    vfs = thread_fs(runtime)
    with model_errors(vfs):
        return vfs.mask(render_uploads(list_uploads(vfs.paths)))


# Always on, like present_files (see deerflow.tools.builtins.builtin_groups).
list_uploaded_files.metadata = {"group": "builtin"}
