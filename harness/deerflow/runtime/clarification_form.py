"""From the model's ``ask_clarification`` arguments to a safe human-input request.

The model's arguments are untrusted and often sloppy: unknown field types,
option lists serialized as strings, missing names, runaway forms.  Whatever
arrives, :func:`build_clarification` produces a request every front end
(notebook widget, chat, CLI) can render, or a plain question — never an
error for a malformed form.  The rules, in one place:

* a field entry that is not an object, or whose name is unsafe (not an
  identifier), reserved (``__proto__``, ``constructor``… — front ends key
  values by name in plain objects) or a duplicate is **dropped**; a missing
  name is derived from the label;
* an unknown type becomes ``text``; ``select``/``multi_select`` without usable
  options becomes ``text``;
* options are trimmed, blanks dropped, deduplicated (case-insensitively),
  clipped to :data:`MAX_TEXT_CHARS` and capped at :data:`MAX_FIELD_OPTIONS`;
  labels and placeholders are clipped too;
* a single field is a *standalone question*: it takes the question as its
  label and the top-level options when it has none (a multi-select question
  is therefore a one-field form);
* structural overflow — more than :data:`MAX_FORM_FIELDS` valid fields, or a
  normalized form over :data:`MAX_FORM_BYTES` — degrades the whole form to
  the v1 protocol (free text, or a choice), because silently cutting business
  fields would let the form look complete when it is not.

The payload follows DeerFlow's human-input protocol: ``version`` 1 for
``free_text`` / ``choice_with_other``, ``version`` 2 for ``form``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from deerflow.errors import ToolFailure

FIELD_TYPES = ("text", "textarea", "number", "select", "multi_select", "checkbox", "date")
OPTION_FIELD_TYPES = frozenset({"select", "multi_select"})
CLARIFICATION_TYPES = ("missing_info", "ambiguous_requirement", "approach_choice", "risk_confirmation", "suggestion")

MAX_FORM_FIELDS = 16
MAX_RAW_FIELDS = 64
MAX_FIELD_OPTIONS = 24
MAX_TEXT_CHARS = 200
MAX_NAME_CHARS = 64
MAX_QUESTION_CHARS = 2_000
MAX_CONTEXT_CHARS = 4_000
MAX_FORM_BYTES = 16_384

RESERVED_NAMES = frozenset({
    "__proto__", "constructor", "prototype", "toString", "toLocaleString", "valueOf", "hasOwnProperty",
    "isPrototypeOf", "propertyIsEnumerable", "__defineGetter__", "__defineSetter__", "__lookupGetter__",
    "__lookupSetter__",
})
_SAFE_NAME = re.compile(rf"^[A-Za-z_][A-Za-z0-9_]{{0,{MAX_NAME_CHARS - 1}}}$")
_TYPE_ALIASES = {"multiselect": "multi_select", "multi_choice": "multi_select", "bool": "checkbox",
                 "boolean": "checkbox", "integer": "number", "float": "number", "string": "text"}
_TRUE = frozenset({"true", "yes", "1", "on"})


@dataclass(frozen=True)
class FormNormalization:
    """The outcome of normalizing ``fields``.

    Attributes:
        fields: The normalized v2 fields (empty: no form).
        dropped: One line per dropped entry, saying why (for logs and tests).
        degraded: Why the whole form fell back to v1, or None.
    """

    fields: tuple[dict[str, Any], ...] = ()
    dropped: tuple[str, ...] = ()
    degraded: str | None = None


@dataclass(frozen=True)
class ClarificationRequest:
    """A normalized clarification: the wire payload and its readable fallback text."""

    payload: dict[str, Any]
    text: str
    form: FormNormalization


# -- small coercions --------------------------------------------------------------------------

def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, marked with an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _text(value: Any, limit: int) -> str:
    """A stripped, clipped display string ("" for anything that is not a plain scalar)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return ""
    return clip(str(value).strip(), limit)


def _line(value: Any, limit: int) -> str:
    """Like :func:`_text`, on one line (labels, options and placeholders never wrap)."""
    return _text(" ".join(value.split()) if isinstance(value, str) else value, limit)


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value == 1
    return isinstance(value, str) and value.strip().lower() in _TRUE


