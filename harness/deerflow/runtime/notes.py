"""Messages the harness itself adds to a conversation.

Reminders and warnings from middlewares are user-role messages (providers accept
them anywhere after tool results), marked in ``additional_kwargs`` so that UIs
and tools can tell them apart from what the user typed.
"""

from __future__ import annotations

from langchain_core.messages import BaseMessage, HumanMessage

NOTE_KEY = "deerflow_note"
"""``additional_kwargs`` key of a harness-written message; the value says what kind."""


def harness_note(text: str, kind: str) -> HumanMessage:
    """A user-role message written by the harness (``kind``: ``loop_warning``, ``todo_reminder``...)."""
    return HumanMessage(content=text, additional_kwargs={NOTE_KEY: kind})


def note_kind(message: BaseMessage) -> str | None:
    """The kind of a harness-written message, None for anything else."""
    kind = message.additional_kwargs.get(NOTE_KEY)
    return kind if isinstance(kind, str) else None
