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

The package, by concern: :mod:`.parser` (every command and option), :mod:`.runs` (``run``,
``reply``: a run's events in the terminal), :mod:`.commands` (the other commands; the
capability groups live with their capability), :mod:`.log_format` (stderr's log lines);
here, :func:`main`: the exit status, and every failure as one line.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from deerflow.cli.commands import dispatch, doctor_command
from deerflow.cli.log_format import DEBUG_HINT, configure_logging, first_line
from deerflow.cli.parser import USAGE_GROUPINGS, build_parser
from deerflow.cli.runs import EXIT_STOPPED, continuation_prompt, parse_reply_args, resume_prompt
from deerflow.errors import ToolFailure, UserError

EXIT_PIPE_CLOSED = 141  # stdout's reader closed the pipe (128 + SIGPIPE, what a shell reports for it)


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
        return doctor_command(args)
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
        status = dispatch(client, args)
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
        print(f"deerflow: {type(exc).__name__}: {first_line(exc)} ({DEBUG_HINT})", file=sys.stderr)
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


__all__ = ["DEBUG_HINT", "EXIT_PIPE_CLOSED", "EXIT_STOPPED", "USAGE_GROUPINGS", "build_parser", "configure_logging",
           "continuation_prompt", "main", "parse_reply_args", "resume_prompt"]
