"""Model-call failures, classified and named.

A provider failure reaches the user as one :class:`ModelCallError` whose message
says which model and server failed and what happened ("connection refused",
"no first token within 300 s", "HTTP 502: <body excerpt>"...), instead of the
client library's own words (``ValueError: No generations found in stream.``).
The ``kind`` is stable for programs; the message is for people.  Messages are
bounded and scrubbed of anything that looks like a key, because they travel
into events, logs and the chat.
"""

from __future__ import annotations

import json
import re
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

from deerflow.models.script_format import ModelError

ErrorKind = Literal[
    "connection", "timeout", "stall", "http_status", "auth", "context_length",
    "malformed", "empty", "stream_error", "truncated",
]
MAX_DETAIL_CHARS = 1_500
_SECRET = re.compile(r"\b(sk|pk|rk|key|tok)[-_][A-Za-z0-9_\-*]{6,}", re.I)
_BEARER = re.compile(r"(Bearer\s+)\S+", re.I)
_LABELS: dict[str, str] = {
    "connection": "cannot reach the server",
    "timeout": "the request timed out",
    "stall": "the response stalled",
    "http_status": "the server refused the request",
    "auth": "authentication failed",
    "context_length": "the conversation is longer than the model's context window",
    "malformed": "the server's answer is not an OpenAI-compatible completion",
    "empty": "the server sent no completion",
    "stream_error": "the server failed in the middle of its answer",
    "truncated": "the answer was cut off",
}
RETRYABLE: frozenset[str] = frozenset({"connection", "timeout", "stall", "empty", "stream_error"})


class ModelCallError(ModelError):
    """A model call failed; the message names the model, its server and the cause.

    Attributes:
        kind: The class of failure (``stall``, ``http_status``...), stable for programs.
        detail: The cause in the provider's or our words, bounded and scrubbed.
        where: Which model and server (``model 'local' (qwen at http://host:8080/v1)``).
        status_code: The HTTP status when the server answered with one.
    """

    def __init__(self, kind: ErrorKind, detail: str, *, where: str, status_code: int | None = None) -> None:
        self.kind = kind
        self.detail = bound(detail)
        self.where = where
        self.status_code = status_code
        super().__init__(f"{where}: {_LABELS[kind]}: {self.detail}" if self.detail else f"{where}: {_LABELS[kind]}")

    @property
    def retryable(self) -> bool:
        """Whether trying again may help (a stall, a dropped connection), unlike a 400 or a bad key."""
        return self.kind in RETRYABLE or (self.status_code is not None and self.status_code in {429, 502, 503, 504})

    def __reduce__(self) -> tuple[object, ...]:  # picklable across processes, with its fields
        return (_rebuild, (self.kind, self.detail, self.where, self.status_code))


def _rebuild(kind: ErrorKind, detail: str, where: str, status_code: int | None) -> ModelCallError:
    return ModelCallError(kind, detail, where=where, status_code=status_code)


def scrub(text: str) -> str:
    """``text`` without anything shaped like an API key or bearer token."""
    return _SECRET.sub(lambda m: m.group(1) + "-…", _BEARER.sub(r"\1…", text))


def bound(text: str, limit: int = MAX_DETAIL_CHARS) -> str:
    """Scrubbed, trimmed ``text`` of at most ``limit`` characters (the whole message, every line)."""
    text = scrub(str(text).strip())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def public_url(url: str | None) -> str | None:
    """``url`` without credentials, query or fragment: safe to show in errors."""
    if not url:
        return None
    try:
        parts = urlsplit(str(url))
    except ValueError:
        return None
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", "")) or None


def classify(exc: BaseException, *, where: str) -> ModelCallError | None:
    """The :class:`ModelCallError` for a client library's exception; None when it is not a provider failure.

    Known shapes: the ``openai`` client's errors (connection, timeout, HTTP status,
    an ``error`` event after HTTP 200), ``httpx`` transport errors, and the
    ``ValueError``s LangChain raises for an empty stream or a non-JSON body.
    """
    if isinstance(exc, ModelCallError):
        return exc
    found = _classify_openai(exc, where=where)
    if found is not None:
        return found
    name = type(exc).__name__
    module = type(exc).__module__
    if module.startswith(("httpx", "httpcore")):
        kind: ErrorKind = "timeout" if "Timeout" in name else "connection"
        return ModelCallError(kind, f"{name}: {exc}" if str(exc) else name, where=where)
    if isinstance(exc, TimeoutError):  # a client library's own limit (langchain-openai's stream_chunk_timeout)
        return ModelCallError("stall" if "chunk" in str(exc).lower() else "timeout", f"the client library's own limit fired: {exc}" if str(exc) else name, where=where)
    if isinstance(exc, json.JSONDecodeError):
        return ModelCallError("malformed", f"invalid JSON in the answer ({exc.msg})", where=where)
    if isinstance(exc, ValueError):
        return _classify_value_error(exc, where=where)
    return None


