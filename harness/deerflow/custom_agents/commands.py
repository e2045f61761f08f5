"""``deerflow agents list|show|delete|new``: custom agents from a terminal.

``new NAME [PROMPT]`` is a bootstrap run streamed like ``deerflow run``: the
model interviews (or reads the prompt) and calls ``setup_agent``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from deerflow.errors import UserError

RenderRun = Callable[[Any, Iterable[Any]], int]


def add_agents_parser(sub: Any) -> None:
    """The ``agents`` subcommand and its actions."""
    agents = sub.add_parser("agents", help="your custom agents (SOUL.md + config.yaml)")
    actions = agents.add_subparsers(dest="agents_action", required=True)
    actions.add_parser("list", help="list your agents")
    show = actions.add_parser("show", help="an agent's config and soul")
    show.add_argument("name")
    show.add_argument("--json", action="store_true")
    delete = actions.add_parser("delete", help="delete an agent")
    delete.add_argument("name")
    new = actions.add_parser("new", help="create (or re-create) an agent with a bootstrap run")
    new.add_argument("name")
    new.add_argument("prompt", nargs="?", help="what the agent is for (default: let the model ask)")
    new.add_argument("--model", help="model for the bootstrap run")
    new.add_argument("--display-name", help="the name people see (kept when the agent is re-created)")
    new.add_argument("--json", action="store_true", help="print one JSON event per line")


def run_agents_command(client: Any, args: argparse.Namespace, *, render: Callable[..., int]) -> int:
    """Execute ``deerflow agents ...``; ``render`` streams a run as ``deerflow run`` does."""
    store = client.agent_store()
    action = args.agents_action
    if action == "list":
        agents = store.list_agents()
        for agent in agents:
            print(f"{agent.name:<20} {agent.label if agent.label != agent.name else '':<20} "
                  f"{agent.config.description}")
        if not agents:
            print("no custom agents yet: create one with `deerflow agents new NAME \"what it is for\"`")
        return 0
    if action == "show":
        agent = store.get(args.name)
        if args.json:
            print(json.dumps(agent.summary(), indent=2))
        else:
            print(json.dumps(agent.config.model_dump(exclude_none=True), indent=2))
            print("\n--- SOUL.md ---\n" + agent.soul.rstrip())
        return 0
    if action == "delete":
        store.delete(args.name)
        print(f"deleted agent {args.name}")
        return 0
    return _new(client, args, render)


def _new(client: Any, args: argparse.Namespace, render: Callable[..., int]) -> int:
    prompt = args.prompt or f"Help me set up the custom agent {args.name!r}."
    options = {"agent_name": args.name, "is_bootstrap": True}
    if args.model:
        options["model_name"] = args.model
    ended: list[str] = []
    status = render(client, _watch(client.stream(prompt, None, **options), ended), as_json=args.json)
    # a run that asked the user something ("interrupted") may create the agent once they reply
    if status == 0 and (ended[-1:] == ["success"] or args.display_name) and not client.agent_store().exists(args.name):
        raise UserError(f"the bootstrap run did not create {args.name!r} (the model never called setup_agent)")
    if status == 0 and args.display_name:
        client.update_agent(args.name, display_name=args.display_name)
    return status


def _watch(events: Iterable[Any], ended: list[str]) -> Iterator[Any]:
    """``events`` as they come, noting the run's final status in ``ended``."""
    for event in events:
        if getattr(event, "type", None) == "run_finished":
            ended.append(event.status)
        yield event


__all__ = ["add_agents_parser", "run_agents_command"]
