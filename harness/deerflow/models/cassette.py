"""Cassettes: recorded model answers keyed by a normalized conversation.

A cassette is a JSONL file, one line per model call::

    {"key": "<sha256>", "step": 2, "digest": "tools: ...\\nhuman: ...",
     "response": {"type": "ai", "data": {...}}}

``key`` hashes the conversation the model was shown, *normalized* so that a replay in
another process, another ``DEERFLOW_HOME`` or on another day finds the same line: only
roles, text, tool call names and arguments, tool results and the names of the bound tools
count, and volatile parts inside them (uuids, ``call_``/``run-``/``lc_`` ids, ISO dates
and times, epoch timestamps, absolute paths under temp or home directories) are replaced
by placeholders.  ``digest`` is the same normalized conversation as short readable lines,
so a miss can point at the closest recording and at what differs.  ``response`` is the
answer serialized with ``message_to_dict``.  A call that failed has ``error`` instead of
``response`` (``{"type", "message"}`` plus ``kind``/``detail``/``where``/``status_code``
for a classified provider failure), so a replay fails the same way the recorded run did.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import tempfile
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ToolMessage,
    message_to_dict,
    messages_from_dict,
)

from deerflow.models.scripted import ModelError, count_ai_messages

_ID = re.compile(r"\b(?:call|run|lc|chatcmpl|toolu)[-_](?=[\w-]*\d)[\w-]+")
_UUID = re.compile(r"\b[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}\b")
_WEEKDAY = r"(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day"
_MONTH = (
    r"(?:January|February|March|April|May|June|July|August|September|October|November|December)"
)
_DATETIME = re.compile(
    r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"
)
_DATE = re.compile(
    rf"(?:{_WEEKDAY},? )?\b(?:\d{{4}}-\d{{2}}-\d{{2}}|{_MONTH} \d{{1,2}}, \d{{4}})\b(?:,? {_WEEKDAY})?"
)
_TIME = re.compile(r"\b\d{2}:\d{2}:\d{2}(?:\.\d+)?\b")
_EPOCH = re.compile(r"\b1[5-9]\d{8}(?:\d{3})?(?:\.\d+)?\b")
_PATH_CHARS = r"[^\s'\"`<>|;,()\[\]{}]*"
_LINE_WIDTH = 160


class CassetteError(ModelError):
    """The cassette file is missing or corrupt; the message names the file and line."""


class CassetteMissError(ModelError):
    """No recording matches the conversation; the message names the closest one."""

    def __init__(
        self,
        cassette: Path,
        step: int,
        key: str,
        closest: CassetteEntry | None,
        ratio: float,
        diff: str,
    ) -> None:
        self.cassette = cassette
        self.step = step
        self.key = key
        self.closest_key = closest.key if closest else None
        self.closest_digest = closest.digest if closest else None
        lines = [f"no recording in {cassette} for step {step} (conversation key {key[:16]}…)."]
        if closest is None:
            lines.append("The cassette holds no recordings.")
        else:
            lines.append(
                f"Closest recording: key {closest.key[:16]}… (step {closest.step}, "
                f"similarity {ratio:.2f}). What differs (- recorded, + now):"
            )
            lines.append(diff or "(only text beyond the digest's excerpts)")
        lines.append("Re-record the cassette if the conversation changed on purpose.")
        super().__init__("\n".join(lines))


class RecordedFailure(ModelError):
    """A model call that failed while recording, failing again on replay (a non-provider error)."""


@dataclass(frozen=True)
class CassetteEntry:
    """One recorded model call: its answer, or the error it failed with."""

    key: str
    step: int
    digest: str
    response: AIMessage | None
    error: Mapping[str, Any] | None = None

    def to_json(self) -> str:
        """The entry as one JSONL line (without the newline)."""
        record: dict[str, Any] = {"key": self.key, "step": self.step, "digest": self.digest}
        if self.response is not None:
            record["response"] = message_to_dict(self.response)
        else:
            record["error"] = dict(self.error or {})
        return json.dumps(record, ensure_ascii=False, default=str)

    def failure(self) -> ModelError:
        """The exception this recorded failure replays as (the same message as when it was recorded)."""
        error = dict(self.error or {})
        if error.get("kind") and error.get("where"):
            from deerflow.models.provider_errors import ModelCallError

            try:
                return ModelCallError(error["kind"], str(error.get("detail") or ""), where=str(error["where"]),
                                      status_code=error.get("status_code"))
            except KeyError:  # a kind this version does not know: fall back to the plain message
                pass
        return RecordedFailure(str(error.get("message") or "the recorded model call failed"))


def failure_record(exc: BaseException) -> dict[str, Any]:
    """What a cassette keeps of a failed call: enough to raise the same error again, bounded."""
    from deerflow.models.provider_errors import ModelCallError, bound

    record: dict[str, Any] = {"type": type(exc).__name__}
    if isinstance(exc, ModelCallError):
        record.update(kind=exc.kind, detail=exc.detail, where=exc.where, status_code=exc.status_code,
                      message=str(exc))
    else:
        record["message"] = bound(f"{type(exc).__name__}: {exc}" if not isinstance(exc, ModelError) else str(exc))
    return record


@dataclass
class ConversationNormalizer:
    """Turns a conversation into the stable form that keys a cassette.

    Attributes:
        volatile_roots: Extra directories (e.g. a ``DEERFLOW_HOME``) whose absolute
            paths are replaced by ``<root>`` followed by the path inside them.
    """

    volatile_roots: Sequence[str | Path] = ()
    _extra: re.Pattern[str] | None = field(init=False, default=None)
    _transient: re.Pattern[str] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        extra = [str(Path(root)) for root in self.volatile_roots]
        self._extra = _root_pattern(extra) if extra else None
        self._transient = _root_pattern(_transient_roots())

    def scrub(self, text: str) -> str:
        """Replace the volatile parts of ``text`` with placeholders."""
        if self._extra is not None:
            text = self._extra.sub(lambda m: "<root>" + m.group("tail"), text)
        if self._transient is not None:
            text = self._transient.sub(_collapse_path, text)
        text = _ID.sub("<id>", text)
        text = _UUID.sub("<uuid>", text)
        text = _DATETIME.sub("<datetime>", text)
        text = _DATE.sub("<date>", text)
        text = _TIME.sub("<time>", text)
        return _EPOCH.sub("<epoch>", text)

    def normalize(
        self, messages: Sequence[BaseMessage], tool_names: Iterable[str]
    ) -> dict[str, Any]:
        """The parts of a conversation that decide the answer, scrubbed."""
        return {
            "tools": sorted(set(tool_names)),
            "messages": [self._message(message) for message in messages],
        }

    def _message(self, message: BaseMessage) -> dict[str, Any]:
        entry: dict[str, Any] = {"role": message.type, "text": self.scrub(_text_of(message))}
        if isinstance(message, AIMessage) and message.tool_calls:
            entry["tool_calls"] = [
                {"name": call["name"], "args": self._scrub_value(call["args"])}
                for call in message.tool_calls
            ]
        if isinstance(message, ToolMessage):
            entry["name"] = message.name or ""
        return entry

    def _scrub_value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, Mapping):
            return {str(k): self._scrub_value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self._scrub_value(v) for v in value]
        return value

    def key(self, messages: Sequence[BaseMessage], tool_names: Iterable[str]) -> tuple[str, str]:
        """The cassette key and readable digest of a conversation."""
        normalized = self.normalize(messages, tool_names)
        canonical = json.dumps(normalized, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest(), digest(normalized)


def digest(normalized: Mapping[str, Any]) -> str:
    """One short line per message, so differences are easy to spot and to rank."""
    lines = ["tools: " + ", ".join(normalized["tools"])]
    for message in normalized["messages"]:
        role = message["role"] + (f"[{message['name']}]" if message.get("name") else "")
        parts = [message["text"]] if message["text"] else []
        parts += [
            f"->{call['name']}{json.dumps(call['args'], sort_keys=True, ensure_ascii=False)}"
            for call in message.get("tool_calls", ())
        ]
        lines.append(f"{role}: {_excerpt(' '.join(parts))}")
    return "\n".join(lines)


def _excerpt(text: str) -> str:
    flat = text.replace("\n", "⏎")
    if len(flat) <= _LINE_WIDTH:
        return flat
    return flat[: _LINE_WIDTH - 50] + " … " + flat[-47:]


def _text_of(message: BaseMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    parts = []
    for block in message.content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, Mapping) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif isinstance(block, Mapping) and block.get("type") not in ("reasoning", "thinking"):
            parts.append(f"<{block.get('type', 'block')}>")
    return "".join(parts)


def _transient_roots() -> list[str]:
    roots = {tempfile.gettempdir(), "/tmp", "/var/tmp", "/var/folders", "/private/var/folders"}
    home = str(Path.home())
    if len(home) > 1:
        roots.add(home)
    return sorted(roots)


def _root_pattern(roots: Iterable[str]) -> re.Pattern[str]:
    alternatives = "|".join(
        re.escape(root.rstrip("/")) for root in sorted(roots, key=len, reverse=True)
    )
    return re.compile(
        rf"(?<![\w./-])(?P<root>{alternatives})(?P<tail>(?:/{_PATH_CHARS})?)(?![\w.-])"
    )


def _collapse_path(match: re.Match[str]) -> str:
    """A path under a temp or home dir keeps only a file-like last component.

    Directory names there are volatile (``pytest-7``, ``tmpab12cd``), file names
    (``notes.txt``) are what the conversation is about.
    """
    tail = match.group("tail")
    trailing = ""
    while tail.endswith("."):
        tail, trailing = tail[:-1], trailing + "."
    name = tail.rstrip("/").rsplit("/", 1)[-1]
    placeholder = "<home>" if match.group("root") == str(Path.home()) else "<tmp>"
    keep = "." in name.strip(".") and not name.startswith(".")
    return (f"{placeholder}/{name}" if keep else placeholder) + trailing


def closest_entry(
    target: str, entries: Iterable[CassetteEntry]
) -> tuple[CassetteEntry | None, float]:
    """The recording whose digest is most similar to ``target`` (difflib ratio)."""
    best: CassetteEntry | None = None
    best_ratio = -1.0
    for entry in entries:
        matcher = difflib.SequenceMatcher(None, entry.digest, target, autojunk=False)
        if matcher.real_quick_ratio() <= best_ratio or matcher.quick_ratio() <= best_ratio:
            continue
        ratio = matcher.ratio()
        if ratio > best_ratio:
            best, best_ratio = entry, ratio
    return best, max(best_ratio, 0.0)


def digest_diff(recorded: str, now: str, *, limit: int = 12) -> str:
    """The lines that differ between two digests, as a short unified diff."""
    lines = [
        f"{line[0]} {line[1:]}"
        for line in difflib.unified_diff(recorded.splitlines(), now.splitlines(), lineterm="", n=0)
        if not line.startswith(("---", "+++", "@@"))
    ]
    if len(lines) > limit:
        lines = [*lines[:limit], f"… {len(lines) - limit} more lines differ"]
    return "\n".join(lines)


def read_cassette(path: Path) -> list[CassetteEntry]:
    """Load every recording of a cassette, in file order.

    Raises:
        CassetteError: naming the file, and the line for a corrupt one.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise CassetteError(f"cassette {path} does not exist; record it first") from exc
    except OSError as exc:
        raise CassetteError(f"cannot read cassette {path}: {exc.strerror}") from exc
    entries = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            entries.append(_parse_line(path, number, line))
    return entries


