"""Log output for an operator: one JSON object per line (``logging.format: json``), secrets never written.

Two pieces, shared by the CLI and the Jupyter server:

* :class:`JsonFormatter` — a record becomes ``{"ts", "level", "logger", "message", ...}``
  plus its structured fields (``extra={"fields": {...}}``, and any other ``extra``; the per-run line of
  :mod:`deerflow.runtime.metrics` carries user, thread, run, status, duration, tokens
  and tool counts that way), an exception as ``error`` (type and first line) and, at
  DEBUG, ``traceback``.  A log shipper parses every line without a regex.
* :class:`RedactFilter` — a handler filter that blanks every secret in force out of a
  record *before* any formatter sees it: the config's keys, tokens and passwords
  (``api_key`` of a model, the web search key, an ACP agent's env, a database URL's
  password), the values of secret-looking environment variables, and anything shaped
  like a bearer token or an ``sk-`` key.  Messages, arguments, fields and tracebacks
  all pass through it: a provider error that echoes the key is logged as ``***``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import time
import traceback
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from deerflow.mcp.secrets import Redactor

HANDLER_NAME = "deerflow-log"
# A key or variable named like a secret: OPENAI_API_KEY, api_key, GITHUB_TOKEN, AWS_SECRET_ACCESS_KEY,
# DB_PASSWORD, client_secret... (not max_tokens, not the authorization section's rules)
_SECRET_NAME = re.compile(r"(?i)(?:^|[_-])(?:api[_-]?key|key|token|secret|password|passwd|pass|credentials?|"
                          r"private[_-]?key|access[_-]?key|auth[_-]?token)$")
_SHAPED = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{8,}|\bsk-[A-Za-z0-9_-]{12,}")
_MIN_ENV_SECRET = 8  # shorter values of secret-looking variables are too likely to be ordinary words
_STANDARD = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "fields", "taskName", "exc_error",
                                                          "short_message"}


def config_secrets(config: Any, env: Mapping[str, str] | None = None) -> list[str]:
    """Every secret string the config and the environment hold (for a :class:`RedactFilter`)."""
    found: list[str] = []
    data = config.model_dump() if hasattr(config, "model_dump") else config

    def walk(value: Any, secret: bool) -> None:
        if isinstance(value, Mapping):
            for key, item in value.items():
                walk(item, secret or bool(_SECRET_NAME.search(str(key))) or str(key) == "env")
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item, secret)
        elif isinstance(value, str) and secret:
            found.append(value)
        elif isinstance(value, str) and "://" in value:
            password = _url_password(value)
            if password:
                found.append(password)

    walk(data, False)
    environ = os.environ if env is None else env
    found += [v for k, v in environ.items() if _SECRET_NAME.search(k) and len(v) >= _MIN_ENV_SECRET]
    found += [v.split(" ", 1)[1] for v in found if " " in v]  # "Bearer abc" also leaks as "abc"
    return [s for s in found if s and not s.startswith("$")]


def _url_password(url: str) -> str | None:
    try:
        return urlsplit(url).password
    except ValueError:
        return None


class RedactFilter(logging.Filter):
    """Blanks known secrets, and secret-shaped strings, out of a record (a handler filter)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self.redactor = Redactor(secrets)

    def add(self, *secrets: str) -> None:
        self.redactor.add(*secrets)

    def redact(self, text: str) -> str:
        return _SHAPED.sub(lambda m: (m.group(1) or "") + "***", self.redactor(text))

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # arguments that do not fit the message: log what there is
            message = f"{record.msg} {record.args!r}"
        record.msg, record.args = self.redact(message), ()
        fields = getattr(record, "fields", None)
        if isinstance(fields, Mapping):
            record.fields = {k: self.redact(v) if isinstance(v, str) else v for k, v in fields.items()}
        if record.exc_info and record.exc_info[1] is not None:
            # formatters use a pre-set exc_text as is; ``exc_error`` is the one-line form (CLI, JSON)
            record.exc_text = self.redact("".join(traceback.format_exception(*record.exc_info)).rstrip())
            record.exc_error = self.redact(exception_line(record.exc_info[1]))
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line; fields are top-level keys, never inside the message."""

    def __init__(self, *, tracebacks: bool = False) -> None:
        super().__init__()
        self.tracebacks = tracebacks

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(), "logger": record.name,
            # a record whose text repeats its fields says so briefly (``extra={"short_message": ...}``)
            "message": getattr(record, "short_message", None) or record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, Mapping):
            line.update({k: v for k, v in fields.items() if k not in line})
        line.update({k: v for k, v in vars(record).items()
                     if k not in _STANDARD and k not in line and not k.startswith("_") and _jsonable(v)})
        if record.exc_info and record.exc_info[1] is not None:
            line["error"] = getattr(record, "exc_error", None) or exception_line(record.exc_info[1])
            record.exc_text = record.exc_text or self.formatException(record.exc_info)
        if self.tracebacks and record.exc_text:
            line["traceback"] = record.exc_text
        return json.dumps(line, ensure_ascii=False, default=str)


def exception_line(exc: BaseException) -> str:
    """``Type: first line of the message`` (at most 500 characters of it)."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:500]}" if text else type(exc).__name__


def _jsonable(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool, type(None), list, dict))


def install_server_logging(config: Any, *, fmt: str, level: int = logging.INFO) -> logging.Handler | None:
    """The Jupyter server's ``deerflow.*`` logs: JSON lines on stderr when ``fmt`` is ``json``.

    With ``text`` nothing changes here (the server's own handlers keep the per-run
    line; see the extension); with ``json`` the ``deerflow`` logger gets its own
    redacting handler and stops propagating, so every line on it is one JSON object.
    Installing again (a second extension load) replaces the earlier handler.
    """
    root = logging.getLogger("deerflow")
    for old in [h for h in root.handlers if h.get_name() == HANDLER_NAME]:
        root.removeHandler(old)
    if fmt != "json":
        return None
    handler = logging.StreamHandler(sys.stderr)
    handler.set_name(HANDLER_NAME)
    handler.addFilter(RedactFilter(config_secrets(config)))
    handler.setFormatter(JsonFormatter())
    root.addHandler(handler)
    root.setLevel(min(level, root.level or level))
    root.propagate = False
    return handler


def redacting(handler: logging.Handler, config: Any) -> RedactFilter:
    """Put (or refresh) a :class:`RedactFilter` with ``config``'s secrets in front of ``handler``."""
    existing = next((f for f in handler.filters if isinstance(f, RedactFilter)), None)
    if existing is None:
        existing = RedactFilter()
        handler.filters.insert(0, existing)  # before any filter that formats or drops
    existing.add(*config_secrets(config))
    return existing
