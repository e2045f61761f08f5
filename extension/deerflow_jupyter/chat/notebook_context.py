"""A chat message's notebook: the notebook (or cells) attached through jupyterlab-chat is the run's context.

jupyterlab-chat attaches a notebook as ``{"type": "notebook", "value": PATH, "cells":
[{"id", "input_type"}, ...]}`` (cells optional).  Such an attachment is not uploaded into
the thread like a file: it becomes the run option ``notebook_context`` (``path`` and
``cell_ids``), which the harness reads through the server's ContentsManager and gives to the
agent as fenced, read-only, untrusted context, exactly as for a ``%%deerflow`` cell; the run
view says what was given.  The agent can then propose edits to that notebook by path.

Only the first notebook attachment is context (one notebook per run, as for a cell).  In
JupyterLab with DeerFlow's extension, a message to DeerFlow without one gets the notebook the
user last had in focus attached on send (``labextension/src/notebookContext.ts``), so the open
notebook arrives here the same way, visible on the message, and is read under the same rules.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

NOTEBOOK_TYPE = "notebook"


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def split_notebook_attachment(attachments: Iterable[Any]) -> tuple[tuple[str, ...], dict[str, Any]]:
    """``(file paths to upload, notebook_context option or {})`` from a message's attachments."""
    files: list[str] = []
    context: dict[str, Any] = {}
    for item in attachments:
        path = _field(item, "value")
        if not isinstance(path, str) or not path:
            continue
        if _field(item, "type") != NOTEBOOK_TYPE:
            files.append(path)
            continue
        if context:
            continue  # one notebook per run
        cells = [_field(c, "id") for c in _field(item, "cells") or []]
        context = {"path": path, "cell_ids": [c for c in cells if isinstance(c, str) and c]}
    return tuple(files), context
