"""Honest model I/O: deadlines, stall detection, checked answers, server quirks.

:class:`GuardedChatModel` wraps every real (non-offline) chat model a run uses.
It changes no answer that arrived whole; it refuses to pass off a broken one:

* **Deadlines.**  A call must produce its first token within ``first_token``
  seconds, each later chunk within ``idle`` seconds of the previous one, and
  finish within ``total``.  Past a deadline the HTTP stream is closed and the call
  fails with a :class:`ModelCallError` naming the model, server and limit; a run
  never ends ``success`` with the text that arrived before a stall.  ``retries``
  tries again only while nothing has been streamed yet (a retry after visible
  tokens would show the user two answers).
* **Checked answers.**  An empty stream, a stream that ends without a finish
  reason, and text cut off at ``finish_reason: length`` are errors.  A tool call
  whose arguments are not complete JSON (the stream ended mid-arguments, or the
  token limit hit) is never repaired: its arguments are replaced by a
  :data:`CUT_OFF_KEY` marker that the ``CutOffToolCallsMiddleware`` answers
  with an error tool result, so the tool never runs and the model can retry.
  Tool-call argument chunks are therefore held until the stream ends; text
  streams through at once.
* **Quirks** of OpenAI-compatible servers (the ``compat`` block of a model
  entry): ``tool_choice`` sent whenever tools are bound; a function name
  repeated in every streamed chunk is taken once (not ``pythonpython…``);
  assistant messages with tool calls and no text sent with a one-space content
  instead of ``null`` for servers that answer ``null`` with HTTP 500.

The deadlines are exact for async calls (every harness run is async).  A sync
call is checked against ``total`` between chunks only; the client's own
``timeout`` is what ends a blocked read there.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.language_models.chat_models import agenerate_from_stream, generate_from_stream
from langchain_core.language_models.model_profile import ModelProfile
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable, RunnableBinding

from deerflow.models.provider_errors import EMPTY_STREAM, ModelCallError, bound, classify

__all__ = ["CUT_OFF_KEY", "CallLimits", "GuardedChatModel", "ModelCallError", "cut_off_reason"]

logger = logging.getLogger(__name__)

CUT_OFF_KEY = "__deerflow_cut_off__"
_T = TypeVar("_T")


@dataclass(frozen=True)
class CallLimits:
    """Deadlines of one model call, in seconds (None: no limit)."""

    first_token: float | None = 300.0
    idle: float | None = 60.0
    total: float | None = 1200.0


def cut_off_reason(args: Any) -> str | None:
    """Why a tool call's arguments were refused, when they carry the :data:`CUT_OFF_KEY` marker."""
    if isinstance(args, dict) and isinstance(args.get(CUT_OFF_KEY), dict):
        return str(args[CUT_OFF_KEY].get("reason") or "the arguments were cut off")
    return None


def _marker(raw: str, reason: str) -> dict[str, Any]:
    excerpt = raw if len(raw) <= 200 else raw[:120] + " … " + raw[-60:]
    return {CUT_OFF_KEY: {"reason": reason, "received": excerpt}}


def _args_problem(raw: str, finish_reason: str | None) -> str | None:
    """Why ``raw`` arguments cannot be run as they are (None: complete JSON object)."""
    if finish_reason == "length":
        return "the answer reached the model's token limit (finish_reason=length) before the arguments were complete"
    try:
        parsed = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        return f"the arguments are not complete JSON ({exc.msg} at character {exc.pos}): the answer ended mid-arguments"
    return None if isinstance(parsed, dict) else "the arguments are not a JSON object"


