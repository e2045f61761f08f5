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

A script that sets ``when_exhausted: explain`` (the packaged quickstart does) never dead-ends:
past its last turn a continued thread gets a plain text answer saying the model is offline
and what a real model would do, instead of :class:`ScriptExhaustedError`.

The script format (turns, tool calls, ``expect``, and ``conversations`` for agents that
start conversations of their own, such as subagents) is parsed in
:mod:`deerflow.models.script_format`; its names are re-exported here.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
import weakref
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.language_models.model_profile import ModelProfile
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolCallChunk,
    ToolMessage,
    UsageMetadata,
)
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import PrivateAttr

from deerflow.models.script_format import (
    ModelError,
    Script,
    ScriptConversation,
    ScriptError,
    ScriptExhaustedError,
    ScriptMismatchError,
    ScriptSource,
    ScriptToolCall,
    ScriptTurn,
    load_script,
    parse_script,
)
from deerflow.models.tokens import approximate_tokens

__all__ = [
    "TURN_STAMP", "ModelCall", "ModelError", "Script", "ScriptConversation", "ScriptError",
    "ScriptExhaustedError", "ScriptMismatchError", "ScriptSource", "ScriptToolCall", "ScriptTurn",
    "ScriptedChatModel", "approximate_usage", "bind_tool_schemas", "bound_tool_names",
    "count_ai_messages", "load_script", "parse_script", "split_text", "stream_message",
]

TURN_STAMP = "script_turn"
"""``response_metadata`` key holding the script turn an answer was played from."""

CONVERSATION_STAMP = "script_conversation"
"""``response_metadata`` key naming the script conversation an answer belongs to."""

OFFLINE_CONTINUATION = (
    "I am DeerFlow's offline model, which plays a fixed script, and this thread's script is "
    "finished, so I cannot act on {request}. Nothing was changed. With a real model configured "
    "(see the README, 'Use a real model'), DeerFlow would read this thread's files and carry on "
    "from here; a new thread (no --thread) plays the offline script again."
)
"""The answer past the end of a ``when_exhausted: explain`` script ({request}: what was asked)."""


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
    return model.bind(tools=[openai_tool_schema(tool) for tool in tools], **kwargs)


_SCHEMAS: dict[int, tuple[weakref.ref[BaseTool], str, str, dict[str, Any]]] = {}


def openai_tool_schema(tool: Any) -> dict[str, Any]:
    """``convert_to_openai_tool(tool)``, converted once per tool object (treat it as read-only).

    The model is bound on every call, with the same (shared, immutable) tool
    objects each time; converting each schema again was ~0.1 ms a tool a call.
    A tool renamed or re-described after conversion is converted again.
    """
    if not isinstance(tool, BaseTool):
        return convert_to_openai_tool(tool)
    hit = _SCHEMAS.get(id(tool))
    if hit is not None and hit[0]() is tool and hit[1] == tool.name and hit[2] == tool.description:
        return hit[3]
    schema = convert_to_openai_tool(tool)
    if len(_SCHEMAS) > 4096:  # bounded: tools of finished hosts are forgotten
        _SCHEMAS.clear()
    _SCHEMAS[id(tool)] = (weakref.ref(tool), tool.name, tool.description, schema)
    return schema


def count_ai_messages(messages: Sequence[BaseMessage]) -> int:
    """The conversation step: how many answers the model has already given.

    AI messages the harness wrote itself (marked ``deerflow_note``, e.g. a tool call
    replayed after the user's approval) are not answers of the model.
    """
    return sum(_is_answer(message) for message in messages)


