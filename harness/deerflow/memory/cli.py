"""``deerflow memory``: what DeerFlow remembers about you, from a terminal.

    deerflow memory list [--json]       # --json: a list of objects with id and text (contract)
    deerflow memory add "TEXT"          # prints the new fact's id (contract)
    deerflow memory edit ID "TEXT"
    deerflow memory forget ID
    deerflow memory prompt [TOPIC]      # the memory block a run about TOPIC would show the model
    deerflow memory clear
    deerflow memory export [--out FILE]
    deerflow memory changes [--json]    # what each run taught memory
    deerflow memory undo [RUN]          # put the facts back as before that run's extraction
    (each takes --agent NAME for a custom agent's memory: an agent you have, or for the
     verbs that read or remove facts, a deleted agent whose facts remain)

Kept out of :mod:`deerflow.cli`, which only wires it in.  It opens the memory
store directly (no run manager, no sandbox): the command is instant and works
while a server runs on the same home.
"""

from __future__ import annotations

import argparse
import json
import shlex
from contextlib import ExitStack
from typing import Any


def add_parser(sub: Any) -> None:
    """Add the ``memory`` command to the main CLI's subparsers."""
    memory = sub.add_parser("memory", help="what DeerFlow remembers about you across threads")
    actions = memory.add_subparsers(dest="memory_command", required=True)
    listing = actions.add_parser("list", help="every remembered fact, newest first")
    listing.add_argument("--json", action="store_true", help="print a JSON list of facts")
    add = actions.add_parser("add", help="remember a fact; prints its id")
    add.add_argument("text")
    add.add_argument("--category", default="context", choices=["preference", "context", "project", "skill"])
    edit = actions.add_parser("edit", help="correct a fact's text")
    edit.add_argument("id")
    edit.add_argument("text")
    prompt = actions.add_parser("prompt", help="the memory block a run about TOPIC would show the model")
    prompt.add_argument("topic", nargs="?", default="")
    forget = actions.add_parser("forget", help="forget one fact")
    forget.add_argument("id")
    actions.add_parser("clear", help="forget everything")
    export = actions.add_parser("export", help="every fact with its source and times, as JSON")
    export.add_argument("--out", help="write to this file instead of stdout")
    changes = actions.add_parser("changes", help="what each run taught memory, newest first")
    changes.add_argument("--json", action="store_true", help="print a JSON list of change records")
    undo = actions.add_parser("undo", help="undo what a run taught memory (default: the latest change)")
    undo.add_argument("id", nargs="?", default="", metavar="RUN", help="the run id (or a prefix of it)")
    for action in actions.choices.values():
        action.add_argument("--agent", help="a custom agent's memory (default: the lead agent's)")


def run(client: Any, args: argparse.Namespace) -> int:
    """Execute ``deerflow memory ...``; user errors propagate to the main CLI (one line, status 1)."""
    from deerflow.memory.book import MemoryBook
    from deerflow.memory.commands import act_on_home, check_agent, render_text
    from deerflow.memory.store import open_store

    verb = args.memory_command
    if verb == "add":
        with ExitStack() as stack:
            store = open_store(client.config.storage, home=client.home.home, stack=stack,
                               embedding=client.config.memory.embedding)
            book = MemoryBook(store, client.user_id, agent=args.agent, max_facts=client.config.memory.max_facts)
            if args.agent is not None:
                check_agent(client.agent_store(), args.agent, verb, book)
            print(book.add(args.text, category=args.category).id)
        return 0
    argument = {"edit": lambda: f"{args.id} {shlex.quote(args.text)}", "prompt": lambda: args.topic}.get(
        verb, lambda: getattr(args, "id", ""))()
    result = act_on_home(client.config, client.home.home, client.user_id, verb, argument, agent=args.agent,
                         agents=client.agent_store() if args.agent is not None else None)
    if verb == "list" and args.json:
        print(json.dumps(result["facts"], ensure_ascii=False))
    elif verb == "changes" and args.json:
        print(json.dumps(result["changes"], ensure_ascii=False))
    elif verb == "export" and args.out:
        from deerflow.outfile import write_whole

        write_whole(args.out, lambda out: out.write(json.dumps(result, indent=2, ensure_ascii=False) + "\n"))
        print(f"wrote {len(result['facts'])} facts to {args.out}")
    else:
        print(render_text(verb, result))
    return 0


def print_run_memory(client: Any, event: Any, agent: str | None) -> None:
    """``memory: +2 facts (undo: deerflow memory undo RUN)`` once the run's extraction is over."""
    if event.status != "success":
        return

    try:
        change = client.learned_from_run(event.run_id, agent=agent, now=True)
    except TimeoutError:
        return
    if change is not None:
        undo = f"deerflow memory undo {event.run_id}" + (f" --agent {agent}" if agent else "")
        print(f"{change.summary()}  (see: deerflow memory changes; undo: {undo})")
