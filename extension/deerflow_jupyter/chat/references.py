"""Other conversations a chat message points at: the grant for ``read_conversation``.

The agent may read another of the user's conversations only when the user
explicitly references it in this message (the harness checks ownership and
binds ``read_conversation`` for that run only).  In chat a reference is

* ``thread:ID`` — any of the user's threads, e.g. the one a notebook's
  ``%%deerflow`` cells use (``%deerflow threads`` lists them);
* the name of another chat file, ``analysis.chat`` or ``notes/analysis.chat``
  — the thread DeerFlow keeps for that chat.  A bare file name matches a chat
  in any folder when only one chat has that name.

A chat name with no DeerFlow thread is ordinary text (the user may be talking
about a file); an unknown ``thread:ID`` is refused by the harness with a reply.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from deerflow.persistence.store import ThreadRecord
from deerflow.runs.manager import RunManager

THREAD_REF = re.compile(r"(?<![\w/:-])thread:([A-Za-z0-9_.@-]{1,128})")
CHAT_REF = re.compile(r"(?<![\w.@/-])((?:[\w.-]+/)*[\w.-]+\.chat)(?![\w-])")
_PAGE = 500


async def referenced_threads(manager: RunManager, user_id: str, text: str, *, current: str) -> list[str]:
    """The thread ids ``text`` references, in order, without duplicates or the current thread."""
    found = [m.group(1) for m in THREAD_REF.finditer(text)]
    names = [m.group(1) for m in CHAT_REF.finditer(text)]
    if names:
        chats = {str(t.metadata["chat_path"]): t.thread_id for t in await _threads(manager, user_id)
                 if isinstance(t.metadata.get("chat_path"), str)}
        found += [tid for name in names if (tid := _chat_thread(chats, name)) is not None]
    return [t for t in dict.fromkeys(found) if t != current]


def _chat_thread(chats: dict[str, str], name: str) -> str | None:
    path = name.removeprefix("./")
    if path in chats:
        return chats[path]
    same_name = [tid for chat_path, tid in chats.items() if PurePosixPath(chat_path).name == path]
    return same_name[0] if len(same_name) == 1 else None


async def _threads(manager: RunManager, user_id: str) -> list[ThreadRecord]:
    found: list[ThreadRecord] = []
    while page := await manager.list_threads(user_id, limit=_PAGE, offset=len(found)):
        found += page
    return found


__all__ = ["CHAT_REF", "THREAD_REF", "referenced_threads"]
