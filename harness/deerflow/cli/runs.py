"""``deerflow run`` and ``deerflow reply``: start or continue a run and show its events.

Also what the notebook magics share with the CLI: :func:`parse_reply_args` (``%deerflow
reply``) and the continuation prompt of ``--continue`` (:func:`continuation_prompt`,
:func:`resume_prompt`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from deerflow.errors import UserError
from deerflow.memory import cli as memory_cli

if TYPE_CHECKING:  # the run machinery is imported when a command needs it: `--help` stays fast
    from deerflow.runtime import events as ev

EXIT_STOPPED = 3  # a guard (loop detection...) ended the run


def run_prompt(client: Any, args: argparse.Namespace) -> int:
    """``deerflow run``: the run's status as the exit status (see :func:`render_run`)."""
    if args.resume:
        args.prompt = continuation_prompt(client, args.thread, args.prompt)
    elif not args.prompt:
        raise UserError("give a prompt (or --thread ID --continue to resume a stopped run)")
    if args.record:  # a cassette that cannot be written would fail the run at its first model call
        from deerflow.outfile import check_appendable

        check_appendable(args.record)
    prompt = args.prompt if not args.skill else f"/{args.skill} {args.prompt}"
    options = {k: v for k, v in {
        "model_name": args.model, "interaction_mode": args.mode, "is_plan_mode": args.plan or None,
        "record": args.record, "replay": args.replay,
        "agent_name": args.agent, "referenced_threads": args.ref or None,
        "memory": False if args.no_memory else None,
    }.items() if v is not None}
    return render_run(client, client.stream(prompt, args.thread, **options), as_json=args.json, agent=args.agent)


def render_run(client: Any, events: Iterable[ev.Event], *, as_json: bool, agent: str | None = None) -> int:
    """Print a run's events (``as_json``: one a line); 0 on success, 3 when a guard stopped it, else 1."""
    from deerflow.runtime import events as ev
    from deerflow.terminal import TerminalRenderer

    render = _print_json if as_json else TerminalRenderer(sys.stdout).render
    finished: ev.RunFinished | None = None
    try:
        for event in events:
            render(event)
            if isinstance(event, ev.RunFinished):
                finished = event
                if not as_json:
                    _print_where(client, event)
                    memory_cli.print_run_memory(client, event, agent)
    finally:  # a failed write (closed pipe, full disk) ends the run now: a traceback kept by --debug
        close = getattr(events, "close", None)  # would hold the stream open and hang client.close()
        if callable(close):
            close()
    if finished is not None and finished.status == "stopped":
        print(f"deerflow: run stopped by {finished.stopped_by or 'a guard'}: {finished.error or 'no reason given'}",
              file=sys.stderr)
        return EXIT_STOPPED
    return 0 if finished is not None and finished.status in {"success", "interrupted"} else 1


CONTINUE_PROMPT = ("Continue the task from where you stopped: your previous run was interrupted ({reason}). "
                   "Tool calls that did not finish were not completed; check their effects and redo what is missing.")
RESUMABLE = ("error", "cancelled", "stopped")


def continuation_prompt(client: Any, thread_id: str | None, extra: str | None) -> str:
    """The prompt that resumes ``thread_id``'s last run (UserError when there is nothing to continue)."""
    if not thread_id:
        raise UserError("--continue needs --thread ID (the thread whose run to resume)")
    client.thread(thread_id)  # unknown or foreign thread: one line
    runs = metadata_store(client).list_runs(thread_id, client.user_id)
    last = runs[-1] if runs else None
    return resume_prompt(thread_id, last.status if last else None, last.error if last else None, extra)


def resume_prompt(thread_id: str, status: str | None, error: str | None, extra: str | None = None) -> str:
    """The continuation prompt for a thread whose last run ended ``status`` (``%deerflow continue`` too).

    Raises:
        UserError: the last run did not end in a way that can be continued (or there is none).
    """
    if status is None or status not in RESUMABLE:
        state = f"its last run ended {status}" if status else "it has no run yet"
        raise UserError(f"thread {thread_id} has nothing to continue: {state}")
    reason = (error or status).removeprefix("interrupted: ")
    prompt = CONTINUE_PROMPT.format(reason=reason)
    return f"{prompt}\n\n{extra}" if extra else prompt


def metadata_store(client: Any) -> Any:
    """The run records of the client's home, read without starting the runtime's services."""
    from deerflow.persistence.store import MetadataStore

    return MetadataStore(client.home.metadata)


def parse_reply_args(text: str | None, fields: Sequence[str]) -> Any:
    """The answer of ``deerflow reply``: the text, or ``{name: value | [values]}`` from ``--field``."""
    if fields and text is not None:
        raise UserError("give either an answer text or --field values, not both")
    if not fields:
        if text is None:
            raise UserError("give an answer text, or --field NAME=VALUE for each form field")
        return text
    values: dict[str, list[str]] = {}
    for item in fields:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise UserError(f"--field expects NAME=VALUE, got {item!r}")
        values.setdefault(name.strip(), []).append(value)
    return {name: found[0] if len(found) == 1 else found for name, found in values.items()}


def _print_json(event: ev.Event) -> None:
    print(event.model_dump_json(), flush=True)


def _print_where(client: Any, event: ev.RunFinished) -> None:
    outputs = client.home.thread(client.user_id, event.thread_id).outputs
    print(f"\nthread: {event.thread_id}  (continue with: deerflow run --thread {event.thread_id} \"...\")")
    if event.artifacts:
        print(f"artifacts are in {outputs}")


__all__ = ["EXIT_STOPPED", "continuation_prompt", "metadata_store", "parse_reply_args", "render_run",
           "resume_prompt", "run_prompt"]
