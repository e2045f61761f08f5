"""Compatibility home of :class:`ToolFailure`, which lives in :mod:`deerflow.errors`.

Import it from :mod:`deerflow.errors`: the capability packages (sandbox, browser,
web, mcp) raise it and must not import ``deerflow.tools`` to do so.
"""

from __future__ import annotations

from deerflow.errors import ToolFailure

__all__ = ["ToolFailure"]
