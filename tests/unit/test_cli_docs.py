"""Every ``deerflow ...`` command shown in README.md and docs/ parses with the CLI's own parser.

A renamed option or subcommand would otherwise leave the documentation showing a command that
fails.  Only the parse is checked (instant, nothing runs); the README's "Using it" block is also
run for real in tests/integration/test_readme_commands.py.  Synopsis lines are expanded:
``deerflow memory forget ID | clear | export [--out F]`` is three commands, with the option.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from deerflow.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_VALUES = {"N": "2"}  # placeholders an option's type checks (--concurrency N)


def shown_commands() -> list[tuple[str, str]]:
    """``(where, command)`` for each ``deerflow`` line in a fenced block, synopses expanded."""
    found = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        inside = False
        for number, raw in enumerate(doc.read_text(encoding="utf-8").splitlines(), start=1):
            if raw.strip().startswith("```"):
                inside = not inside
                continue
            line = re.sub(r"\s+#.*$", "", raw).strip().removeprefix("$ ").strip()
            if inside and line.startswith("deerflow "):
                found += [(f"{doc.relative_to(ROOT)}:{number}", c) for c in expand(line)]
    return found


def expand(line: str) -> list[str]:
    """``deerflow X a | b [--opt V]`` -> ``deerflow X a``, ``deerflow X b --opt V``."""
    first, *others = line.replace("[", "").replace("]", "").split(" | ")
    prefix = " ".join(first.split()[:2])
    return [first, *(f"{prefix} {other}" for other in others)]


def parse_error(command: str) -> str | None:
    argv = [SAMPLE_VALUES.get(word, word) for word in shlex.split(command)[1:]]
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            args, unknown = build_parser().parse_known_args(argv)
    except SystemExit as exc:
        return err.getvalue().strip() or f"exit {exc.code}"
    if unknown and args.command != "lab":  # lab passes the rest to jupyter lab
        return f"unrecognized arguments: {' '.join(unknown)}"
    return None


def test_the_docs_show_commands():
    assert len(shown_commands()) > 50  # the scan finds them (README alone shows dozens)


@pytest.mark.parametrize(("where", "command"), shown_commands())
def test_a_shown_command_parses(where: str, command: str):
    assert parse_error(command) is None, f"{where}: {command!r}: {parse_error(command)}"


def test_the_check_sees_a_wrong_command():
    assert parse_error("deerflow memory list --jsn") == "unrecognized arguments: --jsn"
    assert "invalid choice" in (parse_error("deerflow skill list") or "")
    assert expand("deerflow batches list | status ID [--out F]") == [
        "deerflow batches list", "deerflow batches status ID --out F"]
