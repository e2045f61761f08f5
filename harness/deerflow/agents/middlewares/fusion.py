"""Fuse several ``before_model`` (and ``before_agent``) hooks into one graph node.

``create_agent`` turns every middleware's ``before_model`` hook into its own
graph node, and every node is a Pregel superstep with its own checkpoint
write.  Three small pre-model hooks (upload announcements, loop warnings, the
clarification end-of-turn check) would make each agent step five supersteps
instead of two — the main cost measured in ``bench/harness_overhead.py``.

:func:`fuse_before_model` keeps each concern in its own middleware module and
changes only the graph: the hooks run in list order inside one node
(:class:`FusedBeforeModel`), each seeing the state as the previous ones left
it, and the node returns their updates as a list of commands so every key
still goes through its reducer.  The first hook that jumps ends the sequence.
The original middlewares stay in the chain for their other hooks, with their
``before_model`` turned off.  (The lead agent's own pre-model hooks now run inside
the model call, :mod:`~deerflow.agents.middlewares.pre_model_call`: this node is
what a chain keeps when they cannot, e.g. with a plugin's hook or in plan mode.)

:func:`fuse_before_agent` does the same for the ``before_agent`` hooks (the
thread's directories, MCP notices, a consent replay): one node, hence one
superstep and checkpoint write fewer per run, in the same order with the same
jumps (a consent replay still jumps to the tools node, and it is still last).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, cast

from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain.agents.middleware.types import JumpTo, hook_config
from langgraph.runtime import Runtime
from langgraph.types import Command

from deerflow.agents.message_reducer import merge_message_writes


def _has_before_model(m: AgentMiddleware, hook: str = "before_model") -> bool:
    cls = m.__class__
    return (getattr(cls, hook) is not getattr(AgentMiddleware, hook)
            or getattr(cls, "a" + hook) is not getattr(AgentMiddleware, "a" + hook))


def _jumps(m: AgentMiddleware, hook: str = "before_model") -> list[JumpTo]:
    for name in (hook, "a" + hook):
        method = getattr(m.__class__, name)
        if method is not getattr(AgentMiddleware, name) and hasattr(method, "__can_jump_to__"):
            return list(method.__can_jump_to__)
    return []


def _without_before_model(m: AgentMiddleware, hook: str = "before_model") -> AgentMiddleware:
    """A shallow copy of ``m`` whose ``before_model`` (or ``hook``) hooks are the base no-ops."""
    stripped = type(m.__class__.__name__, (m.__class__,), {
        hook: getattr(AgentMiddleware, hook),
        "a" + hook: getattr(AgentMiddleware, "a" + hook),
        "name": property(lambda self, _n=m.name: _n),
    })
    clone = copy.copy(m)
    clone.__class__ = stripped
    return clone


def _advance(view: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """The state the next hook sees: messages through the real reducer, other keys replaced."""
    nxt = {**view, **{k: v for k, v in update.items() if k != "messages"}}
    if "messages" in update:
        writes = update["messages"] if isinstance(update["messages"], list) else [update["messages"]]
        nxt["messages"] = merge_message_writes(view.get("messages", []), [writes])
    return nxt


class HookSequence(AgentMiddleware):
    """One middleware standing for one kind of hook of several others (``parts``), run in list order."""

    def __init__(self, parts: Sequence[AgentMiddleware[Any, Any]]) -> None:
        super().__init__()
        self.parts = list(parts)


class FusedBeforeModel(HookSequence):
    """Runs the ``before_model`` hooks of ``parts`` in order, in one node."""

    @property
    def name(self) -> str:
        return "PreModel"

    # langgraph takes a node's list of commands; AgentMiddleware's annotation admits only a dict (a state update)
    def before_model(  # pyright: ignore[reportIncompatibleMethodOverride]
            self, state: Any, runtime: Runtime[Any]) -> list[Command] | None:
        view, commands = dict(state), []
        for part in self.parts:
            update = part.before_model(cast(AgentState, view), runtime) if part.__class__.before_model is not \
                AgentMiddleware.before_model else None
            if self._collect(update, commands):
                break
            if update:
                view = _advance(view, update)
        return commands or None

    # as before_model: a list of commands
    async def abefore_model(  # pyright: ignore[reportIncompatibleMethodOverride]
            self, state: Any, runtime: Runtime[Any]) -> list[Command] | None:
        view, commands = dict(state), []
        for part in self.parts:
            update = await part.abefore_model(cast(AgentState, view), runtime)
            if self._collect(update, commands):
                break
            if update:
                view = _advance(view, update)
        return commands or None

    @staticmethod
    def _collect(update: dict[str, Any] | None, commands: list[Command]) -> bool:
        """Add ``update`` as a command; True when it jumps (the sequence stops)."""
        if not update:
            return False
        commands.append(Command(update=update))
        return bool(update.get("jump_to"))


def fuse_before_model(chain: Sequence[AgentMiddleware[Any, Any]]) -> list[AgentMiddleware[Any, Any]]:
    """``chain`` with all ``before_model`` hooks fused into one node at the first one's place."""
    parts = [m for m in chain if _has_before_model(m)]
    if len(parts) < 2:
        return list(chain)
    jumps: list[JumpTo] = sorted({j for m in parts for j in _jumps(m)})
    fused_cls = type("FusedBeforeModel", (FusedBeforeModel,), {
        "before_model": hook_config(can_jump_to=jumps)(FusedBeforeModel.before_model),
        "abefore_model": hook_config(can_jump_to=jumps)(FusedBeforeModel.abefore_model),
    }) if jumps else FusedBeforeModel
    fused = fused_cls(parts)
    out: list[AgentMiddleware[Any, Any]] = []
    for m in chain:
        if m is parts[0]:
            out.append(fused)
        out.append(_without_before_model(m) if m in parts else m)
    return out


