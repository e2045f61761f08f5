"""The ``deerflow`` commands other than ``run`` and ``reply``: each parsed command to its handler.

The capability groups (``mcp``, ``skills``, ``batches``, ``agents``, ``schedule``, ``memory``)
live with their capability and are only called from here; the rest (``threads``,
``artifacts``, ``export``, ``usage``, ``doctor``) are small enough to stay.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from deerflow.cli.runs import metadata_store, parse_reply_args, render_run, run_prompt
from deerflow.custom_agents.commands import run_agents_command
from deerflow.errors import UserError
from deerflow.mcp.cli import run_mcp_command
from deerflow.memory import cli as memory_cli
from deerflow.scheduling.commands import run_schedule_command
from deerflow.skills import cli as skills_cli
from deerflow.subagents import cli as batches_cli


def dispatch(client: Any, args: argparse.Namespace) -> int:
    """Run the parsed command on ``client``; its user errors propagate to ``main`` (one line)."""
    if args.command == "mcp":
        return run_mcp_command(client, args)
    if args.command == "usage":
        return _usage(client, args)
    if args.command == "threads":
        for t in client.threads():
            print(f"{t.thread_id}  {t.title or '(untitled)'}")
        return 0
    if args.command == "artifacts":
        client.thread(args.thread)
        for path in client.artifacts(args.thread):
            print(path)
        return 0
    if args.command == "export":
        from deerflow.outfile import write_whole

        out = args.out or f"{args.thread}.zip"
        folders = [f for f in args.folders.split(",") if f]
        client.thread(args.thread)  # an unknown thread is one line before any file is touched
        done = write_whole(out, lambda stream: client.export(args.thread, stream, folders=folders), binary=True)
        print(f"wrote {out}: {len(done.files)} file(s), {done.size} bytes")
        for skipped in done.skipped:
            print(f"left out {skipped}")
        return 0
    if args.command == "skills":
        return skills_cli.run(client, args)
    if args.command == "batches":
        return batches_cli.run(client, args)
    if args.command == "agents":
        return run_agents_command(client, args, render=render_run)
    if args.command == "schedule":
        return run_schedule_command(client, args)
    if args.command == "memory":
        return memory_cli.run(client, args)
    if args.command == "reply":
        answer = parse_reply_args(args.answer, args.field)
        return render_run(client, client.stream_reply(args.thread, answer), as_json=args.json)
    return run_prompt(client, args)


def _usage(client: Any, args: argparse.Namespace) -> int:
    try:
        from deerflow.runtime.usage import parse_since

        since = parse_since(args.since)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    store = metadata_store(client)
    from deerflow.runtime.usage import usage_report

    rows = usage_report(store.runs_since(since, user_id=None if args.all_users else client.user_id), by=args.by)
    if args.json:
        print(json.dumps([r.to_dict() for r in rows]))
        return 0
    if not rows:
        print("no usage recorded" + (f" since {args.since}" if args.since else ""))
        return 0
    width = max(len(args.by), *(len(r.key) for r in rows))
    print(f"{args.by:<{width}}  {'runs':>5}  {'tokens':>12}  {'input':>12}  {'output':>12}  calls")
    for r in rows:
        d = r.to_dict()
        total = f"{d['total_tokens']:,}" if d["total_tokens"] is not None else "unknown"
        unknown = f" ({d['unknown_calls']} without usage)" if d["unknown_calls"] else ""
        print(f"{r.key:<{width}}  {d['runs']:>5}  {total:>12}  {d['input_tokens']:>12,}  {d['output_tokens']:>12,}"
              f"  {d['calls']}{unknown}")
    return 0


def doctor_command(args: argparse.Namespace) -> int:
    """``deerflow doctor``: without a client, since it must work when the config or storage is broken."""
    from pathlib import Path

    from deerflow import doctor
    from deerflow.config.paths import HomePaths, default_home

    home = HomePaths(Path(args.home).expanduser() if args.home else default_home())
    findings = doctor.diagnose(args.config, home)
    repairs = doctor.repair_broken(findings) if args.repair else []
    if repairs:
        findings = doctor.diagnose(args.config, home)
    if args.json:
        print(json.dumps({"ok": all(f.ok for f in findings), "findings": [f.to_dict() for f in findings],
                          "repaired": [{"path": str(r.path), "moved": [[str(a), str(b)] for a, b in r.moved]}
                                       for r in repairs]}))
    else:
        for r in repairs:
            for old, new in r.moved:
                print(f"moved {old} -> {new}")
            print(f"created an empty store at {r.path}")
        for finding in findings:
            print(finding.line())
    return 0 if all(f.ok for f in findings) else 1


__all__ = ["dispatch", "doctor_command"]
