"""SkillScan's reading of ``rm`` commands: a tokenizer, not a pattern.

``rm`` takes its options in any order and spelling (``-rf``, ``-r -f``,
``-fR``, ``--recursive --force``, ``--rec``, options after the operands), so
a regular expression that catches them all either misses forms or
backtracks.  This reads each line once: split into commands at shell
separators, split each command into words, and parse ``rm``'s options the
way GNU ``rm`` does.  Linear in the text, no regex.

A command is *destructive* when it removes recursively and one operand is
the root (``/``, ``/*``, ``//``) or the home directory (``~``, ``$HOME``,
``${HOME}``, with or without a trailing ``/`` or ``/*``), or when it passes
``--no-preserve-root`` at all (the only reason to is deleting ``/``).
Words are read from shell and from Python lists alike
(``["rm", "-rf", "/"]``): quotes, brackets and commas around a word are
ignored.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

_SEPARATORS = str.maketrans({c: "\n" for c in ";&|()`"})
_WORD_EDGES = "\"'[],"
_HOME = frozenset({"~", "$HOME", "${HOME}"})
ROOT_OR_HOME = "deletes the root or home directory"
NO_PRESERVE_ROOT = "turns off rm's protection of / (--no-preserve-root)"


@dataclass
class _RmCall:
    recursive: bool = False
    no_preserve_root: bool = False
    dangerous_operand: bool = False


def destructive_rm(text: str) -> Iterator[tuple[int, str]]:
    """``(line number, message)`` for each line of ``text`` with a destructive ``rm``."""
    if "rm" not in text:
        return
    for number, line in enumerate(text.splitlines(), start=1):
        if "rm" not in line:
            continue
        for command in line.translate(_SEPARATORS).split("\n"):
            message = _judge(command.split())
            if message:
                yield number, message
                break


def _judge(words: list[str]) -> str | None:
    cleaned = [w.strip(_WORD_EDGES) for w in words]
    for i, word in enumerate(cleaned):
        if word == "rm" or word.endswith("/rm"):
            call = _parse_rm(cleaned[i + 1:])
            if call.no_preserve_root:
                return NO_PRESERVE_ROOT
            if call.recursive and call.dangerous_operand:
                return ROOT_OR_HOME
    return None


def _parse_rm(args: list[str]) -> _RmCall:
    """GNU ``rm``'s options: clustered short flags, long names and their unambiguous prefixes, ``--``."""
    call = _RmCall()
    options_done = False
    for arg in args:
        if not options_done and arg == "--":
            options_done = True
        elif not options_done and arg.startswith("--"):
            name = arg[2:].split("=", 1)[0]
            call.recursive |= bool(name) and "recursive".startswith(name)
            call.no_preserve_root |= len(name) >= 2 and "no-preserve-root".startswith(name)
        elif not options_done and arg.startswith("-") and len(arg) > 1:
            call.recursive |= "r" in arg or "R" in arg
        else:
            call.dangerous_operand |= is_root_or_home(arg)
    return call


def is_root_or_home(operand: str) -> bool:
    """Whether ``operand`` names ``/`` or the home directory (a trailing ``/`` or ``/*`` included)."""
    parts = [p for p in operand.split("/") if p not in ("", ".")]
    if parts and parts[-1] == "*":
        parts.pop()
    if operand.startswith("/"):
        return not parts
    return len(parts) == 1 and parts[0] in _HOME
