"""Plan mode: a todo list the run may not silently abandon.

LangChain's ``TodoListMiddleware`` does the planning part: the ``write_todos``
tool, the ``todos`` state channel and the system-prompt guidance.  Each write
to ``todos`` reaches the user as a ``todos`` event through the projection.

What it does not do is hold the model to its plan.  Here, when the model
answers without tool calls (it is about to finish) while todos are still
``pending`` or ``in_progress``, it is reminded once: a short message listing
the open items is added and the graph jumps back to the model.  If it finishes
again with open items, the run ends as the model decided, and the user gets a
``notice`` event (``kind="incomplete_todos"``) listing what was left undone.
The reminder flag is per run (an ``UntrackedValue`` channel, never
checkpointed), so every run gets its own single reminder.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware import TodoListMiddleware
from langchain.agents.middleware.todo import PlanningState, Todo
from langchain.agents.middleware.types import PrivateStateAttr, hook_config
from langchain_core.messages import AIMessage
from langgraph.channels.untracked_value import UntrackedValue
from langgraph.runtime import Runtime

from deerflow.runtime.notes import harness_note

OPEN_STATUSES = frozenset({"pending", "in_progress"})


class PlanModeState(PlanningState):
    """The todo list plus the per-run "already reminded" flag."""

    todo_reminded: NotRequired[Annotated[bool, UntrackedValue, PrivateStateAttr]]


def open_todos(todos: Sequence[Todo] | None) -> list[Todo]:
    """The todos that are not completed, in list order."""
    return [t for t in todos or [] if t.get("status") in OPEN_STATUSES]


def reminder_text(todos: Sequence[Todo]) -> str:
    """The message that sends the model back to its unfinished plan."""
    items = "\n".join(f"- [{t['status']}] {t['content']}" for t in todos)
    return (
        "[Plan mode] You are about to finish, but your todo list still has open items:\n"
        f"{items}\n"
        "Continue working on them, or, if an item is done or no longer needed, update the list with "
        "write_todos (mark it completed or remove it) and explain why. Then give your final answer."
    )


def incomplete_text(todos: Sequence[Todo]) -> str:
    """What the user is told when the run ends with open todos."""
    names = "; ".join(t["content"] for t in todos)
    return f"The run finished with {len(todos)} unfinished todo(s): {names}"


class PlanModeTodoMiddleware(TodoListMiddleware):
    """``TodoListMiddleware`` that reminds the model once of open todos before it finishes."""

    state_schema = PlanModeState

    @hook_config(can_jump_to=["model"])
    def after_model(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        parallel_error = super().after_model(state, runtime)
        if parallel_error is not None:
            return parallel_error
        messages = state.get("messages") or []
        last = messages[-1] if messages else None
        if not isinstance(last, AIMessage) or last.tool_calls:
            return None
        remaining = open_todos(state.get("todos"))
        if not remaining:
            return None
        if not state.get("todo_reminded"):
            note = harness_note(reminder_text(remaining), "todo_reminder")
            return {"messages": [note], "todo_reminded": True, "jump_to": "model"}
        runtime.stream_writer({
            "type": "notice", "kind": "incomplete_todos", "text": incomplete_text(remaining),
            "data": {"todos": [dict(t) for t in remaining]},
        })
        return None

    @hook_config(can_jump_to=["model"])
    async def aafter_model(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.after_model(state, runtime)
