"""The guard's pure parts: error classification, cut-off arguments, repeated names, cassette failures."""

from __future__ import annotations

import pickle

import httpx
import openai
import pytest
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGenerationChunk

from deerflow.models.cassette import CassetteEntry, RecordedFailure, failure_record
from deerflow.models.guard import CUT_OFF_KEY, _StreamCheck, check_answer, cut_off_reason
from deerflow.models.provider_errors import ModelCallError, classify, public_url, scrub

WHERE = "model 'm' (x at http://h/v1)"


def status_error(status: int, body: object) -> openai.APIStatusError:
    request = httpx.Request("POST", "http://h/v1/chat/completions")
    response = httpx.Response(status, request=request, json=body if isinstance(body, dict) else None)
    return openai.APIStatusError(f"Error code: {status}", response=response, body=body)


def test_provider_failures_are_classified_with_their_whole_message():
    refused = openai.APIConnectionError(request=httpx.Request("POST", "http://h/v1"))
    refused.__cause__ = httpx.ConnectError("[Errno 111] Connection refused")
    assert classify(refused, where=WHERE).kind == "connection"
    assert "connection refused" in str(classify(refused, where=WHERE))

    auth = classify(status_error(401, {"error": {"message": "Incorrect API key provided: sk-abcdef123456"}}),
                    where=WHERE)
    assert auth.kind == "auth" and "sk-abcdef123456" not in str(auth)

    long_error = {"error": {"message": "line one\nline two\nline three"}}
    failed = classify(status_error(502, long_error), where=WHERE)
    assert failed.kind == "http_status" and failed.retryable
    assert str(failed) == f"{WHERE}: the server refused the request: HTTP 502: line one\nline two\nline three"

    assert classify(ValueError("No generations found in stream."), where=WHERE).kind == "empty"
    assert classify(KeyError("not a provider failure"), where=WHERE) is None


def test_messages_are_bounded_and_urls_lose_their_secrets():
    huge = classify(status_error(500, {"error": {"message": "x" * 10_000}}), where=WHERE)
    assert len(str(huge)) < 1_700
    assert scrub("Authorization: Bearer abc.def") == "Authorization: Bearer …"
    assert public_url("http://user:pw@host:8080/v1?key=secret") == "http://host:8080/v1"


def test_a_model_call_error_survives_pickling():
    error = ModelCallError("stall", "no first token within 5 s", where=WHERE)
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.kind, str(copy)) == ("stall", str(error))


def test_cut_off_arguments_are_marked_never_repaired():
    whole = AIMessage("", invalid_tool_calls=[{"type": "invalid_tool_call", "id": "c1", "name": "write_file",
                                               "args": '{"path": "x.txt", "content": "hi', "error": "bad json"}],
                      response_metadata={"finish_reason": "length"})
    checked = check_answer(whole, where=WHERE)
    (call,) = checked.tool_calls
    assert call["name"] == "write_file" and set(call["args"]) == {CUT_OFF_KEY}
    assert "token limit" in (cut_off_reason(call["args"]) or "")
    assert cut_off_reason({"path": "x.txt"}) is None

    text_cut = AIMessage("The answer stops mid", response_metadata={"finish_reason": "length"})
    with pytest.raises(ModelCallError, match="finish_reason=length"):
        check_answer(text_cut, where=WHERE)


def stream(*pieces: dict, finish: str | None = "tool_calls") -> _StreamCheck:
    check = _StreamCheck(WHERE, require_finish_reason=True)
    for piece in pieces:
        check.feed(ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=[tool_call_chunk(**piece)])))
    check.feed(ChatGenerationChunk(message=AIMessageChunk(content=""), generation_info={"finish_reason": finish}))
    return check


def test_a_repeated_function_name_is_taken_once_and_arguments_checked_at_the_end():
    check = stream({"name": "python", "args": '{"code": ', "id": "c1", "index": 0},
                   {"name": "python", "args": '"print(1)"}', "id": None, "index": 0})
    last = check.finish()
    assert last is not None
    (call,) = AIMessageChunk(content="", tool_call_chunks=last.message.tool_call_chunks).tool_calls
    assert (call["name"], call["args"]) == ("python", {"code": "print(1)"})

    cut = stream({"name": "write_file", "args": '{"path": "x.txt", "content": "hi', "id": "c2", "index": 0}).finish()
    (marked,) = AIMessageChunk(content="", tool_call_chunks=cut.message.tool_call_chunks).tool_calls
    assert "not complete JSON" in (cut_off_reason(marked["args"]) or "")


def test_an_empty_or_unfinished_stream_is_an_error():
    with pytest.raises(ModelCallError, match="no completion chunks"):
        _StreamCheck(WHERE, require_finish_reason=True).finish()
    check = _StreamCheck(WHERE, require_finish_reason=True)
    check.feed(ChatGenerationChunk(message=AIMessageChunk(content="partial")))
    with pytest.raises(ModelCallError, match="without a finish_reason"):
        check.finish()


def test_a_recorded_failure_raises_the_same_error_again():
    error = ModelCallError("empty", "HTTP 200 but nothing", where=WHERE)
    entry = CassetteEntry("k", 0, "d", None, failure_record(error))
    assert str(entry.failure()) == str(error) and entry.failure().kind == "empty"
    other = CassetteEntry("k", 0, "d", None, failure_record(RuntimeError("boom")))
    assert isinstance(other.failure(), RecordedFailure) and str(other.failure()) == "RuntimeError: boom"
    assert '"error"' in entry.to_json() and '"response"' not in entry.to_json()


def test_openai_tool_schemas_are_converted_once_per_tool_and_bind_the_same(monkeypatch):
    """Binding a guarded OpenAI model on every call reuses each tool's converted schema; the request is the same."""
    from langchain_core.tools import tool
    from langchain_core.utils import function_calling
    from langchain_openai import ChatOpenAI

    from deerflow.config.schema import ModelConfig
    from deerflow.models.factory import guard

    @tool
    def lookup(query: str, limit: int = 3) -> str:
        """Look something up.

        Args:
            query: What to look for.
            limit: How many results.
        """
        return query

    inner = ChatOpenAI(model="m", api_key="sk-test", base_url="http://127.0.0.1:9/v1")
    model = guard(inner, ModelConfig(name="m", use="langchain_openai:ChatOpenAI"))
    plain = inner.bind_tools([lookup], tool_choice="auto").kwargs  # what ChatOpenAI itself binds
    calls = []
    real = function_calling.convert_to_openai_function
    monkeypatch.setattr(function_calling, "convert_to_openai_function",
                        lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    first = model.bind_tools([lookup], tool_choice="auto").kwargs
    second = model.bind_tools([lookup], tool_choice="auto").kwargs
    assert first == second == plain
    assert [c for c in calls if c is lookup] == [lookup]  # converted once, on the first binding
    strict = model.bind_tools([lookup], strict=True).kwargs  # strict changes the conversion: not cached
    assert strict["tools"][0]["function"].get("strict") is True
