"""Parsing ``%%deerflow`` / ``%deerflow`` arguments into :class:`CellOptions`.

Mistakes are :class:`~IPython.core.error.UsageError` with the usage line,
which IPython shows as one red message, never a traceback; a misspelt flag
names the closest valid one.  :meth:`CellOptions.run_options` turns the
flags into the harness's :class:`deerflow.run_options.RunOptions`.  The line magic
takes options only *before* the prompt, so a prompt may contain ``--``
text of its own: ``%deerflow --new Compare --verbose and -v``.
"""

from __future__ import annotations

import argparse
import difflib
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from IPython.core.error import UsageError

from deerflow import run_options as harness

try:
    from deerflow.runtime.interaction_policy import MODES
except ImportError:  # pragma: no cover - older harness
    MODES = ("interactive", "scheduled", "webhook", "autonomous")

SUBCOMMANDS = ("upload", "artifacts", "threads", "skills", "status", "models", "reply", "help", "mcp", "memory",
               "apply", "discard", "undo", "continue", "cells")
_VALUED = {"--thread", "--model", "--skill", "--mode", "--with", "--record", "--replay", "--agent", "--ref"}
_FLAGS = {"--new", "--plan", "--subagents", "--no-context", "--no-memory", "-h", "--help"}
_TOKEN = re.compile(r"\S+")


class HelpShown(Exception):
    """``--help`` was asked for and printed; nothing else to do."""


@dataclass
class CellOptions:
    """What one ``%%deerflow`` invocation asks for (its flags, parsed)."""

    thread: str | None = None
    new: bool = False
    model: str | None = None
    skill: str | None = None
    plan: bool = False
    subagents: bool = False
    mode: str | None = None
    with_vars: list[str] = field(default_factory=list)
    record: str | None = None
    replay: str | None = None
    agent: str | None = None
    refs: list[str] = field(default_factory=list)
    no_context: bool = False
    no_memory: bool = False

    def run_options(self) -> harness.RunOptions:
        """The harness run options these flags mean."""
        return harness.RunOptions(
            model_name=self.model, interaction_mode=self.mode,
            is_plan_mode=True if self.plan else None, subagent_enabled=True if self.subagents else None,
            record=_absolute(self.record), replay=_absolute(self.replay), agent_name=self.agent,
            referenced_threads=list(dict.fromkeys(self.refs)) or None,
            memory=False if self.no_memory else None,
        )


def _absolute(path: str | None) -> str | None:
    """Cassette paths are relative to the notebook, whatever directory the harness works in."""
    return str(Path(path).expanduser().resolve()) if path else None


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"%%deerflow: {message}{self._suggestion(message)}\n{self.format_usage().strip()}")

    def _suggestion(self, message: str) -> str:
        """``; did you mean --model?`` for an unrecognised flag close to a real one."""
        if not message.startswith("unrecognized arguments:"):
            return ""
        flags = [s for action in self._actions for s in action.option_strings if s.startswith("--")]
        for word in message.split(":", 1)[1].split():
            close = difflib.get_close_matches(word.split("=", 1)[0], flags, n=2)
            if word.startswith("-") and close:
                return f" (did you mean {' or '.join(close)}?)"
        return ""

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            raise UsageError(message.strip())
        raise HelpShown


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="%%deerflow", add_help=True,
                     description="Run the DeerFlow agent on the cell body (the prompt). {var} is filled "
                     "from the notebook's variables.")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--thread", metavar="T", help="continue (and switch to) thread T")
    where.add_argument("--new", action="store_true", help="start a new thread")
    parser.add_argument("--model", metavar="M", help="model name from config.yaml")
    parser.add_argument("--skill", metavar="S", help="activate skill S for this turn")
    parser.add_argument("--agent", metavar="NAME", help="run as custom agent NAME (create one with /bootstrap NAME)")
    parser.add_argument("--plan", action="store_true", help="plan mode (the agent keeps a todo list)")
    parser.add_argument("--subagents", action="store_true", help="let the agent delegate to subagents")
    parser.add_argument("--no-context", action="store_true",
                        help="do not give the agent the cells above this one as context")
    parser.add_argument("--no-memory", action="store_true",
                        help="this run neither sees nor adds to what DeerFlow remembers about you")
    parser.add_argument("--mode", choices=MODES, help="interaction mode (in-process only)")
    parser.add_argument("--ref", dest="refs", metavar="T", action="append", default=[],
                        help="let the agent read your other thread T for this run (read_conversation); repeatable")
    parser.add_argument("--with", dest="with_vars", metavar="VAR", nargs="+", action="extend", default=[],
                        help="upload notebook variables (DataFrame, path, bytes, dict/list) to the thread")
    cassette = parser.add_mutually_exclusive_group()
    cassette.add_argument("--record", metavar="F", help="record the model's answers to cassette F")
    cassette.add_argument("--replay", metavar="F", help="replay model answers from cassette F (offline)")
    return parser


def parse_cell_line(line: str) -> CellOptions:
    """The options on a ``%%deerflow`` line."""
    try:
        tokens = shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"%%deerflow: cannot parse the options ({exc})") from None
    return CellOptions(**vars(build_parser().parse_args(tokens)))


def split_line(line: str) -> tuple[CellOptions, str]:
    """``%deerflow [OPTIONS] PROMPT``: the leading options, then the prompt exactly as written."""
    tokens: list[str] = []
    pos = 0
    expect_value = False
    for match in _TOKEN.finditer(line):
        token = match.group(0)
        if expect_value:
            expect_value = False
        elif token == "--":
            pos = match.end()
            break
        elif token.split("=", 1)[0] in _VALUED:
            expect_value = "=" not in token
        elif token not in _FLAGS:
            pos = match.start()
            break
        tokens.append(token)
        pos = match.end()
    else:
        pos = len(line)
    if expect_value:
        raise UsageError(f"%deerflow: {tokens[-1]} needs a value\n{build_parser().format_usage().strip()}")
    return CellOptions(**vars(build_parser().parse_args(tokens))), line[pos:].strip()