def _is_answer(message: BaseMessage) -> bool:
    return isinstance(message, AIMessage) and not message.additional_kwargs.get("deerflow_note")


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
    tool_call_chunks: list[ToolCallChunk] = [
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


def approximate_usage(messages: Sequence[BaseMessage], answer: AIMessage) -> UsageMetadata:
    """Token usage as ``usage_metadata``, estimated so token displays have numbers."""
    input_tokens = approximate_tokens(messages)  # remembered per message: a long thread is not re-read
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
        latency: Seconds each async answer waits first, like a provider's round trip
            (``asyncio.sleep``: concurrent callers overlap, as with a real API).
        conversations: Other conversations the script plays, chosen by the first user message.
    """

    turns: tuple[ScriptTurn, ...]
    conversations: tuple[ScriptConversation, ...] = ()
    script_name: str = "inline"
    context_window: int | None = None
    words_per_chunk: int = 3
    latency: float = 0.0
    when_exhausted: str = "error"
    _calls: list[ModelCall] = PrivateAttr(default_factory=list)

    def __init__(self, script: ScriptSource, **kwargs: Any) -> None:
        """Parse ``script`` (path, YAML text, parsed data or :class:`Script`).

        Raises:
            ScriptError: if the script is invalid.
        """
        parsed = load_script(script)
        if kwargs.get("context_window") is None:
            kwargs["context_window"] = parsed.context_window
        kwargs.setdefault("when_exhausted", parsed.when_exhausted)
        # the fields as keywords: pyright checks a literal keyword against BaseChatModel's own fields
        super().__init__(**{**kwargs, "turns": parsed.turns, "conversations": parsed.conversations,
                            "script_name": parsed.name})

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
        conversation = self.conversation(messages)
        label = conversation.name if conversation else None
        for message in reversed(messages):
            if _is_answer(message):
                metadata = message.response_metadata
                stamp = metadata.get(TURN_STAMP)
                if (isinstance(stamp, int) and metadata.get("model_name") == self._model_name
                        and metadata.get(CONVERSATION_STAMP) == label):
                    return stamp + 1
                break
        return count_ai_messages(messages)

    def conversation(self, messages: Sequence[BaseMessage]) -> ScriptConversation | None:
        """The ``conversations`` entry this conversation plays (None: the main ``turns``).

        Chosen by the first user message, which a subagent's conversation starts with.
        """
        if not self.conversations:
            return None
        first = next((m for m in messages if isinstance(m, HumanMessage)), None)
        text = first.text if first is not None else ""
        return next((c for c in self.conversations if c.match in text), None)

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

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if not self.latency:
            return await super()._agenerate(messages, stop, run_manager, **kwargs)
        await asyncio.sleep(self.latency)
        return self._generate(messages, stop, **kwargs)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        if self.latency:
            await asyncio.sleep(self.latency)
        # The answer (it reads the conversation) in one hop off the loop, its chunks yielded here:
        # BaseChatModel's default makes one executor hop per chunk, six a tool-calling step.
        message = await asyncio.to_thread(functools.partial(self._answer, messages, stop=stop, kwargs=kwargs))
        for chunk in stream_message(message, words_per_chunk=self.words_per_chunk):
            yield chunk

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
        conversation = self.conversation(messages)
        turns = conversation.turns if conversation else self.turns
        if index >= len(turns):
            name = f"{self.script_name}/{conversation.name}" if conversation else self.script_name
            if conversation is not None or self.when_exhausted != "explain":
                raise ScriptExhaustedError(name, len(turns), index)
            turn = ScriptTurn(text=OFFLINE_CONTINUATION.format(request=_latest_request(messages)))
        else:
            turn = turns[index]
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
                **({CONVERSATION_STAMP: conversation.name} if conversation else {}),
            },
        )
        message.usage_metadata = approximate_usage(messages, message)
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


def _latest_request(messages: Sequence[BaseMessage]) -> str:
    """The latest user message, quoted and shortened, for the offline continuation."""
    latest = next((m for m in reversed(messages) if isinstance(m, HumanMessage)), None)
    text = " ".join((latest.text if latest is not None else "").split())
    if not text:
        return "this request"
    return f"“{text[:120]}…”" if len(text) > 120 else f"“{text}”"
