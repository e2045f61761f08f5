"""``deerflow``: run the agent from a terminal.

    deerflow run "PROMPT" [--thread ID] [--model NAME] [--mode M] [--skill S] [--json]
    deerflow run --thread ID --continue          (resume a run the server's stop or a cancel ended)
    deerflow usage [--by user|thread|day|model] [--since YYYY-MM-DD] [--all-users] [--json]
    deerflow reply THREAD ["ANSWER"] [--field NAME=VALUE ...] [--json]
    deerflow threads
    deerflow mcp list|tools|reset
    deerflow artifacts THREAD
    deerflow export THREAD [--out F.zip] [--folders outputs,workspace,uploads]
    deerflow skills list|show NAME|install PATH [--replace]|enable NAME|disable NAME
    deerflow batches list|status ID|export ID [--out F]|cancel ID|worker [--until-idle]
    deerflow agents list|show NAME|delete NAME|new NAME ["WHAT IT IS FOR"] [--display-name X]
    deerflow schedule add "PROMPT" --cron EXPR [--agent A] [--thread T] [--tz Z]|list|remove ID|runs ID|run-due
    deerflow memory list [--json]|add "TEXT"|forget ID|clear|export [--out F]
    deerflow doctor [--repair] [--json]
    deerflow demo [--out DIR]
    deerflow lab [--dir DIR] [JUPYTER LAB OPTIONS]

User errors (bad config, unknown thread, empty prompt) print one line and
exit with status 1 (2 for configuration errors, 75 when the thread already has
an active run, here or in another process: try again later); never a traceback.
A run a guard ended (loop detection) prints why on stderr and exits with status 3.
A failed run (a model error, a crash) is one line too; ``deerflow --debug ...``
also prints the traceback.

The user is ``--user``, else ``$DEERFLOW_USER``, else the OS user: the same one the
magics and a local Jupyter server use, so their threads are the CLI's.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deerflow.arguments import OneLineParser
from deerflow.custom_agents.commands import add_agents_parser, run_agents_command
from deerflow.errors import ToolFailure, UserError
from deerflow.lab import EXAMPLES_DIR
from deerflow.mcp.cli import add_mcp_parser, run_mcp_command
from deerflow.memory import cli as memory_cli
from deerflow.scheduling.commands import add_schedule_parser, run_schedule_command
from deerflow.skills import cli as skills_cli
from deerflow.subagents import cli as batches_cli

if TYPE_CHECKING:  # the run machinery is imported when a command needs it: `--help` stays fast
    from deerflow.runtime import events as ev

EXIT_STOPPED = 3  # a guard (loop detection...) ended the run
EXIT_PIPE_CLOSED = 141  # stdout's reader closed the pipe (128 + SIGPIPE, what a shell reports for it)
DEBUG_HINT = "deerflow --debug ... shows the traceback"
RUN_FAILURE_LOGGER = "deerflow.runs.execution"  # its failures also arrive as the run's error event
PG_POOL_LOGGER = "psycopg.pool"  # its failures arrive as one StoreUnavailable line (persistence/pgsql.py)
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


def main(argv: Sequence[str] | None = None) -> int:
    """``deerflow ARGV``: the exit status (argparse's errors and ``--help`` exit with SystemExit)."""
    try:
        status = _command(argv)
        sys.stdout.flush()  # a reader that went away shows here, not as a warning at exit
        return status
    except BrokenPipeError:  # `deerflow run --json | head -3`: the reader has what it wanted
        _drop_stdout()
        return EXIT_PIPE_CLOSED


def _command(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if args.command == "lab":  # everything after `lab` belongs to jupyter lab, options included, in order
        raw = list(sys.argv[1:] if argv is None else argv)
        at = next(i for i, word in enumerate(raw)
                  if word == "lab" and (i == 0 or raw[i - 1] not in {"--config", "--home", "--user"}))
        from deerflow.lab import run_lab

        return run_lab(raw[at + 1:])
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    configure_logging(debug=args.debug)
    if args.command == "doctor":  # before the client: it must work when the config or storage is broken
        return _doctor(args)
    if args.command == "demo":
        # the notebook runner lives in deerflow_kernel, which the harness never imports: a child process
        import subprocess

        return subprocess.call([sys.executable, "-m", "deerflow_kernel.demo", "--out", str(args.out)])
    # not at the top: `--help` stays fast
    from deerflow.config.paths import UnsafeIdError, check_id, default_user

    try:
        from deerflow.client import DeerFlowClient

        user = check_id(args.user, kind="user") if args.user is not None else default_user()
        client = DeerFlowClient(config_path=args.config, home=args.home, user_id=user)
    except (UserError, UnsafeIdError) as exc:
        print(f"deerflow: {exc}", file=sys.stderr)
        return getattr(exc, "exit_code", 2)
    configure_logging(debug=args.debug, config=client.config)  # its format, and its secrets redacted
    try:
        status = _dispatch(client, args)
        sys.stdout.flush()  # while BrokenPipeError is still handled below, not told as a failure
        return status
    except (UserError, ToolFailure) as exc:
        print(f"deerflow: {exc}", file=sys.stderr)
        return getattr(exc, "exit_code", 1)
    except KeyboardInterrupt:
        print("\ndeerflow: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # handled here: the traceback would keep the run's event stream open past close()
        _drop_stdout()
        return EXIT_PIPE_CLOSED
    except Exception as exc:  # a bug or a failure with no user error to show: one line, unless --debug
        if args.debug:
            raise
        known = _known_failure(exc, client)
        if known is not None:
            print(f"deerflow: {known}", file=sys.stderr)
            return known.exit_code
        print(f"deerflow: {type(exc).__name__}: {_first_line(exc)} ({DEBUG_HINT})", file=sys.stderr)
        return 1
    finally:
        client.close()


def _drop_stdout() -> None:
    """Point stdout at /dev/null: its buffer, flushed again at exit, would fail on the closed pipe."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (AttributeError, OSError, ValueError):  # a stdout with no descriptor (tests, embedding)
        pass


def _known_failure(exc: BaseException, client: Any) -> UserError | None:
    """The user error an exception that is not a ``UserError`` stands for, else None (a bug).

    An unsafe id given on the command line (``--thread ../x``, ``--agent ../x``) and a model
    set up wrong (a missing or corrupt ``--replay`` cassette, a bad script) say what to fix:
    one line, status 1, no "--debug" hint.  SQLite's "database is locked" after the stores'
    busy timeout is the one-line ``StoreUnavailable`` (status 75): a bare ``OperationalError``
    says nothing about which file or what to do.
    """
    import sqlite3

    from deerflow.config.paths import UnsafeIdError
    from deerflow.models.script_format import ModelError
    from deerflow.persistence.aio import StoreUnavailable
    from deerflow.persistence.sqlite import is_locked_error

    if isinstance(exc, (UnsafeIdError, ModelError)):
        return UserError(str(exc))
    if not isinstance(exc, sqlite3.OperationalError) or not is_locked_error(exc):
        return None
    return StoreUnavailable(client.home.home, "a database under it is locked by another process")


def configure_logging(*, debug: bool, config: Any = None) -> None:
    """Warnings and errors on stderr, one line each; tracebacks only with ``--debug``.

    A failed run is logged by the runtime *and* reported as the run's error event, which
    the renderer prints: without ``--debug`` the runtime's record is left out, so the failure
    is one line; with it, the runtime's debug record carries the traceback.  Once the
    config is known (``config``), its ``logging.format: json`` makes each line a JSON
    object, and its secrets (and the environment's) are redacted from every line.
    """
    from deerflow.logs import JsonFormatter, RedactFilter, config_secrets

    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(RedactFilter(config_secrets(config) if config is not None else ()))
    if config is not None and config.logging.format == "json":
        handler.setFormatter(JsonFormatter(tracebacks=debug))
    else:
        handler.setFormatter(_OneLine("%(name)s: %(levelname)s: %(message)s", debug=debug))
    if not debug:
        handler.addFilter(lambda record: not (record.name == RUN_FAILURE_LOGGER and record.levelno >= logging.WARNING))
        # a pool's every failed attempt to reach PostgreSQL: the command's own error names it once
        handler.addFilter(lambda record: not record.name.startswith(PG_POOL_LOGGER))
    handler.set_name("deerflow-cli")
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == "deerflow-cli"]:  # main() called again
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if debug else logging.WARNING)
    if debug:  # the libraries' chatter stays out; ours is what --debug is for
        for noisy in ("httpx", "httpcore", "asyncio", "aiosqlite", "urllib3", "openai", "mcp"):
            logging.getLogger(noisy).setLevel(logging.WARNING)


class _OneLine(logging.Formatter):
    """A formatter that keeps each record on one line unless tracebacks are wanted."""

    def __init__(self, fmt: str, *, debug: bool) -> None:
        super().__init__(fmt)
        self.debug = debug

    def format(self, record: logging.LogRecord) -> str:
        if self.debug:
            return super().format(record)
        line = record.getMessage().strip().splitlines()[0] if record.getMessage().strip() else ""
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            # the redacted form when the handler's RedactFilter made one
            line += f": {getattr(record, 'exc_error', None) or type(exc).__name__ + ': ' + _first_line(exc)}" \
                    f" ({DEBUG_HINT})"
        return f"{record.name}: {record.levelname.lower()}: {line}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:500] if text else ""


def _dispatch(client: Any, args: argparse.Namespace) -> int:
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
        return run_agents_command(client, args, render=_render_run)
    if args.command == "schedule":
        return run_schedule_command(client, args)
    if args.command == "memory":
        return memory_cli.run(client, args)
    if args.command == "reply":
        answer = parse_reply_args(args.answer, args.field)
        return _render_run(client, client.stream_reply(args.thread, answer), as_json=args.json)
    return _run(client, args)


def _run(client: Any, args: argparse.Namespace) -> int:
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
    return _render_run(client, client.stream(prompt, args.thread, **options), as_json=args.json, agent=args.agent)


def _render_run(client: Any, events: Iterable[ev.Event], *, as_json: bool, agent: str | None = None) -> int:
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
    runs = _store(client).list_runs(thread_id, client.user_id)
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


def _store(client: Any) -> Any:
    """The run records of the client's home, read without starting the runtime's services."""
    from deerflow.persistence.store import MetadataStore

    return MetadataStore(client.home.metadata)


def _usage(client: Any, args: argparse.Namespace) -> int:
    try:
        from deerflow.runtime.usage import parse_since

        since = parse_since(args.since)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    store = _store(client)
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


def _doctor(args: argparse.Namespace) -> int:
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


if __name__ == "__main__":
    sys.exit(main())
