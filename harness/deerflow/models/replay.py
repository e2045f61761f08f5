"""Reproducible runs: record any chat model to a cassette, then replay it offline.

``RecordingChatModel`` wraps a real model.  It changes nothing about the answers nor the
requests: it delegates generation and streaming (tool binding happens on the real model;
it streams exactly when the real model would, ``disable_streaming`` included) and appends
each answer to a cassette, keyed by the normalized conversation (see
:mod:`deerflow.models.cassette`).  A call that fails is recorded as that failure, and the
replay raises the same error.  ``ReplayChatModel`` answers from that cassette, so a
notebook run against a real model can be re-run with no network and no key, in another
home directory, on another day.  Like the scripted model, replay is stateless: the
answer depends only on the conversation shown, so threads and processes do not matter.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForLLMRun,
    CallbackManagerForLLMRun,
)
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.language_models.model_profile import ModelProfile
from langchain_core.messages import AIMessage, BaseMessage, message_chunk_to_message
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.outputs.chat_generation import merge_chat_generation_chunks
from langchain_core.runnables import Runnable, RunnableBinding
from pydantic import PrivateAttr

from deerflow.models.cassette import (
    CassetteEntry,
    CassetteMissError,
    CassetteWriter,
    ConversationNormalizer,
    closest_entry,
    digest_diff,
    failure_record,
    read_cassette,
)
from deerflow.models.guard import inner_streaming_disabled
from deerflow.models.provider_errors import EMPTY_STREAM, ModelCallError
from deerflow.models.scripted import (
    bind_tool_schemas,
    bound_tool_names,
    count_ai_messages,
    stream_message,
)

__all__ = ["RecordingChatModel", "ReplayChatModel"]


class RecordingChatModel(BaseChatModel):
    """Wraps a chat model and appends every answer it gives to a cassette.

    Attributes:
        inner: The model that really answers.
        cassette: The JSONL file recordings are appended to.
        volatile_roots: Extra directories whose paths are normalized in keys.
    """

    inner: BaseChatModel
    cassette: Path
    volatile_roots: tuple[str, ...] = ()
    _writer: CassetteWriter = PrivateAttr()
    _normalizer: ConversationNormalizer = PrivateAttr()

    def __init__(self, inner: BaseChatModel, cassette: str | Path, **kwargs: Any) -> None:
        super().__init__(**{**kwargs, "inner": inner, "cassette": Path(cassette)})  # a dict: pyright checks keywords against BaseChatModel

    def model_post_init(self, context: Any, /) -> None:
        """Create the writer and normalizer once, shared by every bound copy."""
        super().model_post_init(context)
        self._writer = CassetteWriter(self.cassette)
        self._normalizer = ConversationNormalizer(self.volatile_roots)
        self.disable_streaming = self.inner.disable_streaming

    def _streaming_disabled(self, **kwargs: Any) -> bool:
        """Recording must not change the request: no streaming when the inner model would not stream."""
        return inner_streaming_disabled(self.inner, **kwargs) or super()._streaming_disabled(**kwargs)

    @property
    def _llm_type(self) -> str:
        return f"recording-{self.inner._llm_type}"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"inner": self.inner._identifying_params, "cassette": str(self.cassette)}

    def _resolve_model_profile(self) -> ModelProfile | None:
        return self.inner.profile

    def bind_tools(
        self,
        tools: Sequence[Any],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind tools on the inner model, keeping its call options on this wrapper.

        Raises:
            TypeError: if the inner model's binding is not a plain binding of itself,
                so its options cannot be carried over.
        """
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        bound = self.inner.bind_tools(tools, **kwargs)
        if not isinstance(bound, RunnableBinding) or bound.bound is not self.inner:
            raise TypeError(
                f"{type(self.inner).__name__}.bind_tools returns {type(bound).__name__}, "
                "not a binding of the model itself; it cannot be recorded"
            )
        return self.bind(**bound.kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        try:
            result = self.inner._generate(messages, stop=stop, run_manager=run_manager, **kwargs)
        except Exception as exc:
            self._record_failure(messages, kwargs, exc)
            raise
        self._record(messages, kwargs, result.generations[0].message)
        return result

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        try:
            result = await self.inner._agenerate(messages, stop=stop, run_manager=run_manager, **kwargs)
        except Exception as exc:
            self._record_failure(messages, kwargs, exc)
            raise
        self._record(messages, kwargs, result.generations[0].message)
        return result

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        if type(self.inner)._stream is BaseChatModel._stream:
            result = self._generate(messages, stop=stop, **kwargs)
            yield from stream_message(_as_ai(result.generations[0].message))
            return
        chunks: list[ChatGenerationChunk] = []
        try:
            for chunk in self.inner._stream(messages, stop=stop, **kwargs):
                chunks.append(chunk)
                yield chunk
            answer = self._merge(chunks)
        except Exception as exc:
            self._record_failure(messages, kwargs, exc)
            raise
        self._record(messages, kwargs, answer)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        inner_type = type(self.inner)
        if (
            inner_type._astream is BaseChatModel._astream
            and inner_type._stream is BaseChatModel._stream
        ):
            result = await self._agenerate(messages, stop=stop, **kwargs)
            for chunk in stream_message(_as_ai(result.generations[0].message)):
                yield chunk
            return
        chunks: list[ChatGenerationChunk] = []
        try:
            async for chunk in self.inner._astream(messages, stop=stop, **kwargs):
                chunks.append(chunk)
                yield chunk
            answer = self._merge(chunks)
        except Exception as exc:
            self._record_failure(messages, kwargs, exc)
            raise
        self._record(messages, kwargs, answer)

    def _record(
        self, messages: Sequence[BaseMessage], kwargs: dict[str, Any], answer: BaseMessage
    ) -> None:
        key, digest = self._normalizer.key(messages, bound_tool_names(kwargs))
        self._writer.append(messages, key, digest, _as_ai(answer))

    def _record_failure(self, messages: Sequence[BaseMessage], kwargs: dict[str, Any], exc: BaseException) -> None:
        """Record that this conversation's call failed with ``exc`` (replay raises it again)."""
        key, digest = self._normalizer.key(messages, bound_tool_names(kwargs))
        self._writer.append(messages, key, digest, None, failure_record(exc))

    def _merge(self, chunks: list[ChatGenerationChunk]) -> AIMessage:
        """The streamed answer; a stream with no chunks is a failure, not an empty answer.

        Raises:
            ModelCallError: the stream held no chunks.
        """
        if not chunks:
            raise ModelCallError("empty", EMPTY_STREAM, where=f"model {self.inner._llm_type}")
        return _merge(chunks)


class ReplayChatModel(BaseChatModel):
    """Answers from a cassette recorded by :class:`RecordingChatModel`.

    The cassette is read when the model is built, so a missing or corrupt file fails
    at once.  For a key recorded several times the latest line wins, so re-recording
    into the same file updates it.

    Attributes:
        cassette: The JSONL file to answer from.
        volatile_roots: Extra directories whose paths are normalized in keys.
        words_per_chunk: How many words each streamed text chunk carries.
    """

    cassette: Path
    volatile_roots: tuple[str, ...] = ()
    words_per_chunk: int = 3
    _entries: dict[str, CassetteEntry] = PrivateAttr(default_factory=dict)
    _normalizer: ConversationNormalizer = PrivateAttr()

    def __init__(self, cassette: str | Path, **kwargs: Any) -> None:
        """Load ``cassette``.

        Raises:
            CassetteError: if the file is missing or a line is corrupt.
        """
        # Read before pydantic validation, which would wrap our error in its own.
        entries = read_cassette(Path(cassette))
        super().__init__(**{**kwargs, "cassette": Path(cassette)})  # a dict: pyright checks keywords against BaseChatModel
        self._entries = {entry.key: entry for entry in entries}

    def model_post_init(self, context: Any, /) -> None:
        """Build the normalizer once, shared by every bound copy."""
        super().model_post_init(context)
        self._normalizer = ConversationNormalizer(self.volatile_roots)

    @property
    def _llm_type(self) -> str:
        return "deerflow-replay"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"cassette": str(self.cassette), "recordings": len(self._entries)}

    def _resolve_model_profile(self) -> ModelProfile | None:
        return ModelProfile(tool_calling=True, tool_call_streaming=True)

    def bind_tools(
        self,
        tools: Sequence[Any],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind tools; their names are part of the cassette key."""
        return bind_tool_schemas(self, tools, tool_choice=tool_choice, **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._answer(messages, kwargs))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        answer = self._answer(messages, kwargs)
        yield from stream_message(answer, words_per_chunk=self.words_per_chunk)

    def _answer(self, messages: list[BaseMessage], kwargs: dict[str, Any]) -> AIMessage:
        """The recorded answer to this conversation, with a fresh message id.

        Raises:
            CassetteMissError: naming the step and the closest recording.
        """
        key, digest = self._normalizer.key(messages, bound_tool_names(kwargs))
        entry = self._entries.get(key)
        if entry is None:
            closest, ratio = closest_entry(digest, self._entries.values())
            diff = digest_diff(closest.digest, digest) if closest else ""
            raise CassetteMissError(
                self.cassette, count_ai_messages(messages), key, closest, ratio, diff
            )
        if entry.response is None:
            raise entry.failure()
        answer = entry.response.model_copy(deep=True)
        answer.id = None
        return answer


def _merge(chunks: list[ChatGenerationChunk]) -> AIMessage:
    """The message a stream of chunks adds up to, with generation info as metadata."""
    merged = merge_chat_generation_chunks(chunks)
    if merged is None:
        return AIMessage(content="")
    message = _as_ai(message_chunk_to_message(merged.message))
    message.response_metadata = {**(merged.generation_info or {}), **message.response_metadata}
    return message


def _as_ai(message: BaseMessage) -> AIMessage:
    if isinstance(message, AIMessage):
        return message
    return AIMessage(content=message.content, response_metadata=message.response_metadata)
