"""Answering a clarification: find the pending request, check the answer, word it.

A clarification ends its run with a ToolMessage whose artifact carries the
``human_input`` request.  While that message is the last thing on the thread,
the thread is *waiting*.  A reply is checked against the request before
anything is written — a missing required field, a value outside the options
or a malformed date is a :class:`UserError` naming the field, and the thread
stays as it was.  An accepted reply becomes the next run's input as readable
text (``"Dataset: sales.csv\\nMetrics: revenue, margin"``), because the model
reads prose; the structured values are only for validation.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage

from deerflow.errors import UserError

Answer = str | int | Mapping[str, Any]

MAX_REPLY_CHARS = 20_000
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_TRUE = frozenset({"true", "yes", "y", "1", "on", "checked"})
_FALSE = frozenset({"false", "no", "n", "0", "off", "unchecked"})


class _Invalid(ValueError):
    """A value that does not fit its field (the message says what is expected)."""


def pending_request(messages: Sequence[BaseMessage]) -> dict[str, Any] | None:
    """The human-input request the thread is waiting on, or None.

    Only the trailing tool results count: once anything else follows the
    clarification (a reply, a new run), it is no longer pending.
    """
    for message in reversed(messages):
        if not isinstance(message, ToolMessage):
            return None
        artifact = message.artifact if isinstance(message.artifact, dict) else {}
        request = artifact.get("human_input")
        if isinstance(request, dict):
            return request
    return None


def prepare_reply(request: Mapping[str, Any] | None, answer: Answer) -> str:
    """Check ``answer`` against the pending ``request`` and return the next run's input.

    Args:
        request: The pending human-input request (None: the thread is not waiting).
        answer: Free text, an option (its text, or its 1-based number), or a
            mapping of field names to values for a form.

    Raises:
        UserError: the answer does not fit the request; the message names the field.
    """
    if isinstance(answer, Mapping):
        if request is None or request.get("input_mode") != "form":
            raise UserError("field values can only answer a clarification form, and this thread is not "
                            "waiting on one; reply with text instead")
        fields = list(request.get("fields") or [])
        return summarize_form(fields, validate_form(fields, answer))
    if request is not None and request.get("input_mode") == "choice_with_other":
        return choose_option(request, answer)
    if isinstance(answer, bool) or not isinstance(answer, (str, int)):
        raise UserError(f"a reply must be text, an option or a mapping of field values, not {type(answer).__name__}")
    text = str(answer).strip()
    if not text:
        raise UserError("the reply is empty: answer the question")
    if len(text) > MAX_REPLY_CHARS:
        raise UserError(f"the reply is too long ({len(text)} characters; at most {MAX_REPLY_CHARS})")
    return text


def choose_option(request: Mapping[str, Any], answer: str | int) -> str:
    """An option by number or text; other text is accepted as the "other" answer."""
    values = [str(o.get("value")) for o in request.get("options") or []]
    if isinstance(answer, str) and answer.strip().isdigit() and _match(values, answer.strip()) is None:
        answer = int(answer.strip())
    if isinstance(answer, int) and not isinstance(answer, bool):
        if not 1 <= answer <= len(values):
            raise UserError(f"option {answer} does not exist; choose 1 to {len(values)} or answer in words")
        return values[answer - 1]
    return prepare_reply(None, _match(values, str(answer).strip()) or answer)


def _match(values: Sequence[str], text: str) -> str | None:
    folded = text.casefold()
    return next((v for v in values if v.casefold() == folded), None)


# -- forms -------------------------------------------------------------------------------------

def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip()) or (
        isinstance(value, (list, tuple, set)) and not value)


def _as_text(field: Mapping[str, Any], value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise _Invalid("expects text")
    text = str(value).strip()
    if len(text) > MAX_REPLY_CHARS:
        raise _Invalid(f"is too long ({len(text)} characters; at most {MAX_REPLY_CHARS})")
    return text


def _as_number(field: Mapping[str, Any], value: Any) -> int | float:
    if isinstance(value, bool):
        raise _Invalid("expects a number")
    if isinstance(value, str):
        text = value.strip()
        try:
            value = int(text)
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                raise _Invalid(f"expects a number, got {clip_repr(text)}") from None
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _Invalid("expects a finite number")
    return value


def _option_values(field: Mapping[str, Any]) -> list[str]:
    return [str(o.get("value")) for o in field.get("options") or []]


def _as_option(field: Mapping[str, Any], value: Any) -> str:
    values = _option_values(field)
    found = _match(values, str(value).strip()) if isinstance(value, (str, int, float)) else None
    if found is None:
        raise _Invalid(f"must be one of {', '.join(values)}; got {clip_repr(value)}")
    return found


def _as_options(field: Mapping[str, Any], value: Any) -> list[str]:
    if isinstance(value, str) and _match(_option_values(field), value.strip()) is None and "," in value:
        value = value.split(",")  # "revenue, margin" from a command line
    items = [value] if isinstance(value, (str, int, float)) else value
    if not isinstance(items, (list, tuple, set)):
        raise _Invalid("expects a list of options")
    chosen: list[str] = []
    for item in items:
        option = _as_option(field, item)
        if option not in chosen:
            chosen.append(option)
    return chosen


def _as_bool(field: Mapping[str, Any], value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower() if isinstance(value, (str, int)) else ""
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    raise _Invalid(f"expects yes or no (true/false), got {clip_repr(value)}")


def _as_date(field: Mapping[str, Any], value: Any) -> str:
    if isinstance(value, dt.datetime):
        return value.date().isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    text = value.strip() if isinstance(value, str) else ""
    try:
        if _ISO_DATE.match(text):
            return dt.date.fromisoformat(text).isoformat()
    except ValueError:
        pass
    raise _Invalid(f"expects a date as YYYY-MM-DD, got {clip_repr(value)}")


_COERCE: dict[str, Callable[[Mapping[str, Any], Any], Any]] = {
    "text": _as_text, "textarea": _as_text, "number": _as_number, "select": _as_option,
    "multi_select": _as_options, "checkbox": _as_bool, "date": _as_date,
}


def clip_repr(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _describe(field: Mapping[str, Any]) -> str:
    return f"field '{field['name']}' ({field.get('label') or field['name']})"


def validate_form(fields: Sequence[Mapping[str, Any]], values: Mapping[str, Any]) -> dict[str, Any]:
    """Check ``values`` against the form; return them in canonical form, by field order.

    Raises:
        UserError: unknown fields, missing required fields or bad values, all named.
    """
    by_name = {f["name"]: f for f in fields}
    problems = [f"unknown field '{k}' (the form has: {', '.join(by_name)})" for k in values if k not in by_name]
    clean: dict[str, Any] = {}
    for name, field in by_name.items():
        value = values.get(name)
        if _missing(value):
            if field.get("required"):
                problems.append(f"{_describe(field)} is required")
            continue
        try:
            clean[name] = _COERCE.get(str(field.get("type")), _as_text)(field, value)
        except _Invalid as exc:
            problems.append(f"{_describe(field)} {exc}")
            continue
        if field.get("type") == "checkbox" and field.get("required") and clean[name] is not True:
            problems.append(f"{_describe(field)} must be checked")
    if problems:
        raise UserError("the reply does not fit the clarification form: " + "; ".join(problems))
    if not clean:
        raise UserError("the reply is empty: give a value for at least one field")
    return clean


def _display(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(value)
    return str(value)


def summarize_form(fields: Sequence[Mapping[str, Any]], values: Mapping[str, Any]) -> str:
    """One ``Label: value`` line per answered field, in form order."""
    return "\n".join(f"{f.get('label') or f['name']}: {_display(values[f['name']])}"
                     for f in fields if f["name"] in values)


__all__ = ["Answer", "choose_option", "pending_request", "prepare_reply", "summarize_form", "validate_form"]
