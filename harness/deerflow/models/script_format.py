"""The script format of :class:`~deerflow.models.scripted.ScriptedChatModel`: parsing and errors.

A script is YAML (a bare list of turns is accepted too)::

    name: hello                # optional, defaults to the file stem
    context_window: 8000       # optional, exposed as ``profile["max_input_tokens"]``
    when_exhausted: explain    # optional: past the last turn, say so in a text answer
                               # (default ``error``: ScriptExhaustedError, for tests)
    turns:                     # the main conversation (the lead agent's)
      - text: "Let me write that."      # text and/or tool_calls
        tool_calls:
          - name: write_file
            args: {path: /mnt/user-data/outputs/hello.md, content: "# Hello"}
            id: call_custom              # optional, default call_<turn>_<n>
        expect: "hello"                  # optional: the latest user/tool message must contain it
      - "A plain string is a text-only turn."
    conversations:             # optional: other conversations the same model plays
      - match: "Write the summary"       # chosen when the first user message contains this
        name: summary                    # optional label (errors, turn stamps)
        turns: [...]

``conversations`` exist for agents that start conversations of their own — a
subagent's conversation begins with its own task message at turn 0, so one
script can play the lead and each child: the first conversation whose
``match`` is a substring of the conversation's first user message is played,
else the main ``turns``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

_TURN_KEYS = frozenset({"text", "tool_calls", "expect"})
_TOOL_CALL_KEYS = frozenset({"name", "args", "id"})
_SCRIPT_KEYS = frozenset({"name", "description", "context_window", "turns", "conversations", "when_exhausted"})
WHEN_EXHAUSTED = ("error", "explain")
_CONVERSATION_KEYS = frozenset({"match", "name", "turns"})


class ModelError(ValueError):
    """A model cannot answer because of how it was set up (its script or cassette).

    These are user errors: the message says what to fix, no traceback is needed.
    """


class ScriptError(ModelError):
    """The script is not valid; the message names the script and the turn."""


class ScriptExhaustedError(ModelError):
    """The conversation asked for a turn past the end of the script."""

    def __init__(self, script: str, turns: int, requested: int) -> None:
        self.script = script
        self.turns = turns
        self.requested = requested
        last = f" (turns 0-{turns - 1})" if turns else ""
        super().__init__(
            f"script {script!r} has {turns} turns{last} but the conversation asks for "
            f"turn {requested}: it already holds {requested} AI messages. Add turns to "
            "the script or start a new thread."
        )


class ScriptMismatchError(ModelError):
    """A turn's ``expect`` text is not in the latest user or tool message."""


@dataclass(frozen=True)
class ScriptToolCall:
    """One tool call a turn makes."""

    name: str
    args: dict[str, Any]
    id: str


@dataclass(frozen=True)
class ScriptTurn:
    """One answer of the model: text and/or tool calls."""

    text: str = ""
    tool_calls: tuple[ScriptToolCall, ...] = ()
    expect: str | None = None


@dataclass(frozen=True)
class ScriptConversation:
    """Turns played when a conversation's first user message contains ``match``."""

    match: str
    name: str
    turns: tuple[ScriptTurn, ...]


@dataclass(frozen=True)
class Script:
    """A parsed script."""

    name: str
    turns: tuple[ScriptTurn, ...]
    context_window: int | None = None
    conversations: tuple[ScriptConversation, ...] = ()
    when_exhausted: str = "error"


ScriptSource = str | Path | Mapping[str, Any] | Sequence[Any] | Script


def load_script(source: ScriptSource) -> Script:
    """Parse a script from a path, YAML text or already-parsed data.

    A string is a path when it is a single line that names an existing file or ends
    in ``.yaml``/``.yml``; otherwise it is YAML text.

    Raises:
        ScriptError: if the file is missing or the script is invalid.
    """
    if isinstance(source, Script):
        return source
    if isinstance(source, Path) or (isinstance(source, str) and _looks_like_path(source)):
        path = Path(source).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ScriptError(f"cannot read script file {path}: {exc.strerror}") from exc
        return parse_script(_parse_yaml(text, name=str(path)), name=path.stem)
    if isinstance(source, str):
        return parse_script(_parse_yaml(source, name="inline"), name="inline")
    return parse_script(source, name="inline")


def _looks_like_path(text: str) -> bool:
    line = text.strip()
    if not line or "\n" in line:
        return False
    if line.endswith((".yaml", ".yml")):
        return True
    try:
        return Path(line).expanduser().is_file()
    except OSError:  # a long YAML line is not a valid file name
        return False


