"""The memory verbs every surface shares: ``list | add TEXT | edit ID TEXT | forget ID | clear | export |
changes | undo [RUN] | prompt [TOPIC]``.

The CLI (``deerflow memory``), the notebook magic (``%deerflow memory``), the
chat (``/memory``) and the HTTP routes all call :func:`memory_action` on the
user's :class:`~deerflow.memory.book.MemoryBook` and show its JSON-able result,
so the verbs mean the same thing everywhere.  Blocking (the store is
synchronous): async callers run it with :func:`asyncio.to_thread`.
"""

from __future__ import annotations

import contextlib
import shlex
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deerflow.errors import UserError
from deerflow.memory.book import MemoryBook

if TYPE_CHECKING:
    from deerflow.custom_agents.store import AgentStore

VERBS = ("list", "add", "edit", "forget", "clear", "export", "changes", "undo", "prompt")
WRITES = frozenset({"add", "edit", "undo"})  # verbs that put facts into an agent's memory
USAGE = "memory list | add TEXT | edit ID TEXT | forget ID | clear | export | changes | undo [RUN] | prompt [TOPIC]"


def split_verb(text: str) -> tuple[str, str]:
    """``"add I study deer"`` → ``("add", "I study deer")``; an empty line lists."""
    verb, _, rest = text.strip().partition(" ")
    verb = verb.lower() or "list"
    if verb not in VERBS:
        raise UserError(f"unknown memory command {verb!r}; use: {USAGE}")
    rest = rest.strip()
    if verb in {"add", "forget", "undo"} and len(rest) >= 2 and rest[0] == rest[-1] and rest[0] in "'\"":
        rest = " ".join(shlex.split(rest))  # a quoted argument, as typed in a shell
    return verb, rest


def act_on_home(config: Any, home: Path, user_id: str, verb: str, argument: str = "", *,
                agent: str | None = None, agents: AgentStore | None = None) -> dict[str, Any]:
    """Open the home's memory store, run one verb, close it (CLI and the in-kernel backend).

    ``agents`` (the user's custom agents) is needed with ``agent``: see :func:`check_agent`.
    """
    from deerflow.memory.store import open_store

    with ExitStack() as stack:
        store = open_store(config.storage, home=home, stack=stack, embedding=config.memory.embedding)
        book = MemoryBook(store, user_id, agent=agent, max_facts=config.memory.max_facts)
        if agent is not None:
            if agents is None:
                raise TypeError("act_on_home: an agent's memory needs the user's agents (agents=...)")
            check_agent(agents, agent, verb, book)
        return memory_action(book, verb, argument, max_tokens=config.memory.max_injection_tokens)


def check_agent(agents: AgentStore, agent: str, verb: str, book: MemoryBook) -> None:
    """Refuse the memory of a custom agent the user does not have, before ``verb`` touches it.

    A misspelt ``--agent`` would otherwise file facts under a name no run ever reads, or show
    an empty memory as if it were the agent's.  Deleting an agent leaves its memory, so the
    verbs that only read or remove facts may still name a deleted agent while facts remain
    (to list, export or forget them); :data:`WRITES` never may.  Blocking (a stat, a store read).

    Raises:
        NotFoundError: no such agent (the message lists the user's agents).
        UserError: ``agent`` is not a name an agent can have.
    """
    try:
        exists = agents.exists(agent)
    except UserError:  # a name no agent can have (upper case...): facts the old CLI filed there stay reachable
        exists = False
    if exists or (verb not in WRITES and book.list()):
        return
    agents.get(agent)  # raises the NotFoundError that lists the user's agents (or the name's problem)


def memory_action(book: MemoryBook, verb: str, argument: str = "", *, max_tokens: int = 2000) -> dict[str, Any]:
    """Execute one verb; the result is JSON-able.

    ``prompt [TOPIC]`` is the memory block a run about TOPIC would get (within ``max_tokens``,
    ``memory.max_injection_tokens``): what the model is shown, verbatim.

    Raises:
        UserError: an unknown verb, a missing argument, a refused fact.
        NotFoundError: ``forget`` of an id that is not this user's.
    """
    if verb == "list":
        return {"facts": [f.to_dict() for f in book.list()]}
    if verb == "add":
        if not argument.strip():
            raise UserError("say what to remember: memory add \"TEXT\"")
        return {"fact": book.add(argument).to_dict()}
    if verb == "edit":
        fact_id, _, text = argument.strip().partition(" ")
        if text.strip()[:1] in {"'", '"'}:
            with contextlib.suppress(ValueError):  # an unbalanced quote: the text as typed
                text = " ".join(shlex.split(text))  # quoted, as typed in a shell
        if not fact_id or not text.strip():
            raise UserError("say which fact and its new text: memory edit ID \"TEXT\" (see memory list)")
        return {"fact": book.edit(fact_id, text).to_dict()}
    if verb == "prompt":
        from deerflow.memory.prompt import memory_block

        return {"block": memory_block(book.relevant(argument, max_tokens=max_tokens))}
    if verb == "forget":
        if not argument.strip():
            raise UserError("say which fact to forget: memory forget ID (see memory list)")
        return {"forgotten": book.forget(argument.strip()).to_dict()}
    if verb == "clear":
        return {"removed": book.clear()}
    if verb == "export":
        return book.export()
    if verb == "changes":
        from deerflow.memory.changes import recent_changes

        return {"changes": [r.to_dict() for r in recent_changes(book)]}
    if verb == "undo":
        from deerflow.memory.changes import undo_change

        return {"undone": undo_change(book, argument.strip() or None).to_dict()}
    raise UserError(f"unknown memory command {verb!r}; use: {USAGE}")


def render_text(verb: str, result: dict[str, Any]) -> str:
    """The result for a person (terminal, notebook output, chat)."""
    if verb == "list":
        facts = result["facts"]
        if not facts:
            return "no memory yet: facts appear after conversations, or add one with `memory add \"TEXT\"`"
        return "\n".join(f"{f['id']}  [{f['category']}] {f['text']}" for f in facts)
    if verb == "add":
        return result["fact"]["id"]
    if verb == "edit":
        return f"{result['fact']['id']}  [{result['fact']['category']}] {result['fact']['text']}"
    if verb == "prompt":
        return result["block"] or "(nothing: no fact would be shown to the model)"
    if verb == "forget":
        return f"forgot {result['forgotten']['id']}: {result['forgotten']['text']}"
    if verb == "clear":
        return f"forgot {result['removed']} fact{'s' if result['removed'] != 1 else ''}"
    if verb == "changes":
        if not result["changes"]:
            return "no memory changes yet: they appear after runs that taught memory something"
        return "\n".join(f"{c['run_id']}  {c['summary']}" for c in result["changes"])
    if verb == "undo":
        undone = result["undone"]
        return (f"undid the memory change of run {undone['run_id']}: {len(undone['added'])} removed, "
                f"{len(undone['updated']) + len(undone['removed'])} restored")
    import json

    return json.dumps(result, indent=2, ensure_ascii=False)
