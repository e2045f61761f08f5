"""Replies to a clarification: the pending request, validation naming the field, readable summaries."""

from __future__ import annotations

import datetime as dt

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from deerflow.agents.clarification_reply import pending_request, prepare_reply
from deerflow.errors import UserError
from deerflow.runtime.clarification_form import build_clarification

FORM = build_clarification({"question": "Details?", "fields": [
    {"name": "dataset", "label": "Dataset", "type": "text", "required": True},
    {"name": "notes", "label": "Notes", "type": "textarea"},
    {"name": "top_n", "label": "Top N", "type": "number"},
    {"name": "chart", "label": "Chart", "type": "select", "options": ["bar", "line"]},
    {"name": "metrics", "label": "Metrics", "type": "multi_select", "options": ["revenue", "margin", "cost"]},
    {"name": "raw", "label": "Include raw data", "type": "checkbox"},
    {"name": "start", "label": "Start date", "type": "date", "required": True},
]}).payload
CHOICE = build_clarification({"question": "Which chart?", "options": ["bar", "line"]}).payload
FREE = build_clarification({"question": "What is the deadline?"}).payload


def test_a_complete_form_reply_is_summarized_in_form_order_with_labels():
    text = prepare_reply(FORM, {"start": dt.date(2025, 1, 31), "dataset": " sales.csv ", "top_n": "5",
                                "chart": "Bar", "metrics": ["margin", "revenue", "margin"], "raw": False,
                                "notes": "line one\nline two"})
    assert text == ("Dataset: sales.csv\nNotes: line one\nline two\nTop N: 5\nChart: bar\n"
                    "Metrics: margin, revenue\nInclude raw data: no\nStart date: 2025-01-31")


def test_optional_fields_left_empty_are_omitted():
    assert prepare_reply(FORM, {"dataset": "a.csv", "start": "2025-02-01", "notes": "  ", "metrics": []}) \
        == "Dataset: a.csv\nStart date: 2025-02-01"


@pytest.mark.parametrize(("values", "needle"), [
    ({"start": "2025-01-31"}, "field 'dataset' (Dataset) is required"),
    ({"dataset": "a", "start": "31/01/2025"}, "field 'start' (Start date) expects a date as YYYY-MM-DD"),
    ({"dataset": "a", "start": "2025-02-30"}, "field 'start' (Start date)"),
    ({"dataset": "a", "start": "2025-01-31", "top_n": "many"}, "field 'top_n' (Top N) expects a number"),
    ({"dataset": "a", "start": "2025-01-31", "top_n": True}, "field 'top_n'"),
    ({"dataset": "a", "start": "2025-01-31", "top_n": "nan"}, "field 'top_n'"),
    ({"dataset": "a", "start": "2025-01-31", "chart": "pie"}, "field 'chart' (Chart) must be one of bar, line"),
    ({"dataset": "a", "start": "2025-01-31", "metrics": ["revenue", "profit"]}, "field 'metrics'"),
    ({"dataset": "a", "start": "2025-01-31", "raw": "maybe"}, "field 'raw' (Include raw data) expects yes or no"),
    ({"dataset": ["a"], "start": "2025-01-31"}, "field 'dataset' (Dataset) expects text"),
    ({"dataset": "a", "start": "2025-01-31", "colour": "red"}, "unknown field 'colour'"),
])
def test_a_bad_form_reply_names_the_field(values, needle):
    with pytest.raises(UserError) as info:
        prepare_reply(FORM, values)
    assert needle in str(info.value)


def test_every_problem_is_reported_at_once():
    with pytest.raises(UserError) as info:
        prepare_reply(FORM, {"start": "tomorrow"})
    assert "'dataset'" in str(info.value) and "'start'" in str(info.value)


def test_command_line_style_values_are_coerced():
    text = prepare_reply(FORM, {"dataset": "d", "start": "2025-03-01", "raw": "yes", "top_n": "2.5",
                                "metrics": "revenue, cost"})
    assert "Include raw data: yes" in text and "Top N: 2.5" in text and "Metrics: revenue, cost" in text


def test_a_required_checkbox_must_be_checked():
    request = build_clarification({"question": "OK?", "fields": [
        {"name": "confirm", "label": "I understand this deletes data", "type": "checkbox", "required": True}]}).payload
    with pytest.raises(UserError, match="must be checked"):
        prepare_reply(request, {"confirm": False})
    assert prepare_reply(request, {"confirm": True}) == "I understand this deletes data: yes"


def test_a_form_may_be_answered_in_words():
    assert prepare_reply(FORM, "Use sales.csv from January") == "Use sales.csv from January"


def test_an_empty_form_reply_is_refused():
    optional = build_clarification({"question": "Q", "fields": [{"name": "a"}, {"name": "b"}]}).payload
    with pytest.raises(UserError, match="at least one field"):
        prepare_reply(optional, {})


@pytest.mark.parametrize(("answer", "expected"), [(2, "line"), ("2", "line"), ("BAR", "bar"), ("pie please", "pie please")])
def test_a_choice_accepts_a_number_an_option_or_other_text(answer, expected):
    assert prepare_reply(CHOICE, answer) == expected


@pytest.mark.parametrize("answer", [0, 3, "9"])
def test_an_option_number_out_of_range_is_refused(answer):
    with pytest.raises(UserError, match=r"option .* does not exist"):
        prepare_reply(CHOICE, answer)


@pytest.mark.parametrize("request_", [FREE, CHOICE, None])
def test_field_values_only_answer_a_form(request_):
    with pytest.raises(UserError, match="form"):
        prepare_reply(request_, {"a": 1})


def test_free_text_replies_are_stripped_and_must_not_be_empty():
    assert prepare_reply(FREE, "  Friday  ") == "Friday"
    with pytest.raises(UserError, match="empty"):
        prepare_reply(FREE, "   ")


def test_the_pending_request_is_the_trailing_clarification_only():
    asked = ToolMessage("Q?", tool_call_id="c1", artifact={"human_input": FREE})
    call = AIMessage("", tool_calls=[{"name": "ask_clarification", "args": {}, "id": "c1"}])
    other = ToolMessage("done", tool_call_id="c2", artifact={"status": "ok"})
    assert pending_request([HumanMessage("hi"), call, other, asked]) == FREE
    assert pending_request([HumanMessage("hi"), call, asked, other]) == FREE
    assert pending_request([HumanMessage("hi"), call, asked, HumanMessage("Friday")]) is None
    assert pending_request([HumanMessage("hi"), AIMessage("all done")]) is None
    assert pending_request([]) is None
