"""Fuse the middlewares' ``wrap_*`` hooks into one traced wrapper when tracing is off.

``create_agent`` wraps every middleware's ``wrap_model_call`` and
``wrap_tool_call`` in ``langsmith.traceable``, and a traceable call sets up (and
throws away) a run tree, reads the tracing context and resolves its parent
every time, traced or not.  With a dozen middlewares that is a dozen of these
per model call and per tool call — a large share of a step's CPU
(``bench/harness_overhead.py``).

When LangSmith tracing is off at build time, :func:`fuse_wrap_hooks` hands
``create_agent`` one middleware carrying all those hooks, composed with
LangChain's own composition (the same order, the same handling of extended
responses and commands), so the chain pays one wrapper per call instead of one
per middleware.  Each original middleware stays in the chain for its other hooks,
its ``wrap_*`` hooks turned off.  With tracing on the chain is left as it is (each
middleware keeps its own span); the lead agent's graph cache keys on the tracing
state, so turning tracing on builds a traced graph for the next run.

Even one traceable wrapper is dear: LangSmith's async wrapper hands its run-tree setup and
its end to a worker thread (two thread hops) and runs the hook in a new task, at every
call, traced or not.  :func:`untraced_build` goes further than fusion: ``create_agent``
called inside it (when tracing is off) wraps no ``wrap_*`` hook in ``traceable`` at all.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import threading
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import Any

from langchain.agents.middleware import AgentMiddleware

MODEL_HOOKS = ("wrap_model_call", "awrap_model_call")
TOOL_HOOKS = ("wrap_tool_call", "awrap_tool_call")


def tracing_enabled() -> bool:
    """Whether LangSmith tracing is on for this process (env or context)."""
    from langsmith.utils import tracing_is_enabled

    return bool(tracing_is_enabled())


_UNTRACED: ContextVar[bool] = ContextVar("deerflow_untraced_build", default=False)
_install_lock = threading.Lock()
_original_traceable: Callable[..., Any] | None = None


def _identity(func: Callable[..., Any]) -> Callable[..., Any]:
    return func


def _traceable(*args: Any, **kwargs: Any) -> Any:
    """``create_agent``'s ``traceable``: LangSmith's, except inside :func:`untraced_build`."""
    assert _original_traceable is not None  # installed before it can be called
    if not _UNTRACED.get():
        return _original_traceable(*args, **kwargs)
    if len(args) == 1 and callable(args[0]) and not kwargs:  # traceable(func)
        return args[0]
    return _identity  # traceable(name=...)(func)


def _install() -> None:
    """Route ``create_agent``'s ``traceable`` through :func:`_traceable` (once per process)."""
    global _original_traceable
    from langchain.agents import factory

    with _install_lock:
        current = factory.__dict__["traceable"]  # the module's own global, which create_agent reads
        if current is not _traceable:
            _original_traceable = current
            setattr(factory, "traceable", _traceable)  # noqa: B010  (a module global, not a typed attribute)


@contextlib.contextmanager
def untraced_build() -> Iterator[None]:
    """Within: ``create_agent`` leaves the middlewares' ``wrap_*`` hooks unwrapped, when tracing is off.

    Only builds inside the block, in this context, are affected (a context variable, not a
    process-wide switch): a user's own ``create_agent`` elsewhere keeps its spans.  With
    tracing on, the block changes nothing.  A graph built here never traces its hooks, so
    whoever caches it keys on :func:`tracing_enabled` (the lead agent's graph cache does).
    """
    if tracing_enabled():
        yield
        return
    _install()
    token = _UNTRACED.set(True)
    try:
        yield
    finally:
        _UNTRACED.reset(token)


def _overrides(m: AgentMiddleware, hooks: tuple[str, str]) -> bool:
    return any(getattr(m.__class__, h) is not getattr(AgentMiddleware, h) for h in hooks)


def _stripped(m: AgentMiddleware) -> AgentMiddleware:
    """A shallow copy of ``m`` (same name, same state objects) without ``wrap_*`` hooks."""
    cls = type(m.__class__.__name__, (m.__class__,), {
        **{h: getattr(AgentMiddleware, h) for h in (*MODEL_HOOKS, *TOOL_HOOKS)},
        "name": property(lambda self, _n=m.name: _n),
    })
    clone = copy.copy(m)
    clone.__class__ = cls
    return clone


