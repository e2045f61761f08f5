"""Patterns from models and users compile on RE2: linear time, clear refusals."""

from __future__ import annotations

import fnmatch
import threading

import pytest

from deerflow.text.safe_regex import MAX_PATTERN_CHARS, PatternError, compile_pattern, glob_matches

HANG_GUARD_S = 10.0


def finishes(fn) -> bool:
    """Whether ``fn`` returns within the hang guard (Python's re needs minutes for these)."""
    done = threading.Event()
    threading.Thread(target=lambda: (fn(), done.set()), daemon=True).start()
    return done.wait(HANG_GUARD_S)


def test_nested_quantifiers_do_not_backtrack() -> None:
    regex = compile_pattern("(a+)+$")
    subject = "a" * 50_000 + "!"
    assert finishes(lambda: regex.search(subject))
    assert regex.search(subject) is None
    assert regex.search("aaa") is not None


@pytest.mark.parametrize(
    ("pattern", "hint"),
    [
        (r"(ab)\1", "backreferences"),
        (r"(?P<x>a)(?P=x)", "backreferences"),
        (r"foo(?=bar)", "lookahead"),
        (r"(?<!x)y", "lookbehind"),
        (r"(?>a+)b", "atomic"),
    ],
)
def test_unsupported_syntax_says_what_to_use_instead(pattern: str, hint: str) -> None:
    with pytest.raises(PatternError) as caught:
        compile_pattern(pattern)
    assert hint in caught.value.message
    assert "not supported" in caught.value.message


def test_invalid_and_oversized_patterns_are_refused_in_one_line() -> None:
    with pytest.raises(PatternError, match="Invalid regular expression: missing ]"):
        compile_pattern("[abc")
    with pytest.raises(PatternError, match="limit is"):
        compile_pattern("a" * (MAX_PATTERN_CHARS + 1))
    with pytest.raises(PatternError, match="empty"):
        compile_pattern("")


def test_options_case_literal_and_dot_all() -> None:
    assert compile_pattern("ÄB", ignore_case=True).search("xäb")
    literal = compile_pattern("a.b(", literal=True)
    assert literal.search("a.b(") and not literal.search("axb(")
    assert compile_pattern("a.b", dot_all=True).fullmatch("a\nb")
    assert not compile_pattern("a.b").fullmatch("a\nb")


@pytest.mark.parametrize("pattern", ["*", "mcp_*", "file_?", "[abc]*", "[!a]*", "web_*_search", "x[", "a.*"])
@pytest.mark.parametrize("name", ["bash", "mcp_time", "file_x", "abc", "web_foo_search", "x[", "a.b", ""])
def test_glob_matches_agrees_with_fnmatch(name: str, pattern: str) -> None:
    assert glob_matches(name, pattern) == fnmatch.fnmatchcase(name, pattern)


def test_glob_matches_a_hostile_tool_name_in_linear_time() -> None:
    assert finishes(lambda: glob_matches("a" * 1_000_000, "*a" * 60 + "b"))
    assert not glob_matches("a" * 1_000_000, "*a" * 60 + "b")