@dataclass
class _Clock:
    """Which deadline comes next, and which one was missed."""

    limits: CallLimits
    start: float = field(default_factory=time.monotonic)
    first_token_at: float | None = None

    def next_timeout(self) -> float | None:
        waits = [w for w in (self._phase_wait(), self._total_wait()) if w is not None]
        return max(0.0, min(waits)) if waits else None

    def _phase_wait(self) -> float | None:
        if self.first_token_at is None:
            return None if self.limits.first_token is None else self.limits.first_token - self.elapsed()
        return self.limits.idle

    def _total_wait(self) -> float | None:
        return None if self.limits.total is None else self.limits.total - self.elapsed()

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def missed(self, where: str, text_so_far: int) -> ModelCallError:
        total = self._total_wait()
        got = f" after {text_so_far} characters of answer" if text_so_far else ""
        if total is not None and total <= 0.05:
            return ModelCallError("timeout", f"no complete answer within the total limit of {self.limits.total:g} s"
                                  f"{got} (timeouts.total)", where=where)
        if self.first_token_at is None:
            return ModelCallError("stall", f"no first token within {self.limits.first_token:g} s "
                                  "(timeouts.first_token)", where=where)
        return ModelCallError("stall", f"no new chunk for {self.limits.idle:g} s{got}; the partial answer was "
                              "discarded (timeouts.idle)", where=where)


@dataclass
class _StreamCheck:
    """Follows one streamed answer: passes text on, holds and checks tool calls, judges the end."""

    where: str
    require_finish_reason: bool
    chunks: int = 0
    text_chars: int = 0
    finish_reason: str | None = None
    calls: dict[int, dict[str, Any]] = field(default_factory=dict)

    def feed(self, chunk: ChatGenerationChunk) -> tuple[ChatGenerationChunk, bool]:
        """The chunk to pass on (tool-call pieces held back) and whether it carried a token."""
        self.chunks += 1
        message = chunk.message
        finish = (chunk.generation_info or {}).get("finish_reason") or message.response_metadata.get("finish_reason")
        self.finish_reason = finish or self.finish_reason
        if not isinstance(message, AIMessageChunk):
            return chunk, bool(message.content)
        for piece in message.tool_call_chunks:
            self._hold(piece)
        self.text_chars += len(message.text)
        token = bool(message.content) or bool(message.tool_call_chunks)
        if not message.tool_call_chunks:
            return chunk, token
        passed = AIMessageChunk(content=message.content, id=message.id, additional_kwargs=message.additional_kwargs,
                                response_metadata=message.response_metadata, usage_metadata=message.usage_metadata)
        return ChatGenerationChunk(message=passed, generation_info=chunk.generation_info), token

    def _hold(self, piece: Any) -> None:
        index = piece.get("index")
        if index is None:  # servers that omit the index: a new id starts a new call
            index = max(self.calls, default=0)
            if piece.get("id") and self.calls.get(index, {}).get("id") not in (None, piece["id"]):
                index += 1
        call = self.calls.setdefault(index, {"name": "", "args": "", "id": None})
        name = piece.get("name") or ""
        if name and name != call["name"]:  # a name repeated in every chunk is taken once
            call["name"] += name
        call["args"] += piece.get("args") or ""
        call["id"] = call["id"] or piece.get("id")

    def finish(self) -> ChatGenerationChunk | None:
        """The held tool calls as one last chunk (cut-off ones marked), or an error for a broken answer.

        Raises:
            ModelCallError: an empty stream, no finish reason, text cut off at the token limit.
        """
        if self.chunks == 0:
            raise ModelCallError("empty", EMPTY_STREAM, where=self.where)
        if self.finish_reason is None and self.require_finish_reason:
            got = f"after {self.text_chars} characters" if self.text_chars else "before any text"
            raise ModelCallError("truncated", f"the stream ended {got} without a finish_reason (the connection "
                                 "closed early); the partial answer was discarded", where=self.where)
        if not self.calls:
            if self.finish_reason == "length":
                raise ModelCallError("truncated", f"the answer reached the model's token limit after {self.text_chars} "
                                     "characters (finish_reason=length); raise max_tokens for this model", where=self.where)
            return None
        pieces = []
        for index in sorted(self.calls):
            call = self.calls[index]
            problem = _args_problem(call["args"], self.finish_reason)
            args = call["args"] if problem is None else json.dumps(_marker(call["args"], problem))
            if problem is not None:
                logger.info("%s: tool call %s refused: %s", self.where, call["name"], problem)
            pieces.append(tool_call_chunk(name=call["name"], args=args, id=call["id"], index=index))
        return ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=pieces))


