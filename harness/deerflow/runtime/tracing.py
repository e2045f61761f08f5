"""LangSmith bookkeeping without thread hops when tracing is off.

LangChain wraps every middleware ``wrap_*`` hook in ``langsmith.traceable``.
On the async path each call then runs two small bookkeeping functions through
``run_in_executor`` — even with tracing disabled — so a step through our
middleware chain pays a dozen thread handoffs for nothing (measured in
``bench/harness_overhead.py``).  LangSmith offers a supported hook for this,
``set_runtime_overrides(aio_to_thread=...)``: when tracing is disabled we run
the bookkeeping inline; when it is enabled we defer to LangSmith's default.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable
from typing import Any

_installed = False


async def _inline_unless_tracing(
    default: Callable[..., Awaitable[Any]], ctx: contextvars.Context, func: Callable[..., Any], /,
    *args: Any, **kwargs: Any,
) -> Any:
    from langsmith.utils import tracing_is_enabled

    if tracing_is_enabled():
        return await default(ctx, func, *args, **kwargs)
    return ctx.run(func, *args, **kwargs)


def install_inline_trace_bookkeeping() -> None:
    """Install the override once per process (idempotent; keeps tracing intact when enabled)."""
    global _installed
    if _installed:
        return
    import langsmith
    from langsmith._runtime_overrides import get_runtime_overrides

    if get_runtime_overrides().aio_to_thread is None:  # never replace someone else's override
        langsmith.set_runtime_overrides(aio_to_thread=_inline_unless_tracing)
    _installed = True
