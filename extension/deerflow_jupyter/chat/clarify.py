"""Clarifications in a chat: the question as a message, the answer as the next message.

A chat has no form widgets, so a clarification is shown as readable markdown —
the question, its context, then its options or its fields (numbered, with
what is expected, like a form) and a reply template.  The user's next
message is the answer:

* **options** (``choice_with_other``): a number, an option's text, or any
  other words (the harness's :func:`choose_option` rules);
* **free text**: the message as it is;
* **form**: ``field: value`` lines, matched to a field by its name, label or
  number (case, spaces, ``_`` and ``-`` ignored; a textarea value may continue on
  the following lines).  A one-field form also takes the bare message.  A
  message with no recognisable field line is passed on as prose — the harness
  accepts free text for a form, and the model reads it.

Missing required fields or values that do not fit are not an error: the
session keeps what was given (:class:`FormProgress`) and asks a follow-up
question naming only what is still needed.  Validation and the wording of
the accepted answer are the harness's own
(:func:`~deerflow.agents.clarification_reply.prepare_reply`), so the chat,
the notebook form and the CLI accept exactly the same answers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from deerflow.agents.clarification_reply import prepare_reply
from deerflow.errors import UserError
from deerflow.runtime.clarification_form import field_hint

_MAX_FIELD_KEY = 80
_PLACEHOLDERS = frozenset({"", "…", "...", "?"})
_MD_SPECIAL = re.compile(r"([\\`*\[\]<>#|])")
_FORM_PREFIX = "the reply does not fit the clarification form: "


def md_escape(text: Any) -> str:
    """``text`` with markdown/HTML specials escaped (model-written labels are data, not markup)."""
    return _MD_SPECIAL.sub(r"\\\1", str(text))


def _key(text: str) -> str:
    return re.sub(r"[\s_\-]+", "", text).casefold()


def describe(request: Mapping[str, Any]) -> str:
    """The clarification request as a chat message (markdown)."""
    parts = [f"**❓ {md_escape(request.get('question', ''))}**"]
    if request.get("context"):
        parts.append("\n".join(f"> {md_escape(line)}" for line in str(request["context"]).splitlines()))
    fields = list(request.get("fields") or [])
    options = list(request.get("options") or [])
    if request.get("input_mode") == "form" and fields:
        parts.append("\n".join(_field_bullet(f, i) for i, f in enumerate(fields, 1)))
        template = "\n".join(f"{f.get('label') or f['name']}: …" for f in fields)
        parts.append("_Reply with one line per field, by name or number (`1: …`); optional ones may be "
                     f"left out:_\n\n```text\n{template}\n```")
    elif options:
        parts.append("\n".join(f"{i}. {md_escape(o.get('label', o.get('value')))}"
                               for i, o in enumerate(options, 1)))
        parts.append("_Reply with a number, an option, or your own words._")
    else:
        parts.append("_Reply with your answer in your next message._")
    return "\n\n".join(parts)


def _field_bullet(spec: Mapping[str, Any], number: int | None = None) -> str:
    """One field as a list item: numbered in the question (a number is a valid answer key), a bullet in follow-ups."""
    label = md_escape(spec.get("label") or spec["name"])
    required = " *(required)*" if spec.get("required") else ""
    placeholder = re.sub(r"^\s*e\.\s?g\.?\s*", "", str(spec.get("placeholder") or ""), flags=re.IGNORECASE)
    hint = field_hint(spec) or (f"e.g. {placeholder}" if placeholder else "")
    mark = f"{number}." if number is not None else "-"
    return f"{mark} **{label}**{required}" + (f" — {md_escape(hint)}" if hint else "")


def parse_form_reply(fields: Sequence[Mapping[str, Any]], text: str) -> dict[str, str]:
    """The field values written in ``text`` (empty when no line names a field).

    A one-field form takes the whole text when no line names its field.
    """
    by_key: dict[str, str] = {}
    for number, spec in enumerate(fields, 1):
        by_key.setdefault(_key(str(spec["name"])), str(spec["name"]))
        by_key.setdefault(str(number), str(spec["name"]))  # the question numbers the fields
        if spec.get("label"):
            by_key.setdefault(_key(str(spec["label"])), str(spec["name"]))
    multiline = {str(f["name"]) for f in fields if f.get("type") == "textarea"}
    values: dict[str, str] = {}
    current: str | None = None
    for line in text.splitlines():
        pair = _field_line(line)
        name = by_key.get(_key(pair[0])) if pair else None
        if pair and name is not None:
            values[name] = pair[1]
            current = name
        elif current in multiline:
            values[current] = f"{values[current]}\n{line}".strip()
    if not values and len(fields) == 1 and text.strip():
        values[str(fields[0]["name"])] = text.strip()
    return {k: v for k, v in values.items() if v.strip() not in _PLACEHOLDERS}


def _field_line(line: str) -> tuple[str, str] | None:
    """``(key, value)`` of a ``key: value`` (or ``- key = value``) line, else None.

    Cut at the first ``:`` or ``=``, in one pass: the regex this replaces split a run of spaces
    between three repeats, so one line of 8k spaces in a chat message took a minute on the
    server's event loop (any message answers a pending form).
    """
    cut = min((i for i in (line.find(":"), line.find("=")) if i >= 0), default=-1)
    if cut < 0:
        return None
    head = line[:cut].lstrip()
    if head[:1] in ("-", "*") and head[1:2].isspace():  # a list bullet
        head = head[1:]
    key = head.strip()
    if not 0 < len(key) <= _MAX_FIELD_KEY:
        return None
    return key, line[cut + 1:].strip()


@dataclass
class FormProgress:
    """Answers given so far to one pending form (kept across follow-up questions)."""

    request_id: str
    values: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ReplyOutcome:
    """What to do with a message that answers a clarification.

    Exactly one of ``prompt`` (start the next run with it) and ``follow_up``
    (ask again; nothing is sent to the agent) is set.
    """

    prompt: str | None = None
    follow_up: str | None = None


def answer(request: Mapping[str, Any], text: str, progress: FormProgress | None) -> ReplyOutcome:
    """Turn ``text`` into the next run's input, or a follow-up question.

    Args:
        request: The pending human-input request.
        text: The user's message.
        progress: Earlier partial answers to this form (updated in place).
    """
    fields = list(request.get("fields") or [])
    if request.get("input_mode") == "form" and fields:
        given = parse_form_reply(fields, text)
        if given or (progress is not None and progress.values):
            return _answer_form(request, fields, given, progress)
    try:
        return ReplyOutcome(prompt=prepare_reply(request, text))
    except UserError as exc:
        return ReplyOutcome(follow_up=f"{md_escape(exc)}\n\n{_retry_hint(request)}")


def _answer_form(request: Mapping[str, Any], fields: list[Mapping[str, Any]], given: dict[str, str],
                 progress: FormProgress | None) -> ReplyOutcome:
    values = {**(progress.values if progress else {}), **given}
    if progress is not None:
        progress.values = values
    missing = [f for f in fields if f.get("required") and not str(values.get(str(f["name"]), "")).strip()]
    if missing:
        return ReplyOutcome(follow_up=_missing_question(fields, missing, values))
    try:
        return ReplyOutcome(prompt=prepare_reply(request, values))
    except UserError as exc:
        problem = str(exc).removeprefix(_FORM_PREFIX)
        return ReplyOutcome(follow_up=f"That does not fit yet: {md_escape(problem)}.\n\n"
                                      "_Send the corrected `field: value` lines; the rest is kept._")


def _missing_question(fields: list[Mapping[str, Any]], missing: list[Mapping[str, Any]],
                      values: Mapping[str, str]) -> str:
    given = [md_escape(f.get("label") or f["name"]) for f in fields if str(f["name"]) in values]
    got = " Thanks — I have " + ", ".join(f"**{label}**" for label in given) + "." if given else ""
    lines = "\n".join(_field_bullet(f) for f in missing)
    template = "\n".join(f"{f.get('label') or f['name']}: …" for f in missing)
    return (f"**I still need {'this' if len(missing) == 1 else 'these'} to continue:**{got}\n\n{lines}\n\n"
            f"```text\n{template}\n```")


def _retry_hint(request: Mapping[str, Any]) -> str:
    if request.get("options"):
        return f"_Reply with a number from 1 to {len(request['options'])}, an option, or your own words._"
    return "_Reply with your answer in your next message._"


__all__ = ["FormProgress", "ReplyOutcome", "answer", "describe", "md_escape", "parse_form_reply"]