def check_answer(message: AIMessage, *, where: str) -> AIMessage:
    """A whole (non-streamed) answer with cut-off tool calls marked; text cut off is an error.

    Raises:
        ModelCallError: text cut off at the token limit.
    """
    finish = message.response_metadata.get("finish_reason")
    if finish == "length" and not (message.tool_calls or message.invalid_tool_calls):
        raise ModelCallError("truncated", f"the answer reached the model's token limit after {len(message.text)} "
                             "characters (finish_reason=length); raise max_tokens for this model", where=where)
    if not message.invalid_tool_calls and finish != "length":
        return message
    calls = []
    for call in message.tool_calls:
        raw = json.dumps(call["args"])
        calls.append({**call, "args": _marker(raw, _args_problem(raw, finish) or "")} if finish == "length" else call)
    for bad in message.invalid_tool_calls:
        raw = bad.get("args") or ""
        problem = _args_problem(raw, finish) or "the arguments could not be read"
        calls.append({"name": bad.get("name") or "", "args": _marker(raw, problem), "id": bad.get("id"),
                      "type": "tool_call"})
    return message.model_copy(update={"tool_calls": calls, "invalid_tool_calls": []})


class GuardedChatModel(BaseChatModel):
    """Wraps a real chat model with deadlines, answer checks and server-quirk fixes (module docstring).

    Attributes:
        inner: The model that answers.
        where: Which model and server, for messages (``model 'local' (qwen at http://host/v1)``).
        limits: The call's deadlines.
        retries: How many more times a call is tried when it failed before streaming anything.
        tool_choice: Sent with bound tools when the caller gives none (``compat.tool_choice``).
        content_null: ``space``: an assistant message with tool calls and no text is sent with content ``" "``.
        require_finish_reason: A stream without a finish reason is an error (OpenAI-compatible servers).
    """

    inner: BaseChatModel
    where: str
    limits: CallLimits = CallLimits()
    retries: int = 0
    tool_choice: str | None = None
    content_null: Literal["null", "space"] = "null"
    require_finish_reason: bool = True

    def model_post_init(self, context: Any, /) -> None:
        """Stream exactly when the inner model would (``disable_streaming`` carried over)."""
        super().model_post_init(context)
        self.disable_streaming = self.inner.disable_streaming

    def _streaming_disabled(self, **kwargs: Any) -> bool:
        """Whether the inner model refuses to stream this call (``disable_streaming``, ``streaming: false``)."""
        return inner_streaming_disabled(self.inner, **kwargs) or super()._streaming_disabled(**kwargs)

    def _inner_streams(self, **kwargs: Any) -> bool:
        """Whether the inner model streams even when asked to generate (``streaming: true``)."""
        return not self._streaming_disabled(**kwargs) and getattr(self.inner, "streaming", None) is True

    @property
    def _llm_type(self) -> str:
        return self.inner._llm_type

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return dict(self.inner._identifying_params)

    def _resolve_model_profile(self) -> ModelProfile | None:
        return self.inner.profile

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: str | None = None,
                   **kwargs: Any) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind tools on the inner model (adding ``compat.tool_choice``), keeping its options on this wrapper.

        Raises:
            TypeError: if the inner model's binding is not a plain binding of itself.
        """
        choice = tool_choice if tool_choice is not None else (self.tool_choice if tools else None)
        if choice is not None:
            kwargs["tool_choice"] = choice
        bound_model = self.inner.bind_tools(_preconverted(self.inner, tools, kwargs), **kwargs)
        if not isinstance(bound_model, RunnableBinding) or bound_model.bound is not self.inner:
            raise TypeError(f"{type(self.inner).__name__}.bind_tools returns {type(bound_model).__name__}, "
                            "not a binding of the model itself; it cannot be guarded")
        return self.bind(**bound_model.kwargs)

    def _prepare(self, messages: list[BaseMessage]) -> list[BaseMessage]:
        if self.content_null != "space":
            return messages
        return [m.model_copy(update={"content": " "}) if isinstance(m, AIMessage) and m.tool_calls and not m.content
                else m for m in messages]

    def _failure(self, exc: BaseException) -> BaseException:
        """The classified error for ``exc``, or ``exc`` itself when it is not a provider failure."""
        found = classify(exc, where=self.where)
        return found if found is not None else exc

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        if self._inner_streams(**kwargs):
            return generate_from_stream(self._stream(messages, stop=stop, run_manager=run_manager, **kwargs))
        prepared = self._prepare(messages)
        for attempt in range(self.retries + 1):
            try:
                result = self.inner._generate(prepared, stop=stop, run_manager=run_manager, **kwargs)
                return self._checked(result)
            except Exception as exc:  # noqa: BLE001 - classified, then raised (or retried)
                failure = self._failure(exc)
                if not self._retry(failure, attempt):
                    _reraise(failure, exc)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                         run_manager: AsyncCallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        if self._inner_streams(**kwargs):
            return await agenerate_from_stream(
                self._astream(messages, stop=stop, run_manager=run_manager, **kwargs))
        prepared = self._prepare(messages)
        for attempt in range(self.retries + 1):
            try:
                call = self.inner._agenerate(prepared, stop=stop, run_manager=run_manager, **kwargs)
                return self._checked(await self._within_total(call))
            except Exception as exc:  # noqa: BLE001 - classified, then raised (or retried)
                failure = self._failure(exc)
                if not self._retry(failure, attempt):
                    _reraise(failure, exc)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _within_total(self, call: Awaitable[_T]) -> _T:
        try:
            async with asyncio.timeout(self.limits.total):
                return await call
        except TimeoutError:
            raise ModelCallError("timeout", f"no answer within the total limit of {self.limits.total:g} s "
                                 "(timeouts.total)", where=self.where) from None

    def _checked(self, result: ChatResult) -> ChatResult:
        if not result.generations:
            raise ModelCallError("empty", "the server's answer held no choices", where=self.where)
        generation = result.generations[0]
        message = generation.message
        if isinstance(message, AIMessage):
            checked = check_answer(message, where=self.where)
            if checked is not message:
                generation = ChatGeneration(message=checked, generation_info=generation.generation_info)
        return ChatResult(generations=[generation, *result.generations[1:]], llm_output=result.llm_output)

    def _retry(self, failure: BaseException, attempt: int) -> bool:
        if not isinstance(failure, ModelCallError) or not failure.retryable or attempt >= self.retries:
            return False
        logger.warning("%s (attempt %d of %d; trying again)", failure, attempt + 1, self.retries + 1)
        return True

    def _stream(self, messages: list[BaseMessage], stop: list[str] | None = None,
                run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        prepared = self._prepare(messages)
        for attempt in range(self.retries + 1):
            check, clock, streamed = self._new_check(), _Clock(self.limits), False
            try:
                for chunk in self.inner._stream(prepared, stop=stop, **kwargs):
                    if self.limits.total is not None and clock.elapsed() > self.limits.total:
                        raise clock.missed(self.where, check.text_chars)
                    passed, _token = check.feed(chunk)
                    streamed = True
                    yield passed
                last = check.finish()
                if last is not None:
                    yield last
                return
            except Exception as exc:  # noqa: BLE001 - classified, then raised (or retried)
                failure = self._failure(exc)
                if streamed or not self._retry(failure, attempt):
                    _reraise(failure, exc)

    async def _astream(self, messages: list[BaseMessage], stop: list[str] | None = None,
                       run_manager: AsyncCallbackManagerForLLMRun | None = None,
                       **kwargs: Any) -> AsyncIterator[ChatGenerationChunk]:
        prepared = self._prepare(messages)
        for attempt in range(self.retries + 1):
            check, clock, streamed = self._new_check(), _Clock(self.limits), False
            stream = self.inner._astream(prepared, stop=stop, **kwargs)
            try:
                async for passed in self._timed(stream, check, clock):
                    streamed = True
                    yield passed
                last = check.finish()
                if last is not None:
                    yield last
                return
            except Exception as exc:  # noqa: BLE001 - classified, then raised (or retried)
                failure = self._failure(exc)
                if streamed or not self._retry(failure, attempt):
                    _reraise(failure, exc)
            finally:
                await _close(stream)

    async def _timed(self, stream: AsyncIterator[ChatGenerationChunk], check: _StreamCheck,
                     clock: _Clock) -> AsyncIterator[ChatGenerationChunk]:
        """The checked chunks of ``stream``, each awaited no longer than the next deadline allows."""
        while True:
            try:
                async with asyncio.timeout(clock.next_timeout()):
                    chunk = await _next_chunk(stream)
            except StopAsyncIteration:
                return
            except TimeoutError:
                raise clock.missed(self.where, check.text_chars) from None
            except _InnerTimeout as inner:  # the client's own limit, not ours: its words, not our deadline's
                raise inner.error from None
            passed, token = check.feed(chunk)
            if token and clock.first_token_at is None:
                clock.first_token_at = time.monotonic()
            yield passed

    def _new_check(self) -> _StreamCheck:
        return _StreamCheck(self.where, self.require_finish_reason)


def inner_streaming_disabled(model: BaseChatModel, **kwargs: Any) -> bool:
    """Whether ``model`` itself would refuse to stream a call with ``kwargs``."""
    disabled = getattr(model, "_streaming_disabled", None)
    if disabled is not None:
        return bool(disabled(**kwargs))
    return model.disable_streaming is True or (model.disable_streaming == "tool_calling" and bool(kwargs.get("tools")))


class _InnerTimeout(Exception):
    """A ``TimeoutError`` raised by the inner model's stream itself (e.g. langchain-openai's
    ``stream_chunk_timeout``), kept apart from the guard's own ``wait_for`` deadline so the
    message names the limit that really fired."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