def _decode_json_list(value: Any) -> Any:
    """Models sometimes send arrays as JSON text; decode those, leave the rest."""
    if isinstance(value, str) and value.strip().startswith(("[", "{")):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def field_type(raw: Any) -> str:
    """A known field type; anything else is ``text``."""
    if not isinstance(raw, str):
        return "text"
    key = re.sub(r"[\s-]+", "_", raw.strip().lower())
    key = _TYPE_ALIASES.get(key, key)
    return key if key in FIELD_TYPES else "text"


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot key a form value, or None when it is safe."""
    if not _SAFE_NAME.match(name):
        return "unsafe name"
    if name in RESERVED_NAMES or name.startswith("__"):
        return "reserved name"
    return None


def name_from_label(label: str) -> str:
    """A safe identifier derived from a label ("" when nothing usable remains)."""
    slug = re.sub(r"[^0-9A-Za-z]+", "_", label).strip("_").lower()
    if slug[:1].isdigit():
        slug = "f_" + slug
    return slug[:MAX_NAME_CHARS].rstrip("_")


# -- options and fields ------------------------------------------------------------------------

def normalize_options(raw: Any) -> list[str]:
    """Displayable, unique option strings (trimmed, clipped, capped)."""
    raw = _decode_json_list(raw)
    if raw is None:
        return []
    items = raw if isinstance(raw, Sequence) and not isinstance(raw, str) else [raw]
    options: list[str] = []
    seen: set[str] = set()
    for item in items:
        if isinstance(item, Mapping):
            item = item.get("value", item.get("label"))
        text = _line(item, MAX_TEXT_CHARS)
        if not text or text.casefold() in seen:
            continue
        seen.add(text.casefold())
        options.append(text)
        if len(options) == MAX_FIELD_OPTIONS:
            break
    return options


def option_items(prefix: str, options: Sequence[str]) -> list[dict[str, str]]:
    """Options in the wire shape (``id``, ``label``, ``value``)."""
    return [{"id": f"{prefix}-{i}", "label": text, "value": text} for i, text in enumerate(options, 1)]


def _field_name(entry: Mapping[str, Any], label: str, *, standalone: bool) -> tuple[str | None, str | None]:
    """The entry's name, or the reason it has no acceptable one."""
    raw = entry.get("name")
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        name = name_from_label(label) or ("answer" if standalone else "")
        if not name:
            return None, "no name and no label"
    elif isinstance(raw, str):
        name = raw.strip()
    else:
        return None, "name is not a string"
    problem = name_problem(name)
    return (None, f"{problem} {clip(name, 40)!r}") if problem else (name, None)


def normalize_field(entry: Any, *, standalone: bool = False, question: str = "",
                    inherited_options: Sequence[str] = ()) -> tuple[dict[str, Any] | None, str | None]:
    """One field in the v2 shape, or ``(None, reason)`` when the entry must be dropped.

    Args:
        entry: The model's field entry.
        standalone: Whether it is the form's only field (a standalone question).
        question: The clarification question (the label of a standalone field).
        inherited_options: Top-level options a standalone choice field may use.
    """
    if not isinstance(entry, Mapping):
        return None, "not an object"
    label = _line(entry.get("label"), MAX_TEXT_CHARS)
    name, problem = _field_name(entry, label, standalone=standalone)
    if name is None:
        return None, problem
    if not label:
        label = _line(question, MAX_TEXT_CHARS) if standalone and question else name.replace("_", " ").capitalize()
    kind = field_type(entry.get("type"))
    field: dict[str, Any] = {"name": name, "label": label, "type": kind, "required": _bool(entry.get("required"))}
    if kind in OPTION_FIELD_TYPES:
        options = normalize_options(entry.get("options")) or (list(inherited_options) if standalone else [])
        if options:
            field["options"] = option_items(f"{name}-option", options)
        else:
            field["type"] = "text"
    placeholder = _line(entry.get("placeholder"), MAX_TEXT_CHARS)
    if placeholder:
        field["placeholder"] = placeholder
    return field, None


def _entries(raw: Any) -> list[Any] | None:
    """The field entries as a list (None when ``fields`` has an unusable shape)."""
    raw = _decode_json_list(raw)
    if raw is None:
        return []
    if isinstance(raw, Mapping):
        return [raw]
    if isinstance(raw, Sequence) and not isinstance(raw, str):
        return list(raw)
    return None


