"""The state of a DeerFlow thread and the reducers that merge writes into it.

``ThreadState`` extends LangChain's ``AgentState``. Passed to ``create_agent`` as
``state_schema`` it is resolved last, so its annotations win over the default
``AgentState`` that every middleware declares; that is how ``messages`` ends up
in a ``DeltaChannel`` (see ``message_reducer``) instead of an ``add_messages``
channel that would store the whole history at every checkpoint.

Each field says how concurrent or repeated writes combine:

* last value wins: ``sandbox``, ``thread_data``, ``title``, ``todos``,
  ``uploaded_files``, ``summary_text``;
* merged by a reducer below: ``artifacts``, ``viewed_images``, ``goal``,
  ``promoted``, ``delegations``, ``skill_context``.

Every reducer accepts ``None`` as the current value (treated as empty) and
ignores a ``None`` update. Reduced fields are typed with constructible types
(``list``, ``dict``, ``TypedDict``) on purpose: LangGraph then starts the channel
from an empty value and runs the reducer on the very first write, instead of
storing that first write raw. Any reduced field can still be reset wholesale
with LangGraph's ``Overwrite(value)``, which bypasses the reducer.
"""

from typing import Annotated, Any, NotRequired, Required, TypedDict, cast

from langchain.agents.middleware.todo import Todo
from langchain.agents.middleware.types import AgentState
from langchain_core.messages import AnyMessage
from langgraph.channels.delta import DeltaChannel

from deerflow.agents.message_reducer import merge_message_writes

__all__ = [
    "DELEGATION_TERMINAL_STATUSES",
    "GOAL_REPLACE_KEY",
    "MAX_DELEGATIONS",
    "MAX_SKILL_CONTEXT",
    "MESSAGE_SNAPSHOT_FREQUENCY",
    "Goal",
    "PromotedTools",
    "SkillReference",
    "ThreadState",
    "ViewedImage",
    "merge_artifacts",
    "merge_delegations",
    "merge_goal",
    "merge_promoted",
    "merge_skill_context",
    "merge_viewed_images",
    "replace_goal",
]

MAX_DELEGATIONS = 200
"""Delegation ledger entries kept per thread (oldest dropped first)."""

MAX_SKILL_CONTEXT = 20
"""Active skill references kept per thread (least recently read dropped first)."""

DELEGATION_TERMINAL_STATUSES = frozenset({"completed", "failed", "cancelled", "timed_out"})
"""Delegation statuses after which a late progress update must not revive the entry."""

MESSAGE_SNAPSHOT_FREQUENCY = 500
"""Message writes between two full snapshots of the ``messages`` DeltaChannel.

Between snapshots a checkpoint stores only the step's new messages; a snapshot
stores the whole list so a reader replays at most this many writes. LangGraph's
default (100) makes snapshots dominate storage on long threads (12 MB vs 4.8 MB
at 2,000 messages of 200 characters) while reads cost about the same (~25-40 ms
for ``get_state`` at that size), because the linear reducer replays a few
hundred writes as fast as it deserialises one large snapshot.
"""

GOAL_REPLACE_KEY = "__replace_goal__"
"""Key of the marker dict built by :func:`replace_goal`."""


class ViewedImage(TypedDict):
    """An image the model has looked at, kept so it can be shown again."""

    base64: str
    mime_type: str


class Goal(TypedDict, total=False):
    """The thread's current objective. An empty dict means no goal.

    ``status`` defaults to ``"active"`` when absent; any other status marks the
    goal as finished, which lets an ordinary write set a new one.
    """

    objective: str
    status: str


class PromotedTools(TypedDict):
    """Deferred tools the model promoted, valid for one tool catalog."""

    catalog_hash: str
    names: list[str]


class SkillReference(TypedDict):
    """A pointer to a skill the agent has read; never the SKILL.md body."""

    name: str
    path: str
    description: str


def merge_artifacts(current: list[str] | None, update: list[str] | None) -> list[str]:
    """Append presented paths, dropping repeats and keeping first-seen order.

    Artifacts only accumulate: an empty list (or ``None``) adds nothing and does
    **not** clear, so a node that returns ``artifacts=[]`` by habit cannot lose
    what earlier turns presented. Clear with ``Overwrite([])``.
    """
    merged = list(current or [])
    seen = set(merged)
    for path in update or []:
        if path not in seen:
            seen.add(path)
            merged.append(path)
    return merged


def merge_viewed_images(
    current: dict[str, ViewedImage] | None, update: dict[str, ViewedImage] | None
) -> dict[str, ViewedImage]:
    """Add viewed images by path; an explicit empty dict clears them all.

    Images are large, so the middleware that injects them clears the set once it
    has shown them; ``None`` means "no change".
    """
    if update is None:
        return dict(current or {})
    if not update:
        return {}
    return {**(current or {}), **update}


def replace_goal(goal: Goal | None) -> dict[str, Goal | None]:
    """Build the write that replaces (or, with ``None``, clears) the goal.

    Only the goal writer should use it; every other write to ``goal`` is treated
    as ordinary and cannot displace an active goal (see :func:`merge_goal`).
    """
    return {GOAL_REPLACE_KEY: goal}


