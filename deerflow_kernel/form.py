"""The clarification card: a question the agent asked, as a form you can submit.

Built from the human-input request of a ``clarification`` event:

* v2 (``input_mode: form``): one input per field — text → ``Text``,
  textarea → ``Textarea``, number → ``FloatText``, select → ``Dropdown``,
  multi_select → ``SelectMultiple``, checkbox → ``Checkbox``, date →
  ``DatePicker``; required fields are marked with ``*``;
* v1 ``choice_with_other``: the options as ``RadioButtons`` plus an
  "other" text box; v1 ``free_text``: a ``Textarea``.

Submitting checks the values with the harness's own rules
(:func:`~deerflow.agents.clarification_reply.validate_form`), shows any
problem next to its field, and otherwise hands the answer to ``on_submit``,
which starts the next run (in the background: the kernel is never blocked
waiting for a person).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any

import ipywidgets as widgets
import traitlets

from deerflow.agents.clarification_reply import validate_form
from deerflow.errors import UserError
from deerflow_kernel.markup import esc, hidden, icon

Answer = str | dict[str, Any]
_FORM_PREFIX = "the reply does not fit the clarification form: "


def field_widget(field: Mapping[str, Any]) -> widgets.ValueWidget:
    """The input widget for one v2 field (unknown types are text)."""
    kind = field.get("type")
    options = [(str(o.get("label", o.get("value"))), str(o.get("value"))) for o in field.get("options") or []]
    placeholder = str(field.get("placeholder") or "")
    full = widgets.Layout(width="auto")
    if kind == "textarea":
        return widgets.Textarea(placeholder=placeholder, layout=full)
    if kind == "number":
        return widgets.FloatText(value=0.0)
    if kind == "select":
        return widgets.Dropdown(options=options, value=None)
    if kind == "multi_select":
        return widgets.SelectMultiple(options=options, rows=min(6, max(2, len(options))))
    if kind == "checkbox":
        return widgets.Checkbox(value=False, indent=False, description="")
    if kind == "date":
        return widgets.DatePicker(value=None)
    return widgets.Text(placeholder=placeholder, layout=full)


class _Field:
    """One form row: label, input, inline message."""

    def __init__(self, spec: Mapping[str, Any]) -> None:
        self.spec = dict(spec)
        self.name = str(spec["name"])
        self.required = bool(spec.get("required"))
        mark = ' <span style="color:#c00" title="required">*</span>' if self.required else ""
        self.label = widgets.HTML(f"<b>{esc(spec.get('label') or self.name)}</b>{mark}")
        self.input = field_widget(spec)
        self.message = widgets.HTML()
        hidden(self.message, True)
        self.touched = False
        self.input.observe(self._touch, names="value")
        self.row = widgets.VBox([self.label, self.input, self.message])

    def _touch(self, change: Any) -> None:
        self.touched = True
        self.show_message("")

    def value(self) -> Any:
        """The answer as the harness expects it (None: nothing given)."""
        raw = self.input.value
        kind = self.spec.get("type")
        if kind == "number":
            if not (self.touched or self.required):
                return None
            return int(raw) if float(raw).is_integer() else raw
        if kind == "multi_select":
            return list(raw) or None
        if kind == "date":
            return raw.isoformat() if isinstance(raw, dt.date) else None
        if isinstance(raw, str):
            return raw.strip() or None
        return raw

    def show_message(self, text: str) -> None:
        self.message.value = f'<span style="color:#c00">{esc(text)}</span>' if text else ""
        hidden(self.message, not text)


class ClarificationForm(widgets.VBox):
    """The card for one clarification request.

    Args:
        request: The request (``clarification`` event's ``request``).
        on_submit: Called with the answer (text, or a mapping of field values)
            once it passes validation.
    """

    def __init__(self, request: Mapping[str, Any], on_submit: Callable[[Answer], None] | None) -> None:
        self.request = dict(request)
        self.on_submit = on_submit
        self.answered = False
        self.fields: list[_Field] = []
        self.choice: widgets.RadioButtons | None = None
        self.text: widgets.Text | widgets.Textarea | None = None
        self.submit = widgets.Button(description="Submit", button_style="primary", icon="paper-plane")
        self.status = widgets.HTML()
        self.submit.on_click(self._clicked)
        if on_submit is None:
            self.submit.disabled = True
            self.status.value = "<i>Answer with <code>%deerflow reply ...</code></i>"
        super().__init__(self._children(), layout=widgets.Layout(
            border="1px solid #f0ad4e", padding="8px", margin="6px 0"))

    def _children(self) -> list[widgets.Widget]:
        head = f"{icon('question-circle', '#f0ad4e')} <b>The agent needs your input</b>"
        context = self.request.get("context")
        head += f"<div style='color:#555'>{esc(context)}</div>" if context else ""
        head += f"<div style='margin:4px 0'>{esc(self.request.get('question', ''))}</div>"
        rows: list[widgets.Widget] = [widgets.HTML(head)]
        mode = self.request.get("input_mode")
        if mode == "form" and self.request.get("fields"):
            self.fields = [_Field(f) for f in self.request["fields"]]
            rows += [f.row for f in self.fields]
        elif mode == "choice_with_other" and self.request.get("options"):
            labels = [(str(o.get("label")), str(o.get("value"))) for o in self.request["options"]]
            self.choice = widgets.RadioButtons(options=labels, value=None)
            self.text = widgets.Text(placeholder="…or answer in your own words")
            rows += [self.choice, self.text]
        else:
            self.text = widgets.Textarea(placeholder="Your answer", layout=widgets.Layout(width="auto"))
            rows.append(self.text)
        return [*rows, widgets.HBox([self.submit, self.status])]

    # -- values and validation ---------------------------------------------------------------
    def answer(self) -> Answer:
        """The current answer, validated.

        Raises:
            UserError: with the problems; field problems are also shown inline.
        """
        if self.fields:
            values = {f.name: v for f in self.fields if (v := f.value()) is not None}
            problems = self._field_problems(values)
            for f in self.fields:
                f.show_message(problems.get(f.name, ""))
            if problems:
                raise UserError("; ".join(problems.values()))
            try:
                validate_form(self.request["fields"], values)
            except UserError as exc:
                raise UserError(str(exc).removeprefix(_FORM_PREFIX)) from None
            return values
        text = (self.text.value if self.text is not None else "").strip()
        if self.choice is not None and self.choice.value is not None and not text:
            return self.choice.value
        if not text:
            raise UserError("Please answer the question first.")
        return text

    def _field_problems(self, values: Mapping[str, Any]) -> dict[str, str]:
        problems = {}
        for f in self.fields:
            if f.name not in values or values[f.name] in ([], ""):
                if f.required:
                    problems[f.name] = "This field is required."
                continue
            try:
                validate_form([f.spec], {f.name: values[f.name]})
            except UserError as exc:
                problems[f.name] = _field_message(str(exc), f)
        return problems

    # -- submitting ---------------------------------------------------------------------------
    def _clicked(self, _button: Any = None) -> None:
        if self.answered:  # answered elsewhere meanwhile: nothing to send twice
            return
        try:
            answer = self.answer()
        except UserError as exc:
            self.show_error(str(exc))
            return
        self.lock(True)
        self.status.value = "<i>Sending your answer…</i>"
        assert self.on_submit is not None
        self.on_submit(answer)

    def lock(self, locked: bool) -> None:
        """Disable (or re-enable) every input and the button."""
        for child in self._inputs():  # each input class declares its own `disabled` trait: no common base
            child.set_trait("disabled", locked)
        self.submit.disabled = locked

    def _inputs(self) -> list[widgets.Widget]:
        found: list[widgets.Widget] = [f.input for f in self.fields]
        return found + [w for w in (self.choice, self.text) if w is not None]

    def show_error(self, text: str) -> None:
        """A problem with the answer (or with sending it): the form stays editable."""
        self.lock(False)
        self.status.value = f'<span style="color:#c00">{esc(text)}</span>'

    def show_sent(self, answer: Answer) -> None:
        self.show_answered(answer)
        self.status.value = "✓ Answered — the agent continues below."

    def show_answered(self, answer: Answer, *, where: str = "") -> None:
        """Answered (here, by ``%deerflow reply``, in the chat...): read-only, with the answer.

        The inputs show the values given elsewhere where they fit, so the card
        says one thing wherever the question was answered.
        """
        from deerflow_kernel.static import answer_text

        self.answered = True
        self._fill(answer)
        self.lock(True)
        self.submit.description = "Answered"
        self.submit.button_style = "success"
        self.submit.icon = "check"
        for f in self.fields:
            f.show_message("")
        place = f" ({where})" if where else ""
        self.status.value = f"✓ Answered{esc(place)}: {esc(answer_text(answer))}"

    def _fill(self, answer: Answer) -> None:
        """Put an answer given elsewhere into the inputs (best effort: a value that does not fit is skipped)."""
        if isinstance(answer, Mapping):
            for f in self.fields:
                if f.name in answer:
                    try:
                        value = answer[f.name]
                        f.input.value = tuple(value) if isinstance(value, list) else value
                    except (TypeError, ValueError, KeyError, traitlets.TraitError):
                        continue
        elif self.text is not None and isinstance(answer, str) and not self.text.value:
            self.text.value = answer


def _field_message(message: str, field: _Field) -> str:
    """The harness's message about one field, without the form-level prefix and field name."""
    text = message.removeprefix(_FORM_PREFIX)
    label = field.spec.get("label") or field.name
    head = f"field '{field.name}' ({label}) "
    text = text.removeprefix(head)
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")
