"""``ask_clarification``: ask the person a question, or a small form, and pause.

The tool is a declaration for the model.  Its call is intercepted by
:class:`~deerflow.agents.middlewares.clarification.ClarificationMiddleware`,
which normalizes the arguments (:mod:`deerflow.runtime.clarification_form`),
answers with a ToolMessage carrying the ``human_input`` request, and ends the
turn.  The argument schema is deliberately lenient (``fields`` is a list of
anything, types are plain strings): a malformed form must reach the
normalizer and degrade there, not fail validation and leave the model
guessing.  The JSON schema the model sees still describes the proper shape.
"""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.tools import StructuredTool
from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from deerflow.runtime.clarification_form import (
    CLARIFICATION_TYPES,
    FIELD_TYPES,
    build_clarification,
)
from deerflow.runtime.interaction_policy import CLARIFICATION_TOOL

_FIELD_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "Identifier of the value (letters, digits, _)."},
        "label": {"type": "string", "description": "What the person sees."},
        "type": {"type": "string", "enum": list(FIELD_TYPES)},
        "required": {"type": "boolean"},
        "options": {"type": "array", "items": {"type": "string"},
                    "description": "Choices, for select and multi_select."},
        "placeholder": {"type": "string"},
    },
    "required": ["name", "label", "type"],
}


class AskClarificationArgs(BaseModel):
    """Arguments of ``ask_clarification`` (lenient on purpose; see the module docstring)."""

    model_config = ConfigDict(extra="allow")

    question: Annotated[Any, WithJsonSchema({"type": "string"})] = Field(
        description="The question, in one or two sentences.")
    clarification_type: Annotated[Any, WithJsonSchema({"type": "string", "enum": list(CLARIFICATION_TYPES)})] = Field(
        default="missing_info", description="Why you ask.")
    context: Annotated[Any, WithJsonSchema({"type": "string"})] = Field(
        default=None, description="Short background: what you found and why it matters.")
    options: Annotated[Any, WithJsonSchema({"type": "array", "items": {"type": "string"}})] = Field(
        default=None, description="Choices for a single-choice question; the person may also answer freely.")
    fields: Annotated[Any, WithJsonSchema({"type": "array", "items": _FIELD_SCHEMA})] = Field(
        default=None, description="A form, to collect several values at once (or one multi_select field).")


def _ask_clarification(question: Any = "", clarification_type: Any = "missing_info", context: Any = None,
                       options: Any = None, fields: Any = None, **_: Any) -> str:
    # Only reached without the clarification middleware: answer with the readable request.
    args = {"question": question, "clarification_type": clarification_type, "context": context,
            "options": options, "fields": fields}
    return build_clarification(args).text


ask_clarification = StructuredTool.from_function(
    func=_ask_clarification,
    name=CLARIFICATION_TOOL,
    description=(
        "Ask the person following this run a question and pause until they answer. Use it when essential "
        "information is missing, when they must choose between approaches, or before high-risk or "
        "irreversible work they did not clearly authorize — not for details you can look up or safely "
        "assume. Make it the only tool call of its turn.\n"
        "- Free text: give just `question`.\n"
        "- One choice: add `options`.\n"
        "- Several values at once: add `fields`, a form. Field types: text, textarea, number, select, "
        "multi_select, checkbox, date (YYYY-MM-DD). A question where several options may be picked is "
        "a form with one multi_select field."
    ),
    args_schema=AskClarificationArgs,
)
"""The built-in tool; the clarification middleware answers its calls and ends the turn."""

__all__ = ["AskClarificationArgs", "ask_clarification"]
