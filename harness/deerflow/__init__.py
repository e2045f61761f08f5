"""DeerFlow harness: config, models, agents, tools, sandbox, runtime and the embedded client.

The public entry points are :class:`DeerFlowClient` (sync),
:class:`AsyncDeerFlowClient` and :class:`RunResult`; they are imported lazily so
``import deerflow`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for type checkers; at run time __getattr__ imports them on first use
    from deerflow.client import AsyncDeerFlowClient, DeerFlowClient, RunResult

__all__ = ["AsyncDeerFlowClient", "DeerFlowClient", "RunResult"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from deerflow import client

        return getattr(client, name)
    raise AttributeError(name)