def _parse_line(path: Path, number: int, line: str) -> CassetteEntry:
    where = f"cassette {path} line {number}"
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise CassetteError(f"{where}: invalid JSON ({exc.msg} at column {exc.colno})") from exc
    if not isinstance(record, dict):
        raise CassetteError(f"{where}: expected a JSON object")
    missing = [name for name in ("key", "step", "digest") if name not in record]
    if "response" not in record and "error" not in record:
        missing.append("response")
    if missing:
        raise CassetteError(f"{where}: missing {', '.join(missing)}")
    if "response" not in record:
        if not isinstance(record["error"], dict):
            raise CassetteError(f"{where}: 'error' is not an object")
        return CassetteEntry(str(record["key"]), int(record["step"]), str(record["digest"]), None, record["error"])
    try:
        (response,) = messages_from_dict([record["response"]])
    except (KeyError, TypeError, ValueError) as exc:
        raise CassetteError(f"{where}: 'response' is not a serialized message ({exc})") from exc
    if not isinstance(response, AIMessage):
        raise CassetteError(f"{where}: 'response' is a {response.type} message, not an AI one")
    return CassetteEntry(str(record["key"]), int(record["step"]), str(record["digest"]), response)


@dataclass
class CassetteWriter:
    """Appends recordings to a cassette, one whole line per write.

    Appending (never truncating) lets several runs, or several agents of one run,
    share a cassette; a replay uses the latest line for a key.
    """

    path: Path
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def append(
        self, messages: Sequence[BaseMessage], key: str, digest_text: str, response: AIMessage | None,
        error: Mapping[str, Any] | None = None,
    ) -> CassetteEntry:
        """Record ``response`` (or the ``error`` the call failed with) for the conversation ``messages``."""
        entry = CassetteEntry(key, count_ai_messages(messages), digest_text, response, error)
        line = entry.to_json() + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(line)
        return entry
