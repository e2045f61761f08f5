"""``/memory`` in the chat: the verbs of ``deerflow memory`` answered as a chat reply, no run started.

``/memory`` (or ``/memory list``), ``/memory add TEXT``, ``/memory forget ID``,
``/memory clear``, ``/memory export``.  The facts are the chat owner's (the
server's DeerFlow user), the same ones the CLI and ``%deerflow memory`` show.
"""

from __future__ import annotations

import asyncio
import re

from deerflow.memory import MemoryService
from deerflow.memory.commands import memory_action, render_text, split_verb
from deerflow.runtime.manager import RunManager
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
    service = manager.services.memory
    if not isinstance(service, MemoryService):
        return "⚠️ Memory is not available on this server."
    result = await asyncio.to_thread(memory_action, service.book(user_id), verb, argument)
    body = render_text(verb, result)
    if verb == "export":
        return f"```json\n{body.replace('```', '` ` `')}\n```"
    return "🧠 " + "  \n".join(md_escape(line) for line in body.splitlines())