class FusedBeforeAgent(HookSequence):
    """Runs the ``before_agent`` hooks of ``parts`` in order, in one node (as :class:`FusedBeforeModel`)."""

    @property
    def name(self) -> str:
        return "RunStart"

    # as before_model (FusedBeforeModel): a list of commands
    def before_agent(  # pyright: ignore[reportIncompatibleMethodOverride]
            self, state: Any, runtime: Runtime[Any]) -> list[Command] | None:
        view, commands = dict(state), []
        for part in self.parts:
            update = part.before_agent(cast(AgentState, view), runtime) if part.__class__.before_agent is not \
                AgentMiddleware.before_agent else None
            if FusedBeforeModel._collect(update, commands):
                break
            if update:
                view = _advance(view, update)
        return commands or None

    async def abefore_agent(  # pyright: ignore[reportIncompatibleMethodOverride]
            self, state: Any, runtime: Runtime[Any]) -> list[Command] | None:
        view, commands = dict(state), []
        for part in self.parts:
            update = await part.abefore_agent(cast(AgentState, view), runtime)
            if FusedBeforeModel._collect(update, commands):
                break
            if update:
                view = _advance(view, update)
        return commands or None


def fuse_before_agent(chain: Sequence[AgentMiddleware]) -> list[AgentMiddleware]:
    """``chain`` with all ``before_agent`` hooks fused into one node at the first one's place."""
    parts = [m for m in chain if _has_before_model(m, "before_agent")]
    if len(parts) < 2:
        return list(chain)
    jumps: list[JumpTo] = sorted({j for m in parts for j in _jumps(m, "before_agent")})
    fused_cls = type("FusedBeforeAgent", (FusedBeforeAgent,), {
        "before_agent": hook_config(can_jump_to=jumps)(FusedBeforeAgent.before_agent),
        "abefore_agent": hook_config(can_jump_to=jumps)(FusedBeforeAgent.abefore_agent),
    }) if jumps else FusedBeforeAgent
    fused = fused_cls(parts)
    out: list[AgentMiddleware] = []
    for m in chain:
        if m is parts[0]:
            out.append(fused)
        out.append(_without_before_model(m, "before_agent") if m in parts else m)
    return out
