"""``/memory`` in the chat: the verbs of ``deerflow memory`` answered as a chat reply, no run started.

``/memory`` (or ``/memory list``), ``/memory add TEXT``, ``/memory forget ID``,
``/memory clear``, ``/memory export``, ``/memory changes``, ``/memory undo [RUN]``.
After a run, :func:`memory_line` is the chat's "🧠 memory: +2 facts" message with its undo command.  The facts are the chat owner's (the
server's DeerFlow user), the same ones the CLI and ``%deerflow memory`` show.
"""

from __future__ import annotations

import re

from deerflow.memory import MemoryService
from deerflow.memory.commands import memory_action, render_text, split_verb
from deerflow.runs.manager import RunManager
from deerflow_jupyter.chat.clarify import md_escape

_COMMAND = re.compile(r"^\s*/memory(?:\s+(?P<rest>.*))?$", re.DOTALL)


def is_memory_command(text: str) -> bool:
    return _COMMAND.match(text) is not None


async def memory_reply(manager: RunManager, user_id: str, text: str) -> str:
    """The chat reply for a ``/memory`` message (markdown).

    Raises:
        UserError: an unknown verb, a missing argument, an unknown fact id.
    """
    match = _COMMAND.match(text)
    verb, argument = split_verb((match.group("rest") or "") if match else "")
    service = manager.memory
    if not isinstance(service, MemoryService):
        return "⚠️ Memory is not available on this server."
    result = await service.in_store(memory_action, service.book(user_id), verb, argument)
    body = render_text(verb, result)
    if verb == "export":
        return f"```json\n{body.replace('```', '` ` `')}\n```"
    return "🧠 " + "  \n".join(md_escape(line) for line in body.splitlines())


async def memory_line(manager: RunManager, user_id: str, run_id: str) -> str | None:
    """"🧠 memory: +2 facts — “…” (undo: ``/memory undo RUN``)" once the run's extraction is over; None if it taught
    nothing (or took longer than the quiet spell plus the extraction deadline)."""

    change = await manager.learned_from_run(user_id, None, run_id)
    if change is None:
        return None
    texts = [f["text"] for f in change.added] + [p["after"]["text"] for p in change.updated]
    named = "; ".join(f"“{md_escape(t)}”" for t in texts[:3]) + (" …" if len(texts) > 3 else "")
    return f"🧠 {change.summary()}" + (f" — {named}" if named else "") + f"  \nUndo: `/memory undo {run_id}`"