def merge_goal(current: Goal | None, update: Any) -> Goal:
    """Keep the active goal unless the write is an explicit replacement.

    Nodes and clients often write back a whole state snapshot; a stale or empty
    ``goal`` in such a write must not drop the objective the agent is pursuing.
    So an ordinary write only sets a goal when none is active, and the goal
    writer uses :func:`replace_goal` to change or clear it.
    """
    if isinstance(update, dict) and set(update) == {GOAL_REPLACE_KEY}:
        return cast(Goal, dict(update[GOAL_REPLACE_KEY] or {}))  # a write's goal: a dict, not checked here
    if _goal_is_active(current) or not update:
        return Goal(**current) if current else Goal()
    return cast(Goal, dict(update))


def _goal_is_active(goal: Goal | None) -> bool:
    if not goal:
        return False
    return goal.get("status", "active") == "active"


def merge_promoted(
    current: PromotedTools | None, update: PromotedTools | None
) -> PromotedTools | dict[str, Any]:
    """Union promotions made against one tool catalog; a new catalog starts over.

    A promotion names tools of a specific catalog (the MCP and config tools in
    force). When the catalog changes its hash changes, and names promoted
    against the old one may be gone or mean something else, so they are dropped.
    """
    if not update:
        return dict(current or {})
    names = list(update.get("names") or [])
    if current and current.get("catalog_hash") == update["catalog_hash"]:
        names = list(current.get("names") or []) + names
    return {"catalog_hash": update["catalog_hash"], "names": list(dict.fromkeys(names))}


def merge_delegations(
    current: list[dict[str, Any]] | None,
    update: list[dict[str, Any]] | dict[str, Any] | None,
) -> list[dict[str, Any]]:
    """Record delegation entries by ``id`` in a bounded ledger.

    A new id is appended; a known id is replaced in place by the latest entry,
    except that an entry in a terminal status is never replaced by one in a
    non-terminal status (a late "running" update from a finished subagent is
    stale and is ignored). Only the most recent :data:`MAX_DELEGATIONS` entries
    are kept.

    Raises:
        ValueError: An entry has no ``id``, so it could never be updated.
    """
    ledger = list(current or [])
    if update is None:
        return ledger[-MAX_DELEGATIONS:]
    index = {entry["id"]: position for position, entry in enumerate(ledger)}
    for entry in [update] if isinstance(update, dict) else update:
        entry_id = entry.get("id")
        if not entry_id:
            raise ValueError(f"Delegation entry without an 'id': {entry!r}")
        position = index.get(entry_id)
        if position is None:
            index[entry_id] = len(ledger)
            ledger.append(entry)
        elif not _downgrades(ledger[position], entry):
            ledger[position] = entry
    return ledger[-MAX_DELEGATIONS:]


def _downgrades(existing: dict[str, Any], incoming: dict[str, Any]) -> bool:
    return (
        existing.get("status") in DELEGATION_TERMINAL_STATUSES
        and incoming.get("status") not in DELEGATION_TERMINAL_STATUSES
    )


def merge_skill_context(
    current: list[SkillReference] | None, update: list[SkillReference] | None
) -> list[SkillReference]:
    """Keep one reference per skill path, most recently read last, at most 20.

    Re-reading a skill moves it to the end, so the cap drops the skills the agent
    has not touched for longest. Only ``name``/``path``/``description`` are kept:
    the state carries references, never skill bodies.
    """
    by_path: dict[str, SkillReference] = {ref["path"]: ref for ref in current or []}
    for ref in update or []:
        by_path.pop(ref["path"], None)
        by_path[ref["path"]] = {
            "name": ref.get("name", ""),
            "path": ref["path"],
            "description": ref.get("description", ""),
        }
    return list(by_path.values())[-MAX_SKILL_CONTEXT:]


class ThreadState(AgentState):
    """The checkpointed state of one DeerFlow thread (see module docstring).

    ``messages`` stays required, as in ``AgentState``; every other field is
    optional so a node or a client can update any subset of them.
    """

    messages: Required[
        Annotated[
            list[AnyMessage],
            DeltaChannel(merge_message_writes, snapshot_frequency=MESSAGE_SNAPSHOT_FREQUENCY),
        ]
    ]
    sandbox: NotRequired[dict[str, Any]]
    thread_data: NotRequired[dict[str, Any]]
    title: NotRequired[str]
    artifacts: NotRequired[Annotated[list[str], merge_artifacts]]
    todos: NotRequired[list[Todo]]
    uploaded_files: NotRequired[list[dict[str, Any]]]
    viewed_images: NotRequired[Annotated[dict[str, ViewedImage], merge_viewed_images]]
    goal: NotRequired[Annotated[Goal, merge_goal]]
    promoted: NotRequired[Annotated[PromotedTools, merge_promoted]]
    delegations: NotRequired[Annotated[list[dict[str, Any]], merge_delegations]]
    skill_context: NotRequired[Annotated[list[SkillReference], merge_skill_context]]
    summary_text: NotRequired[str]
