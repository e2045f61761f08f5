"""``deerflow schedule add|list|remove|runs|run-due``: scheduled runs from a terminal.

``run-due`` runs the user's due schedules once and exits, so a plain system
crontab (``* * * * * deerflow schedule run-due``) is a scheduler too; the
Jupyter server extension does the same in the background.  Several
``run-due`` processes (or servers) on one ``$DEERFLOW_HOME`` never run one
schedule twice at once.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: `deerflow --help` stays cheap
    from deerflow.scheduling.store import Schedule, ScheduleRun


def add_schedule_parser(sub: Any) -> None:
    """The ``schedule`` subcommand and its actions."""
    schedule = sub.add_parser("schedule", help="scheduled runs (cron)")
    actions = schedule.add_subparsers(dest="schedule_action", required=True)
    add = actions.add_parser("add", help="run PROMPT on a cron schedule, unattended")
    add.add_argument("prompt")
    add.add_argument("--cron", required=True, help="five fields ('0 9 * * mon-fri') or @hourly/@daily/...")
    add.add_argument("--agent", help="custom agent to run as")
    add.add_argument("--thread", help="continue this thread each time (default: a fresh thread per run)")
    add.add_argument("--tz", default="UTC", help="time zone of the expression (default UTC)")
    for name, text in (("list", "list your schedules"), ("run-due", "run your due schedules now, then exit")):
        action = actions.add_parser(name, help=text)
        action.add_argument("--json", action="store_true")
    remove = actions.add_parser("remove", help="delete a schedule")
    remove.add_argument("schedule_id")
    runs = actions.add_parser("runs", help="a schedule's past runs and their receipts")
    runs.add_argument("schedule_id")
    runs.add_argument("--json", action="store_true")


def run_schedule_command(client: Any, args: argparse.Namespace) -> int:
    """Execute ``deerflow schedule ...``."""
    book = client.schedule_book()
    action = args.schedule_action
    if action == "add":
        schedule = book.add(cron=args.cron, prompt=args.prompt, agent_name=args.agent, thread_id=args.thread,
                            timezone=args.tz)
        print(f"schedule {schedule.schedule_id} added; first run at {_when(schedule.next_run_at)}")
        return 0
    if action == "remove":
        book.remove(args.schedule_id)
        print(f"removed schedule {args.schedule_id}")
        return 0
    if action == "list":
        return _print(book.list_schedules(), as_json=args.json, line=_schedule_line)
    if action == "runs":
        return _print(book.runs(args.schedule_id), as_json=args.json, line=_run_line)
    done = client.run_due_schedules()
    if not done and not args.json:
        print("nothing is due")
    _print(done, as_json=args.json, line=_run_line)
    return 0 if all(r.status in {"success", "interrupted", "deferred"} for r in done) else 1


def _print(items: list[Any], *, as_json: bool, line: Any) -> int:
    for item in items:
        print(json.dumps(item.to_dict()) if as_json else line(item))
    return 0


def _schedule_line(s: Schedule) -> str:
    target = f" agent={s.agent_name}" if s.agent_name else ""
    target += f" thread={s.thread_id}" if s.thread_id else ""
    return f"{s.schedule_id}  {s.cron!r} {s.timezone}  next {_when(s.next_run_at)}{target}  {s.prompt[:60]!r}"


def _run_line(r: ScheduleRun) -> str:
    extra = f" (+{r.missed_slots} missed slots folded in)" if r.missed_slots else ""
    receipt = f" delivery={r.receipt.get('status')}" if r.receipt else ""
    blocked = f" BLOCKED: {r.blocked.get('missing_decision')}" if r.blocked else ""
    error = f" error: {r.error}" if r.error else ""
    return (f"{r.schedule_id}  {_when(r.started_at)}  {r.status}{extra}  thread={r.thread_id}"
            f"{receipt}{blocked}{error}")


def _when(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


__all__ = ["add_schedule_parser", "run_schedule_command"]
