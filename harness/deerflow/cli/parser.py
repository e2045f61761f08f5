"""The ``deerflow`` command line: every command, option and help text (see :mod:`deerflow.cli`).

Only the parser: ``deerflow --help`` imports this and the capability CLIs' ``add_parser``
functions, never the run machinery.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from deerflow.arguments import OneLineParser
from deerflow.custom_agents.commands import add_agents_parser
from deerflow.lab import EXAMPLES_DIR
from deerflow.mcp.cli import add_mcp_parser
from deerflow.memory import cli as memory_cli
from deerflow.scheduling.commands import add_schedule_parser
from deerflow.skills import cli as skills_cli
from deerflow.subagents import cli as batches_cli

USAGE_GROUPINGS = ("user", "thread", "day", "model")  # deerflow.runtime.usage.GROUPINGS, without importing LangChain


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="deerflow", description="DeerFlow Notebook agent harness")
    parser.add_argument("--config", help="config.yaml to use (default: standard lookup)")
    parser.add_argument("--home", help="DEERFLOW_HOME to use")
    parser.add_argument("--user", help="user id (default: $DEERFLOW_USER, else the OS user)")
    parser.add_argument("--debug", action="store_true", help="print tracebacks of failures (runs, the CLI itself)")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the agent on a prompt and stream its progress")
    run.add_argument("prompt", nargs="?", help="what the agent should do (optional with --continue)")
    run.add_argument("--thread", help="continue this thread (default: a new one)")
    run.add_argument("--continue", dest="resume", action="store_true",
                     help="resume the thread's last run, ended by a server stop, a crash or a cancel")
    run.add_argument("--model", help="model name from config.yaml")
    run.add_argument("--mode", help="interaction mode: interactive, scheduled, webhook, autonomous")
    run.add_argument("--skill", help="activate a skill for this turn (same as starting the prompt with /NAME)")
    run.add_argument("--plan", action="store_true", help="plan mode (todo list)")
    run.add_argument("--agent", help="run as this custom agent (see `deerflow agents`)")
    run.add_argument("--ref", action="append", default=[], metavar="THREAD",
                     help="another of your threads the agent may read (read_conversation); repeatable")
    run.add_argument("--record", metavar="FILE", help="record the model's answers to a cassette")
    run.add_argument("--replay", metavar="FILE", help="replay model answers from a cassette (offline)")
    run.add_argument("--json", action="store_true", help="print one JSON event per line")
    run.add_argument("--no-memory", action="store_true",
                     help="this run neither sees nor teaches your memory (see `deerflow memory`)")
    run.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    reply = sub.add_parser("reply", help="answer a thread's clarification and continue the run")
    reply.add_argument("thread")
    reply.add_argument("answer", nargs="?", help="free-text answer, or an option (its text or number)")
    reply.add_argument("--field", action="append", default=[], metavar="NAME=VALUE",
                       help="a form value; repeat for each field (and for several choices)")
    reply.add_argument("--json", action="store_true", help="print one JSON event per line")
    reply.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    sub.add_parser("threads", help="list your threads")
    usage = sub.add_parser("usage", help="tokens used by your runs (per day, thread, user or model)")
    usage.add_argument("--by", choices=USAGE_GROUPINGS, default="day", help="group by (default: day)")
    usage.add_argument("--since", metavar="YYYY-MM-DD", help="only runs started on or after this day (UTC)")
    usage.add_argument("--all-users", action="store_true",
                       help="every user of this DEERFLOW_HOME (an operator's view; needs access to its files)")
    usage.add_argument("--json", action="store_true", help="print the rows as a JSON list")
    add_mcp_parser(sub)
    arts = sub.add_parser("artifacts", help="list a thread's presented artifacts")
    arts.add_argument("thread")
    export = sub.add_parser("export", help="write a zip of a thread's files (regular files only)")
    export.add_argument("thread")
    export.add_argument("--out", help="the zip file to write (default: THREAD.zip here)")
    export.add_argument("--folders", default="outputs", help="comma-separated: outputs, workspace, uploads")
    skills_cli.add_parser(sub)
    batches_cli.add_parser(sub)
    add_agents_parser(sub)
    add_schedule_parser(sub)
    memory_cli.add_parser(sub)
    doctor = sub.add_parser("doctor", help="check config, storage files and the sandbox; exit 1 if broken")
    doctor.add_argument("--repair", action="store_true",
                        help="move broken store files aside (renamed, never deleted) and start empty ones")
    doctor.add_argument("--json", action="store_true", help="print the findings as JSON")
    demo = sub.add_parser("demo", help="run the quickstart notebook headless on the offline model")
    demo.add_argument("--out", type=Path, default=Path("demo-output"),
                      help="where the executed notebook, its files and DEERFLOW_HOME go (default: demo-output)")
    lab = sub.add_parser("lab", help="start JupyterLab on the example notebooks (--dir DIR, default "
                         f"{EXAMPLES_DIR}); other options go to jupyter lab")
    lab.add_argument("lab_args", nargs=argparse.REMAINDER)
    return parser


__all__ = ["USAGE_GROUPINGS", "build_parser"]
