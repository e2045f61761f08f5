"""Linear-time regular expressions for patterns and subjects we do not trust.

Python's :mod:`re` backtracks: ``(a+)+$`` against 28 ``a`` and a ``!`` runs for
seconds and doubles with every extra ``a``, and a hand-written audit rule with
a backreference went super-linear on a few kilobytes of shell.  Anything that
matches a model's or a user's pattern, or matches any rule against their text,
compiles here instead, on RE2 (``google-re2``): a match costs time linear in
the subject, whatever the pattern.

What that costs is syntax RE2 cannot run in linear time: backreferences
(``\\1``, ``(?P=name)``) and lookaround (``(?=``, ``(?!``, ``(?<=``, ``(?<!``).
:func:`compile_pattern` refuses them with a :class:`PatternError` whose
message says what to write instead, so a model can correct itself in one step.
Patterns are also bounded in length and in compiled size (``max_mem``).

:func:`compile_rule` is for the project's own rule tables: the same engine,
but a bad pattern is a programming error raised at import.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any, Protocol

import re2

__all__ = [
    "MAX_PATTERN_CHARS",
    "PatternError",
    "Regex",
    "compile_pattern",
    "compile_rule",
    "glob_matches",
]

MAX_PATTERN_CHARS = 2000
"""Longest pattern accepted from a model or a user."""

_MAX_MEM = 16 << 20
"""Memory RE2 may use for one compiled program (patterns beyond it are refused)."""

_HINTS: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        ("(?=", "(?!", "(?<=", "(?<!"),
        "lookahead and lookbehind ((?=, (?!, (?<=, (?<!) are not supported; match the "
        "surrounding text itself, or use a negated class such as [^x] instead",
    ),
    (
        ("(?P=", *(f"\\{d}" for d in range(1, 10))),
        "backreferences (\\1, (?P=name)) are not supported; match the repeated text "
        "explicitly, or search for the first part and check the rest in a second step",
    ),
    (("(?>", "*+", "++", "?+"), "atomic groups and possessive quantifiers are not needed "
     "and not supported; drop the ?> or the trailing +"),
)


class Regex(Protocol):
    """The part of a compiled pattern callers use (RE2's mirrors :mod:`re`)."""

    def search(self, text: str, pos: int = ..., endpos: int = ...) -> object | None: ...

    def fullmatch(self, text: str, pos: int = ..., endpos: int = ...) -> object | None: ...

    def finditer(self, text: str, pos: int = ..., endpos: int = ...) -> Iterator[Match]: ...


class Match(Protocol):
    """The part of a match callers use."""

    def group(self, index: int | str = ..., /) -> Any: ...


class PatternError(ValueError):
    """A pattern from a model or user that cannot be compiled; ``message`` says why."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _options(*, ignore_case: bool, literal: bool, dot_all: bool) -> re2.Options:
    options = re2.Options()
    options.case_sensitive = not ignore_case
    options.literal = literal
    options.dot_nl = dot_all
    options.max_mem = _MAX_MEM
    options.log_errors = False  # RE2 would print every refused pattern to stderr
    return options


def _explain(pattern: str, error: Exception) -> str:  # a re2.error
    """A one-line reason for a refused pattern, with what to use instead."""
    for markers, hint in _HINTS:
        if any(m in pattern for m in markers):
            return f"Unsupported regular expression: {hint}."
    detail = error.args[0] if error.args else error
    if isinstance(detail, bytes):
        detail = detail.decode("utf-8", "replace")
    return f"Invalid regular expression: {detail}."


def compile_pattern(
    pattern: str, *, ignore_case: bool = False, literal: bool = False, dot_all: bool = False
) -> Regex:
    """Compile a pattern a model or user wrote.

    Args:
        pattern: The regular expression (RE2 syntax, which is Python's minus
            backreferences and lookaround), or plain text when ``literal``.
        ignore_case: Match letters of either case.
        literal: Match ``pattern`` as plain text.
        dot_all: Let ``.`` match a newline.

    Raises:
        PatternError: the pattern is empty, too long, too large once compiled,
            or uses syntax RE2 cannot run in linear time; the message is fit
            for the model.
    """
    if not pattern:
        raise PatternError("The pattern is empty.")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternError(
            f"The pattern is {len(pattern):,} characters long; the limit is "
            f"{MAX_PATTERN_CHARS:,}. Search for a shorter, distinctive part."
        )
    try:
        return re2.compile(
            pattern, _options(ignore_case=ignore_case, literal=literal, dot_all=dot_all)
        )
    except re2.error as exc:
        raise PatternError(_explain(pattern, exc)) from None


def compile_rule(pattern: str, *, ignore_case: bool = False) -> Regex:
    """Compile one of the project's own rules (a bad one fails at import)."""
    return re2.compile(pattern, _options(ignore_case=ignore_case, literal=False, dot_all=False))


def _glob_to_regex(pattern: str) -> str:
    """An :mod:`fnmatch` pattern (``*``, ``?``, ``[seq]``, ``[!seq]``) as RE2 syntax."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        end = pattern.find("]", i + 2) if char == "[" else -1
        if char == "*":
            out.append(".*")
        elif char == "?":
            out.append(".")
        elif end != -1:
            body = pattern[i + 1 : end].replace("\\", "\\\\")
            out.append("[^" + body[1:] + "]" if body[0] == "!" else "[" + body + "]")
            i = end
        else:
            out.append(re2.escape(char))
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=512)
def _compiled_glob(pattern: str) -> Regex | None:
    try:
        return compile_pattern(_glob_to_regex(pattern), dot_all=True)
    except PatternError:
        return None


def glob_matches(name: str, pattern: str) -> bool:
    """``fnmatch.fnmatchcase(name, pattern)`` in linear time (a bad pattern matches nothing)."""
    regex = _compiled_glob(pattern)
    return regex is not None and regex.fullmatch(name) is not None
