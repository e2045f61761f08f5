"""The options of one run: the one place a run option is declared.

Every host (the embedded client, the CLI, the HTTP API, the chat, the
``%%deerflow`` magics, the scheduler) builds a :class:`RunOptions`; the run
manager parses what it is given with :meth:`RunOptions.parse` and the harness
reads the result.  The model forbids unknown keys, so a typo
(``modle_name``) is a :class:`~deerflow.errors.UserError` naming the option
and the closest valid one instead of a run that silently ignores it.

Each field has a *scope* saying who may set it:

* ``public`` — anyone, including a request over HTTP;
* ``internal`` — trusted, in-process callers only (the interaction-policy
  keys, which switch off human interaction, and the model cassettes, which are
  files on the caller's side);
* ``child`` — set by the harness itself on a subagent's context.

This module is low in the layering: it imports nothing from ``deerflow`` but
:mod:`deerflow.errors`, so every package may import it.

A new run option: add a field here (with its scope and a description), then
read it where it takes effect (``RunContext.options`` or the lead agent's
:class:`RunOptions`).  Hosts and the HTTP boundary need no change.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from deerflow.errors import UserError

Scope = Literal["public", "internal", "child"]


def _option(scope: Scope, description: str) -> Any:
    return Field(default=None, description=description, json_schema_extra={"scope": scope})


class RunOptions(BaseModel):
    """What a caller may ask of one run; every field is optional (``None``: not asked)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # public: any caller, HTTP included
    model_name: str | None = _option("public", "model entry name from config.yaml")
    thinking_enabled: bool | None = _option("public", "let a model that can think do so")
    is_plan_mode: bool | None = _option("public", "plan mode: the agent keeps a todo list")
    subagent_enabled: bool | None = _option("public", "let the agent delegate to subagents")
    max_concurrent_subagents: int | None = _option("public", "subagents running at once")
    max_total_subagents: int | None = _option("public", "subagents per run")
    agent_name: str | None = _option("public", "run as this custom agent")
    is_bootstrap: bool | None = _option("public", "a run that creates the custom agent agent_name")
    memory: bool | str | None = _option("public", "false: the run neither sees nor teaches the user's memory")
    referenced_threads: Any = _option(
        "public", "other threads of the user this request points at (grants read_conversation); "
        "checked where it is granted")
    notebook_context: dict[str, Any] | None = _option(
        "public", "the calling notebook {path, cell_id} (read-only context); {path, cell_ids: [...]}: "
        "only those cells, as attached to a chat message")
    notebook_edits: str | None = _option("public", "propose | apply: what notebook edits do")
    recursion_limit: int | None = _option("public", "LangGraph recursion limit of the run")
    # internal: trusted in-process callers only
    interaction_mode: str | None = _option("internal", "interactive | scheduled | webhook | autonomous")
    non_interactive: bool | int | str | None = _option("internal", "legacy hint: scheduled")
    disable_clarification: bool | int | str | None = _option("internal", "legacy hint: autonomous")
    channel_name: str | None = _option("internal", "legacy hint: 'github' means webhook")
    record: str | None = _option("internal", "record the model's answers to this cassette file")
    replay: str | None = _option("internal", "replay the model's answers from this cassette file")
    # child: set by the harness on a subagent's context
    is_subagent: bool | None = _option("child", "the run is a subagent's")
    parent_run_id: str | None = _option("child", "the run that delegated")
    task_id: str | None = _option("child", "the delegated task")
    skill_allowed_tools: list[str] | None = _option("child", "the parent's skill allowlist, pinned")

    @classmethod
    def parse(cls, values: RunOptions | Mapping[str, Any] | None, *,
              allowed: Iterable[str] | None = None) -> RunOptions:
        """Validate raw options into a :class:`RunOptions`.

        Args:
            values: Options as a caller gave them (keyword arguments, a JSON object).
            allowed: The names this caller may set (default: all); a known name
                outside it is refused, and suggestions come from it.

        Raises:
            UserError: an unknown option (naming the closest valid one), one the
                caller may not set, or a value of the wrong type.
        """
        if isinstance(values, RunOptions):
            return values
        raw = dict(values or {})
        names = frozenset(cls.model_fields) if allowed is None else frozenset(allowed)
        for key in raw:
            if key not in names:
                raise UserError(_unknown(str(key), names, known=key in cls.model_fields))
        try:
            return cls.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "options"
            raise UserError(f"run option {where!r}: {first['msg']}") from None

    def to_dict(self) -> dict[str, Any]:
        """The options that were asked for (``None`` left out), as plain JSON-able data."""
        return self.model_dump(exclude_none=True)

    def merged(self, **changes: Any) -> RunOptions:
        """These options with ``changes`` applied (validated like any other)."""
        return RunOptions.parse({**self.to_dict(), **changes})


def options_of_scope(*scopes: Scope) -> frozenset[str]:
    """The names of the options of these scopes."""
    return frozenset(name for name, info in RunOptions.model_fields.items()
                     if isinstance(info.json_schema_extra, dict) and info.json_schema_extra.get("scope") in scopes)


def _unknown(key: str, names: frozenset[str], *, known: bool) -> str:
    if known:
        return f"run option {key!r} is internal-only: it cannot be set through the API"
    close = difflib.get_close_matches(key, sorted(names), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else f"; valid options: {', '.join(sorted(names))}"
    return f"unknown run option {key!r}{hint}"


LANGGRAPH_KEYS = frozenset({"thread_id", "checkpoint_id", "checkpoint_ns", "checkpoint_map", "run_id",
                            "assistant_id", "graph_id", "user_id"})
"""LangGraph's own ``configurable`` keys: not run options, so neither read nor refused."""
PUBLIC_OPTIONS = options_of_scope("public")
"""Options a public (HTTP) request may set."""
INTERNAL_OPTIONS = options_of_scope("internal")
"""Options only trusted, in-process callers may set."""
INTERACTION_OPTIONS = frozenset({"interaction_mode", "non_interactive", "disable_clarification", "channel_name"})
"""The internal options that decide the interaction policy (never persisted with a run)."""

__all__ = ["INTERACTION_OPTIONS", "INTERNAL_OPTIONS", "LANGGRAPH_KEYS", "PUBLIC_OPTIONS", "RunOptions", "Scope", "options_of_scope"]