def _parse_yaml(text: str, *, name: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ScriptError(f"script {name!r}: invalid YAML{where}: {problem}") from exc


def parse_script(data: Any, *, name: str = "inline") -> Script:
    """Validate parsed YAML data into a :class:`Script`.

    Raises:
        ScriptError: naming the script and, for a bad turn, the turn index.
    """
    context_window = None
    conversations: tuple[ScriptConversation, ...] = ()
    when_exhausted = "error"
    if isinstance(data, Mapping):
        unknown = set(data) - _SCRIPT_KEYS
        if unknown:
            raise ScriptError(f"script {name!r}: unknown keys {sorted(unknown)}")
        name = str(data.get("name") or name)
        context_window = data.get("context_window")
        if context_window is not None and (
            not isinstance(context_window, int) or context_window <= 0
        ):
            raise ScriptError(f"script {name!r}: context_window must be a positive integer")
        conversations = _parse_conversations(name, data.get("conversations"))
        when_exhausted = data.get("when_exhausted", "error")
        if when_exhausted not in WHEN_EXHAUSTED:
            raise ScriptError(f"script {name!r}: when_exhausted must be one of {list(WHEN_EXHAUSTED)}")
        data = data.get("turns")
    turns = _parse_turns(name, data)
    return Script(name=name, turns=turns, context_window=context_window, conversations=conversations,
                  when_exhausted=when_exhausted)


def _parse_turns(name: str, data: Any) -> tuple[ScriptTurn, ...]:
    if not isinstance(data, Sequence) or isinstance(data, str) or not data:
        raise ScriptError(f"script {name!r}: expected a non-empty list of turns")
    return tuple(_parse_turn(name, index, raw) for index, raw in enumerate(data))


def _parse_conversations(script: str, raw: Any) -> tuple[ScriptConversation, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        raise ScriptError(f"script {script!r}: 'conversations' must be a list")
    out = []
    for index, entry in enumerate(raw):
        where = f"script {script!r} conversation {index}"
        if not isinstance(entry, Mapping):
            raise ScriptError(f"{where}: must be a mapping with 'match' and 'turns'")
        unknown = set(entry) - _CONVERSATION_KEYS
        if unknown:
            raise ScriptError(f"{where}: unknown keys {sorted(unknown)}")
        match = entry.get("match")
        if not isinstance(match, str) or not match.strip():
            raise ScriptError(f"{where}: 'match' must be a non-empty string")
        label = str(entry.get("name") or f"conversation-{index}")
        out.append(ScriptConversation(match, label, _parse_turns(f"{script}/{label}", entry.get("turns"))))
    return tuple(out)


def _parse_turn(script: str, index: int, raw: Any) -> ScriptTurn:
    where = f"script {script!r} turn {index}"
    if isinstance(raw, str):
        raw = {"text": raw}
    if not isinstance(raw, Mapping):
        raise ScriptError(f"{where}: a turn must be a mapping, got {type(raw).__name__}")
    unknown = set(raw) - _TURN_KEYS
    if unknown:
        raise ScriptError(f"{where}: unknown keys {sorted(unknown)} (use {sorted(_TURN_KEYS)})")
    text = raw.get("text") or ""
    if not isinstance(text, str):
        raise ScriptError(f"{where}: 'text' must be a string")
    calls = raw.get("tool_calls") or []
    if not isinstance(calls, Sequence) or isinstance(calls, str):
        raise ScriptError(f"{where}: 'tool_calls' must be a list")
    tool_calls = tuple(_parse_tool_call(where, index, n, call) for n, call in enumerate(calls))
    if not text and not tool_calls:
        raise ScriptError(f"{where}: a turn needs 'text' and/or 'tool_calls'")
    expect = raw.get("expect")
    if expect is not None and not isinstance(expect, str):
        raise ScriptError(f"{where}: 'expect' must be a string")
    return ScriptTurn(text=text, tool_calls=tool_calls, expect=expect)


def _parse_tool_call(where: str, turn: int, n: int, raw: Any) -> ScriptToolCall:
    where = f"{where} tool call {n}"
    if not isinstance(raw, Mapping):
        raise ScriptError(f"{where}: must be a mapping with 'name' and 'args'")
    unknown = set(raw) - _TOOL_CALL_KEYS
    if unknown:
        raise ScriptError(f"{where}: unknown keys {sorted(unknown)}")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise ScriptError(f"{where}: missing tool 'name'")
    args = raw.get("args", {})
    if not isinstance(args, Mapping):
        raise ScriptError(f"{where} ({name}): 'args' must be a mapping")
    call_id = raw.get("id") or f"call_{turn}_{n}"
    return ScriptToolCall(name=name, args=dict(args), id=str(call_id))
