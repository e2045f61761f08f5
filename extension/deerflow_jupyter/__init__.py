"""DeerFlow Notebook: the jupyter_server extension (REST/SSE API, auth, chat persona)."""

from __future__ import annotations

from typing import Any


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    from deerflow_jupyter.app import DeerFlowExtension

    return [{"module": "deerflow_jupyter.app", "app": DeerFlowExtension}]