def normalize_fields(raw: Any, *, question: str = "", options: Sequence[str] = ()) -> FormNormalization:
    """Normalize the model's ``fields`` (see the module docstring for the rules)."""
    entries = _entries(raw)
    if entries is None:
        return FormNormalization(degraded="fields is not a list")
    if len(entries) > MAX_RAW_FIELDS:
        return FormNormalization(degraded=f"{len(entries)} field entries (limit {MAX_FORM_FIELDS})")
    fields: list[dict[str, Any]] = []
    dropped: list[str] = []
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        field, problem = normalize_field(entry, standalone=len(entries) == 1, question=question,
                                         inherited_options=options)
        if field is not None and field["name"] in seen:
            field, problem = None, f"duplicate name {field['name']!r}"
        if field is None:
            dropped.append(f"fields[{index}]: {problem}")
            continue
        seen.add(field["name"])
        fields.append(field)
    degraded = _overflow(fields) if fields else ("no valid field" if entries else None)
    if degraded:
        return FormNormalization(dropped=tuple(dropped), degraded=degraded)
    return FormNormalization(tuple(fields), tuple(dropped))


def _overflow(fields: list[dict[str, Any]]) -> str | None:
    if len(fields) > MAX_FORM_FIELDS:
        return f"{len(fields)} fields (limit {MAX_FORM_FIELDS})"
    size = len(json.dumps(fields, ensure_ascii=False).encode())
    return f"form is {size} bytes (limit {MAX_FORM_BYTES})" if size > MAX_FORM_BYTES else None


# -- the request -------------------------------------------------------------------------------

def request_id_for(tool_call_id: str, question: str) -> str:
    """A stable id, so a retried call replaces its message instead of adding one."""
    if tool_call_id:
        return f"clarification:{tool_call_id}"
    return "clarification:" + hashlib.sha256(question.encode()).hexdigest()[:16]


def build_clarification(args: Mapping[str, Any], *, tool_call_id: str = "") -> ClarificationRequest:
    """Normalize ``ask_clarification`` arguments into a payload and a fallback text.

    Raises:
        ToolFailure: there is neither a question nor a usable form (the model can fix that).
    """
    question = _text(args.get("question"), MAX_QUESTION_CHARS)
    options = normalize_options(args.get("options"))
    form = normalize_fields(args.get("fields"), question=question, options=options)
    if not question:
        if not form.fields:
            raise ToolFailure("ask_clarification needs a `question` (what you want the person to answer).",
                              code="bad_arguments")
        question = "Please fill in the form."
    kind = args.get("clarification_type")
    payload: dict[str, Any] = {
        "version": 2 if form.fields else 1,
        "kind": "human_input_request",
        "source": "ask_clarification",
        "request_id": request_id_for(tool_call_id, question),
        "clarification_type": kind if kind in CLARIFICATION_TYPES else "missing_info",
        "question": question,
        "input_mode": "form" if form.fields else ("choice_with_other" if options else "free_text"),
    }
    context = _text(args.get("context"), MAX_CONTEXT_CHARS)
    if context:
        payload["context"] = context
    if tool_call_id:
        payload["tool_call_id"] = tool_call_id
    if form.fields:
        payload["fields"] = [dict(f) for f in form.fields]
    elif options:
        payload["options"] = option_items("option", options)
    return ClarificationRequest(payload, format_request_text(payload), form)


def field_hint(field: Mapping[str, Any]) -> str:
    labels = [o["label"] for o in field.get("options") or []]
    return {
        "number": "a number",
        "date": "a date, YYYY-MM-DD",
        "checkbox": "yes or no",
        "select": "one of: " + " / ".join(labels),
        "multi_select": "any of: " + " / ".join(labels),
    }.get(str(field.get("type")), "")


def format_request_text(payload: Mapping[str, Any]) -> str:
    """The readable form of a request: what the model and text-only front ends see."""
    parts = []
    if payload.get("context"):
        parts += [str(payload["context"]), ""]
    parts.append(str(payload.get("question", "")))
    if payload.get("input_mode") == "form":
        parts.append("")
        for i, field in enumerate(payload.get("fields") or [], 1):
            hint = field_hint(field)
            required = " (required)" if field.get("required") else ""
            parts.append(f"  {i}. {field['label']}{required}" + (f" — {hint}" if hint else ""))
        parts += ["", "Please reply with a value for each field."]
    elif payload.get("options"):
        parts.append("")
        parts += [f"  {i}. {o['label']}" for i, o in enumerate(payload["options"], 1)]
        parts += ["", "Reply with one of the options, or with your own answer."]
    return "\n".join(parts)


__all__ = [
    "CLARIFICATION_TYPES", "FIELD_TYPES", "MAX_FIELD_OPTIONS", "MAX_FORM_BYTES", "MAX_FORM_FIELDS", "MAX_TEXT_CHARS",
    "RESERVED_NAMES", "ClarificationRequest", "FormNormalization", "build_clarification", "field_hint", "field_type",
    "format_request_text", "name_problem", "normalize_field", "normalize_fields", "normalize_options",
]