async def _next_chunk(stream: AsyncIterator[ChatGenerationChunk]) -> ChatGenerationChunk:
    """The next chunk; a timeout raised inside the stream comes out as :class:`_InnerTimeout`."""
    try:
        return await anext(stream)
    except TimeoutError as exc:
        raise _InnerTimeout(exc) from exc


def _reraise(failure: BaseException, exc: BaseException) -> None:
    """Raise the classified ``failure`` (chained to the library's ``exc``), or ``exc`` itself."""
    if failure is exc:
        raise exc
    raise failure from exc


async def _close(stream: AsyncIterator[Any]) -> None:
    """Close an abandoned stream (its HTTP response with it); a close that fails is not the call's error."""
    closer: Callable[[], Awaitable[None]] | None = getattr(stream, "aclose", None)
    if closer is None:
        return
    try:
        await closer()
    except (RuntimeError, OSError) as exc:  # already closed or the socket is gone
        logger.debug("closing a model stream: %s", bound(str(exc), 200))


def _preconverted(inner: BaseChatModel, tools: Sequence[Any], kwargs: dict[str, Any]) -> list[Any]:
    """``tools`` with each plain ``BaseTool`` as its OpenAI schema, converted once per tool object.

    The agent binds the model on every call with the same tool objects; an OpenAI-compatible
    model would convert each tool's schema again each time (~0.1 ms a tool a call).  It takes
    an OpenAI-format dict unchanged, so the conversion is done once (``openai_tool_schema``).
    Left as they are: other providers' models, ``strict`` or ``response_format`` bindings (they
    change the conversion) and tools with provider ``extras`` (merged into the converted dict).
    """
    from langchain_core.tools import BaseTool

    if kwargs.get("strict") is not None or kwargs.get("response_format") or not _openai_compatible(inner):
        return list(tools)
    from deerflow.models.scripted import openai_tool_schema

    return [openai_tool_schema(t) if isinstance(t, BaseTool) and not getattr(t, "extras", None) else t
            for t in tools]


def _openai_compatible(model: BaseChatModel) -> bool:
    import sys

    module = sys.modules.get("langchain_openai.chat_models.base")  # not loaded: the model is not one of its
    return module is not None and isinstance(model, module.BaseChatOpenAI)