def _classify_openai(exc: BaseException, *, where: str) -> ModelCallError | None:
    try:
        import openai
    except ImportError:  # pragma: no cover - langchain_openai depends on it
        return None
    if isinstance(exc, openai.APITimeoutError):
        return ModelCallError("timeout", "no answer within the client's timeout", where=where)
    if isinstance(exc, openai.APIConnectionError):
        cause = _root_cause(exc)
        detail = f"{type(cause).__name__}: {cause}" if cause is not None and str(cause) else "connection failed"
        if "refused" in detail.lower() or "connecterror" in detail.lower():
            detail = f"connection refused ({detail})"
        return ModelCallError("connection", detail, where=where)
    if isinstance(exc, openai.APIStatusError):
        return _status_error(exc.status_code, _status_body(exc), where=where)
    if isinstance(exc, openai.APIError):  # an ``error`` event after HTTP 200
        return ModelCallError("stream_error", exc.message or str(exc), where=where)
    return None


def _root_cause(exc: BaseException, depth: int = 12) -> BaseException | None:
    """The innermost cause of ``exc`` (``ConnectionRefusedError`` under the client's wrappers), or None.

    langchain-openai wraps the ``openai`` client's error, which wraps httpx's, which wraps the OS error:
    the first cause alone says only "Connection error."."""
    cause = exc.__cause__ or exc.__context__
    while cause is not None and depth > 0 and (cause.__cause__ or cause.__context__) is not None:
        cause, depth = cause.__cause__ or cause.__context__, depth - 1
    return cause


def _status_body(exc: object) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        return json.dumps(body)[:MAX_DETAIL_CHARS]
    if isinstance(body, str) and body.strip():
        return body
    return str(getattr(exc, "message", "") or exc)


def _status_error(status: int, body: str, *, where: str) -> ModelCallError:
    lowered = body.lower()
    if status in {401, 403}:
        return ModelCallError("auth", f"HTTP {status}: {body}", where=where, status_code=status)
    if "context length" in lowered or "context_length" in lowered or "context window" in lowered \
            or "maximum context" in lowered or "too many tokens" in lowered:
        return ModelCallError("context_length", f"HTTP {status}: {body}", where=where, status_code=status)
    if body.lstrip().lower().startswith(("<!doctype", "<html")):
        body = "an HTML page (" + _html_title(body) + ")"
    return ModelCallError("http_status", f"HTTP {status}: {body}", where=where, status_code=status)


def _classify_value_error(exc: ValueError, *, where: str) -> ModelCallError | None:
    text = str(exc)
    if "No generations found in stream" in text:
        return ModelCallError("empty", EMPTY_STREAM, where=where)
    if "Unexpected response type" in text or "Expected a dict" in text:
        excerpt = text.split(":", 2)[-1].strip().strip("'\"")
        if excerpt.lower().startswith(("<!doctype", "<html")):
            return ModelCallError("malformed", f"HTTP 200 with an HTML page ({_html_title(excerpt)}); "
                                  "is base_url the server's OpenAI-compatible API (often ending in /v1)?", where=where)
        return ModelCallError("malformed", f"HTTP 200 with a body that is not JSON: {excerpt}", where=where)
    return None


EMPTY_STREAM = ("HTTP 200 but the stream held no completion chunks: the server may have failed after answering "
                "(see its log; llama-cpp-python does this for streamed tool calls, set disable_streaming: "
                "tool_calling), or base_url is not the OpenAI-compatible API (often ending in /v1) and an HTML "
                "or proxy error page came back")


def _html_title(page: str) -> str:
    match = re.search(r"<title>(.*?)</title>", page, re.I | re.S)
    return f"title {match.group(1).strip()[:80]!r}" if match else "no title"
