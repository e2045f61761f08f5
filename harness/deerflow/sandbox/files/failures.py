"""What the model sees when the thread's :class:`~deerflow.threadfs.SafeDir` refuses a path.

Every host-side file operation on a thread's mounts (the file tools, their walks, the tool-output
pages) turns an :class:`~deerflow.threadfs.UnsafePath` into a :class:`ToolFailure` here, so the
model gets one message and one code per kind of refusal, whichever tool met it.
"""

from __future__ import annotations

from deerflow.errors import ToolFailure
from deerflow.threadfs import UnsafePath

_FAILURE_CODES = {
    "not_found": "not_found",
    "not_dir": "not_found",
    "symlink": "symlink_escape",
    "is_dir": "is_directory",
    "not_regular": "not_regular",
    "hard_link": "not_regular",
    "too_large": "too_large",
    "bad_path": "bad_path",
    "exists": "exists",
}


def tool_failure(exc: UnsafePath, *, shown: str | None = None) -> ToolFailure:
    """The model-facing form of a :class:`~deerflow.threadfs.UnsafePath`."""
    where = shown or exc.rel or "that path"
    messages = {
        "not_found": f"{where} does not exist. Use ls or glob to find the right path.",
        "symlink": f"{where} goes through a symbolic link. Host-side tools never follow links; "
                   "use the real path, or read it with the python or bash tool.",
        "is_dir": f"{where} is a directory; use ls to see what it holds.",
        "not_regular": f"{where} is not a regular file (a FIFO, socket or device); refused.",
        "hard_link": f"{where} has more than one hard link; host-side tools refuse such files. "
                     "Copy it to a new file first.",
    }
    return ToolFailure(messages.get(exc.code, f"{where}: {exc.message}"), code=_FAILURE_CODES.get(exc.code, "io_error"))
