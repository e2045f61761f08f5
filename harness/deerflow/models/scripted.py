"""The embedded offline model: a real chat model that plays a scripted conversation.

With no model configured the harness still has to run every real tool for real, so the
default model is a ``BaseChatModel`` that answers from a YAML script of turns instead of
a network.  It binds tools and streams like a provider model, so the agent loop, the
middlewares and the UI cannot tell the difference.

Turn selection is *stateless*: the turn to play is derived from the conversation the
model is shown (the number of AI messages already in it), never from a counter on the
instance.  A model rebuilt per run, a new process or a resumed thread therefore continues
the same conversation, and every new thread starts at turn 0.  Each answer is stamped
with its turn in ``response_metadata`` so a conversation whose older messages were
summarized away still continues after the latest stamped turn.

Script format (YAML; a bare list of turns is accepted too)::

    name: hello                # optional, defaults to the file stem
    context_window: 8000       # optional, exposed as ``profile["max_input_tokens"]``
    turns:
      - text: "Let me write that."      # text and/or tool_calls
        tool_calls:
          - name: write_file
            args: {path: /mnt/user-data/outputs/hello.md, content: "# Hello"}
            id: call_custom              # optional, default call_<turn>_<n>
        expect: "hello"                  # optional: the latest user/tool message must contain it
      - "A plain string is a text-only turn."
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.language_models.model_profile import ModelProfile
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import PrivateAttr

TURN_STAMP = "script_turn"
"""``response_metadata`` key holding the script turn an answer was played from."""

_TURN_KEYS = frozenset({"text", "tool_calls", "expect"})
_TOOL_CALL_KEYS = frozenset({"name", "args", "id"})
_SCRIPT_KEYS = frozenset({"name", "description", "context_window", "turns"})


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
class Script:
    """A parsed script."""

    name: str
    turns: tuple[ScriptTurn, ...]
    context_window: int | None = None


@dataclass
class ModelCall:
    """What the model was shown in one call, for tests and debugging.

    Attributes:
        messages: The conversation as the model received it.
        tools: Names of the tools bound for this call.
        kwargs: Remaining call options (``tool_choice``, ``stop``...).
        turn: The script turn the call asked for.
    """

    messages: list[BaseMessage]
    tools: list[str]
    kwargs: dict[str, Any] = field(default_factory=dict)
    turn: int = 0


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
        data = data.get("turns")
    if not isinstance(data, Sequence) or isinstance(data, str) or not data:
        raise ScriptError(f"script {name!r}: expected a non-empty list of turns")
    turns = tuple(_parse_turn(name, index, raw) for index, raw in enumerate(data))
    return Script(name=name, turns=turns, context_window=context_window)


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


def bound_tool_names(kwargs: Mapping[str, Any]) -> list[str]:
    """Names of the tools bound for a call, whatever format the binding used."""
    names = []
    for tool in kwargs.get("tools") or []:
        if isinstance(tool, BaseTool):
            names.append(tool.name)
        elif isinstance(tool, Mapping):
            function = tool.get("function")
            named = function if isinstance(function, Mapping) else tool
            names.append(str(named.get("name") or tool.get("type") or "?"))
        else:
            names.append(getattr(tool, "__name__", type(tool).__name__))
    return names


def bind_tool_schemas(
    model: BaseChatModel,
    tools: Sequence[Any],
    *,
    tool_choice: str | None = None,
    **kwargs: Any,
) -> Runnable[LanguageModelInput, AIMessage]:
    """Bind tools the way provider models do: OpenAI-format schemas in ``tools``.

    Offline models use this so the bound tool names reach ``_generate`` in the same
    shape a real provider's binding would have, which keeps cassette keys equal.
    """
    if tool_choice is not None:
        kwargs["tool_choice"] = tool_choice
    return model.bind(tools=[convert_to_openai_tool(tool) for tool in tools], **kwargs)


def count_ai_messages(messages: Sequence[BaseMessage]) -> int:
    """The conversation step: how many answers the model has already given."""
    return sum(isinstance(message, AIMessage) for message in messages)


def split_text(text: str, words_per_chunk: int) -> list[str]:
    """Cut text into pieces of a few words that concatenate back to ``text`` exactly."""
    if not text:
        return []
    words = re.split(r"(?<=\S)(?=\s)", text)
    size = max(1, words_per_chunk)
    return ["".join(words[i : i + size]) for i in range(0, len(words), size)]


def stream_message(
    message: AIMessage, *, words_per_chunk: int = 3
) -> Iterator[ChatGenerationChunk]:
    """Stream a finished message the way a provider would.

    Text arrives a few words at a time; tool calls, usage and metadata arrive in the
    final chunk (marked ``chunk_position="last"``) so that aggregating the chunks gives
    back the same message, tool calls included.
    """
    content = message.content
    pieces: list[Any] = (
        split_text(content, words_per_chunk) if isinstance(content, str) else [content]
    )
    last = pieces.pop() if pieces else ""
    for piece in pieces:
        yield ChatGenerationChunk(message=AIMessageChunk(content=piece))
    tool_call_chunks = [
        {"name": call["name"], "args": json.dumps(call["args"]), "id": call["id"], "index": i}
        for i, call in enumerate(message.tool_calls)
    ]
    yield ChatGenerationChunk(
        message=AIMessageChunk(
            content=last,
            tool_call_chunks=tool_call_chunks,
            response_metadata=dict(message.response_metadata),
            usage_metadata=message.usage_metadata,
            chunk_position="last",
        )
    )


def approximate_usage(messages: Sequence[BaseMessage], answer: AIMessage) -> dict[str, int]:
    """Token usage as ``usage_metadata``, estimated so token displays have numbers."""
    input_tokens = count_tokens_approximately(messages)
    output_tokens = count_tokens_approximately([answer])
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "total_tokens": input_tokens + output_tokens,
    }


class ScriptedChatModel(BaseChatModel):
    """A chat model that plays a script, turn by turn, with no network.

    Example:
        >>> model = ScriptedChatModel(script="- text: Hello!")
        >>> model.invoke("hi").content
        'Hello!'

    Attributes:
        turns: The parsed turns of the script.
        script_name: Name used in errors and ``response_metadata["model_name"]``.
        context_window: Context size to advertise (``profile["max_input_tokens"]``).
        words_per_chunk: How many words each streamed text chunk carries.
    """

    turns: tuple[ScriptTurn, ...]
    script_name: str = "inline"
    context_window: int | None = None
    words_per_chunk: int = 3
    _calls: list[ModelCall] = PrivateAttr(default_factory=list)

    def __init__(self, script: ScriptSource, **kwargs: Any) -> None:
        """Parse ``script`` (path, YAML text, parsed data or :class:`Script`).

        Raises:
            ScriptError: if the script is invalid.
        """
        parsed = load_script(script)
        if kwargs.get("context_window") is None:
            kwargs["context_window"] = parsed.context_window
        super().__init__(turns=parsed.turns, script_name=parsed.name, **kwargs)

    @classmethod
    def from_file(cls, path: str | Path, **kwargs: Any) -> ScriptedChatModel:
        """Build the model from a YAML script file."""
        return cls(script=Path(path), **kwargs)

    @property
    def calls(self) -> list[ModelCall]:
        """Every call made so far, shared by all bound copies of this model."""
        return self._calls

    @property
    def _llm_type(self) -> str:
        return "deerflow-scripted"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"script": self.script_name, "turns": len(self.turns)}

    def _resolve_model_profile(self) -> ModelProfile | None:
        profile = ModelProfile(
            tool_calling=True, tool_call_streaming=True, text_inputs=True, text_outputs=True
        )
        if self.context_window:
            profile["max_input_tokens"] = self.context_window
        return profile

    def bind_tools(
        self,
        tools: Sequence[Mapping[str, Any] | type | Any | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind tools as OpenAI-format schemas; each call records their names."""
        return bind_tool_schemas(self, tools, tool_choice=tool_choice, **kwargs)

    def turn_index(self, messages: Sequence[BaseMessage]) -> int:
        """The turn to play for this conversation.

        The turn after the latest answer stamped by this script, or else the number of
        AI messages in the conversation.
        """
        for message in reversed(messages):
            if isinstance(message, AIMessage):
                metadata = message.response_metadata
                stamp = metadata.get(TURN_STAMP)
                if isinstance(stamp, int) and metadata.get("model_name") == self._model_name:
                    return stamp + 1
                break
        return count_ai_messages(messages)

    @property
    def _model_name(self) -> str:
        return f"scripted:{self.script_name}"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        message = self._answer(messages, stop=stop, kwargs=kwargs)
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        message = self._answer(messages, stop=stop, kwargs=kwargs)
        yield from stream_message(message, words_per_chunk=self.words_per_chunk)

    def _answer(
        self, messages: list[BaseMessage], *, stop: list[str] | None, kwargs: dict[str, Any]
    ) -> AIMessage:
        index = self.turn_index(messages)
        options = {key: value for key, value in kwargs.items() if key != "tools"}
        if stop:
            options["stop"] = stop
        self._calls.append(ModelCall(list(messages), bound_tool_names(kwargs), options, turn=index))
        if index >= len(self.turns):
            raise ScriptExhaustedError(self.script_name, len(self.turns), index)
        turn = self.turns[index]
        if turn.expect is not None:
            self._check_expect(turn.expect, index, messages)
        message = AIMessage(
            content=turn.text,
            tool_calls=[
                {"name": call.name, "args": dict(call.args), "id": call.id, "type": "tool_call"}
                for call in turn.tool_calls
            ],
            response_metadata={
                "model_name": self._model_name,
                "finish_reason": "tool_calls" if turn.tool_calls else "stop",
                TURN_STAMP: index,
            },
        )
        message.usage_metadata = approximate_usage(messages, message)  # type: ignore[assignment]
        return message

    def _check_expect(self, expect: str, index: int, messages: Sequence[BaseMessage]) -> None:
        latest = next(
            (m for m in reversed(messages) if isinstance(m, HumanMessage | ToolMessage)), None
        )
        seen = latest.text if latest is not None else ""
        if expect not in seen:
            shown = seen if len(seen) <= 200 else seen[:200] + "…"
            raise ScriptMismatchError(
                f"script {self.script_name!r} turn {index} expects the latest user or tool "
                f"message to contain {expect!r}, but it is {shown!r}"
            )
