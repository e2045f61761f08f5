"""``deerflow batches``: durable batches from a terminal.

    deerflow batches list
    deerflow batches status ID
    deerflow batches export ID [--out FILE]     # JSONL, one item per line
    deerflow batches cancel ID
    deerflow batches worker [--concurrency N] [--lease S] [--until-idle]

Reads go straight to the batch store for the current ``--user`` (another
user's batch is "unknown"); no run manager is started, so listing a batch
never starts executing it.  ``worker`` runs the worker pool in this process
(:mod:`deerflow.subagents.batches.worker_main`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: `deerflow --help` stays cheap
    from deerflow.subagents.batches.submitter import BatchStatus


def add_parser(sub: Any) -> None:
    """Register ``deerflow batches``."""
    batches = sub.add_parser("batches", help="durable subagent batches: list, status, export, cancel, worker")
    commands = batches.add_subparsers(dest="batches_command", required=True)
    commands.add_parser("list", help="your batches")
    for name, text in (("status", "a batch's progress"), ("cancel", "cancel a batch durably")):
        commands.add_parser(name, help=text).add_argument("batch_id")
    export = commands.add_parser("export", help="a batch's items and results as JSONL")
    export.add_argument("batch_id")
    export.add_argument("--out", help="write to this file (default: stdout)")
    worker = commands.add_parser("worker", help="run batch items in this process")
    worker.add_argument("--concurrency", type=positive(int), help="items run at the same time (default: config)")
    worker.add_argument("--lease", type=positive(float), help="seconds an item is leased for (default: config)")
    worker.add_argument("--until-idle", action="store_true", help="exit once no item is queued")


def positive(kind: Callable[[str], float]) -> Callable[[str], Any]:
    """An argparse type: ``kind`` of the text, refused unless above zero.

    ``--lease 0`` (or ``-1``) would hand every item to the next worker at once, and a zero
    ``--concurrency`` silently fell back to the config's: both are typos to refuse.
    """
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be above zero, got {text!r}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def run(client: Any, args: argparse.Namespace) -> int:
    """Execute ``deerflow batches ...`` (UserErrors are printed by the caller)."""
    loaded, home = client.loaded, client.home
    if args.batches_command == "worker":
        import asyncio  # here, not at the top: ``deerflow --help`` should not pay for it

        from deerflow.subagents.batches.worker_main import run_worker

        stats = asyncio.run(run_worker(loaded, home, concurrency=args.concurrency, lease_seconds=args.lease,
                                       until_idle=args.until_idle))
        print(f"worker done: {stats.finished} items finished, {stats.cancelled} cancelled")
        return 0
    settings = loaded.config.subagents.batches
    from deerflow.subagents.batches.sql import open_backend
    from deerflow.subagents.batches.store import BatchStore
    from deerflow.subagents.batches.submitter import BatchSubmitter

    submitter = BatchSubmitter(BatchStore(open_backend(settings, home)), max_items=settings.max_items)
    user = client.user_id
    if args.batches_command == "list":
        for status in submitter.list(user):
            print(_line(status))
    elif args.batches_command == "status":
        print(_line(submitter.status(args.batch_id, user)))
    elif args.batches_command == "cancel":
        print(_line(submitter.cancel(args.batch_id, user)))
    elif args.batches_command == "export":
        submitter.status(args.batch_id, user)  # an unknown batch is one line before any file is touched
        lines = submitter.export_lines(args.batch_id, user)
        if args.out:
            from deerflow.outfile import write_whole

            count = write_whole(args.out, lambda out: sum(out.write(line + "\n") > 0 for line in lines))
            print(f"wrote {count} items to {args.out}", file=sys.stderr)
        else:
            for line in lines:
                print(line)
    return 0


def _line(status: BatchStatus) -> str:
    data = status.to_dict()
    execution = " ".join(f"{k}={v}" for k, v in data["execution"].items() if v)
    acceptance = " ".join(f"{k}={v}" for k, v in data["acceptance"].items() if v)
    state = "cancelled" if data["cancelled"] else "done" if data["done"] else "active"
    return (f"{data['batch_id']}  {state}  {data['finished']}/{data['items']}  [{execution}]"
            f"  acceptance: [{acceptance or '-'}]  {data['label']}")


__all__ = ["add_parser", "run"]
