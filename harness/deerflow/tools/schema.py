"""Tools from functions, without deriving a schema for the injected ``runtime``.

LangChain derives a tool's args schema from its function's whole signature,
``runtime: ToolRuntime`` included, then drops the injected parameters from what
the model sees.  Building pydantic's schema for the ``ToolRuntime`` dataclass
(its state, config, store, stream writer...) is most of that work: ~8 ms per
tool, and ~60 ms for the first, on every process's first run.  The model never
sees ``runtime`` and LangChain re-injects it from the function's own signature
(``BaseTool._injected_args_keys``), so the schema is derived here from the
signature *without* it: same model-facing schema and description, a fraction
of the cost.  ``tests/unit/test_tool_schema.py`` checks the schemas against
LangChain's own derivation for every built-in tool.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

from langchain.tools import ToolRuntime
from langchain_core.tools import StructuredTool, create_schema_from_function


def _is_runtime(annotation: Any) -> bool:
    return annotation is ToolRuntime or typing.get_origin(annotation) is ToolRuntime


def _without_runtime(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A stand-in with ``fn``'s name, docstring and signature minus its ``ToolRuntime`` parameters."""
    sig = inspect.signature(fn)
    hints = typing.get_type_hints(fn, include_extras=True)
    keep = [p for p in sig.parameters.values() if not _is_runtime(hints.get(p.name, p.annotation))]

    def stand_in(*args: Any, **kwargs: Any) -> Any:  # a signature to read, never a tool to run
        raise TypeError(f"{fn.__name__}'s schema stand-in is not callable; call the tool")

    setattr(stand_in, "__signature__", sig.replace(parameters=keep))  # noqa: B010 (not a declared attribute)
    stand_in.__annotations__ = {p.name: hints[p.name] for p in keep if p.name in hints}
    for attr in ("__name__", "__qualname__", "__module__", "__doc__"):
        setattr(stand_in, attr, getattr(fn, attr, None))
    return stand_in


def function_tool(
    func: Callable[..., Any] | None = None,
    coroutine: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    parse_docstring: bool = False,
    **kwargs: Any,
) -> StructuredTool:
    """``StructuredTool.from_function`` (and ``@tool``) with the args schema derived without ``runtime``."""
    source = func or coroutine
    if source is None:
        raise ValueError("function_tool needs a function or a coroutine")
    name = name or source.__name__
    stand_in = _without_runtime(source)
    schema = None
    # A schema with no fields makes LangChain call the tool with no arguments at all (runtime included):
    # a tool whose only parameter is injected keeps LangChain's own derivation.
    if inspect.signature(stand_in).parameters:
        schema = create_schema_from_function(name, stand_in, parse_docstring=parse_docstring)
    return StructuredTool.from_function(func=func, coroutine=coroutine, name=name, description=description,
                                        parse_docstring=parse_docstring, args_schema=schema, **kwargs)


def as_tool(name: str, **kwargs: Any) -> Callable[[Callable[..., Any]], StructuredTool]:
    """``@tool(name, ...)`` for a function or coroutine function, through :func:`function_tool`."""

    def make(fn: Callable[..., Any]) -> StructuredTool:
        if inspect.iscoroutinefunction(fn):
            return function_tool(coroutine=fn, name=name, **kwargs)
        return function_tool(fn, name=name, **kwargs)

    return make