def _hook(m: AgentMiddleware, clone: AgentMiddleware, name: str) -> Callable[..., Any]:
    """``m``'s own hook ``name``, bound to its clone (one instance, one state, as before fusion)."""
    return functools.partial(getattr(m.__class__, name), clone)


def _chain(parts: Sequence[tuple[AgentMiddleware, AgentMiddleware]], name: str) -> Callable[..., Any] | None:
    from langchain.agents import factory  # the composition create_agent itself uses

    handlers = [_hook(m, clone, name) for m, clone in parts]
    chainers = {
        "wrap_model_call": factory._chain_model_call_handlers,
        "awrap_model_call": factory._chain_async_model_call_handlers,
        "wrap_tool_call": factory._chain_tool_call_wrappers,
        "awrap_tool_call": factory._chain_async_tool_call_wrappers,
    }
    return chainers[name](handlers) if handlers else None


class FusedWrapCalls(AgentMiddleware):
    """Carries the composed ``wrap_*`` hooks of several middlewares (see the module doc)."""

    def __init__(self, model_parts: Sequence[tuple[AgentMiddleware, AgentMiddleware]],
                 tool_parts: Sequence[tuple[AgentMiddleware, AgentMiddleware]]) -> None:
        super().__init__()
        self._calls = {name: _chain(model_parts if name in MODEL_HOOKS else tool_parts, name)
                       for name in (*MODEL_HOOKS, *TOOL_HOOKS)}
        for name, chained in self._calls.items():
            if chained is not None:
                setattr(self, name, _plain_hook(name, chained))

    @property
    def name(self) -> str:
        return "WrapCalls"


_HOOK_SIGNATURE = inspect.Signature([
    inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD),
    inspect.Parameter("handler", inspect.Parameter.POSITIONAL_OR_KEYWORD),
])


def _plain_hook(name: str, chained: Callable[..., Any]) -> Callable[..., Any]:
    """The hook ``create_agent`` wraps, as a plain function carrying its signature.

    LangSmith's ``traceable`` wrapper asks ``inspect.signature`` of what it wraps at *every* call
    (for a ``run_tree`` parameter), traced or not: 15 µs for a bound method, a lookup of
    ``__signature__`` here (timeit: 40 → 17 µs a wrapped call; each model call and each tool call
    pays one).  The class keeps its methods: ``create_agent`` checks those to know the hook is there.
    """
    def hook(request: Any, handler: Any) -> Any:
        return chained(request, handler)

    hook.__name__ = hook.__qualname__ = name
    hook.__signature__ = _HOOK_SIGNATURE  # type: ignore[attr-defined]
    return hook


def _fused_class(with_model: bool, with_tools: bool) -> type[FusedWrapCalls]:
    def hook(name: str) -> Callable[..., Any]:
        def call(self: FusedWrapCalls, request: Any, handler: Any) -> Any:
            chained = self._calls[name]
            assert chained is not None  # a hook is installed only where it has parts (names below)
            return chained(request, handler)
        call.__name__ = name
        return call

    names = (MODEL_HOOKS if with_model else ()) + (TOOL_HOOKS if with_tools else ())
    return type("FusedWrapCalls", (FusedWrapCalls,), {n: hook(n) for n in names})


def fuse_wrap_hooks(chain: Sequence[AgentMiddleware]) -> list[AgentMiddleware]:
    """``chain`` with every ``wrap_*`` hook in one middleware, at the first such middleware's place."""
    model_parts = [m for m in chain if _overrides(m, MODEL_HOOKS)]
    tool_parts = [m for m in chain if _overrides(m, TOOL_HOOKS)]
    if len(model_parts) < 2 and len(tool_parts) < 2:
        return list(chain)
    parts = [m for m in chain if m in model_parts or m in tool_parts]
    stripped = {id(m): _stripped(m) for m in parts}
    fused = _fused_class(bool(model_parts), bool(tool_parts))(
        [(m, stripped[id(m)]) for m in model_parts], [(m, stripped[id(m)]) for m in tool_parts])
    out: list[AgentMiddleware] = []
    for m in chain:
        if m is parts[0]:
            out.append(fused)
        out.append(stripped.get(id(m), m))
    return out

