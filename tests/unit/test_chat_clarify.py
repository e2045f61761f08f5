"""Clarifications in the chat: the question as text, answers parsed from the user's next message."""

from __future__ import annotations

from deerflow.runtime.clarification_form import build_clarification
from deerflow_jupyter.chat.clarify import FormProgress, answer, describe, parse_form_reply
from fixtures.hang_guard import runs_to_the_end

FORM = build_clarification({
    "question": "How should I analyse the sales data?",
    "context": "There are two CSV files.",
    "fields": [
        {"name": "dataset", "label": "Dataset", "type": "text", "required": True, "placeholder": "sales.csv"},
        {"name": "metrics", "label": "Metrics", "type": "multi_select", "options": ["revenue", "margin"],
         "required": True},
        {"name": "top_n", "label": "Top N", "type": "number"},
        {"name": "notes", "label": "Notes", "type": "textarea"},
    ],
}, tool_call_id="ask_1").payload
CHOICE = build_clarification({"question": "Which chart?", "options": ["bar", "line"]}, tool_call_id="a2").payload
FIELDS = FORM["fields"]


def test_a_form_is_described_with_its_fields_and_a_reply_template():
    text = describe(FORM)
    assert text.startswith("**❓ How should I analyse the sales data?**")
    assert "> There are two CSV files." in text
    assert "1. **Dataset** *(required)* — e.g. sales.csv" in text
    assert "2. **Metrics** *(required)* — any of: revenue / margin" in text
    assert "3. **Top N** — a number" in text
    assert "```text\nDataset: …\nMetrics: …\nTop N: …\nNotes: …\n```" in text


def test_options_are_numbered():
    text = describe(CHOICE)
    assert "1. bar\n2. line" in text
    assert "Reply with a number, an option, or your own words." in text


def test_model_written_markup_is_shown_as_text():
    text = describe({"question": "Pick <b>one</b> *now*", "input_mode": "free_text"})
    assert "<b>" not in text and r"\<b\>one\</b\> \*now\*" in text


def test_field_lines_match_names_and_labels_loosely_and_textareas_continue():
    reply = "dataset = sales.csv\n- METRICS: revenue, margin\ntop-n: 5\nNotes: first line\nsecond line\nunrelated: x"
    assert parse_form_reply(FIELDS, reply) == {
        "dataset": "sales.csv", "metrics": "revenue, margin", "top_n": "5",
        "notes": "first line\nsecond line\nunrelated: x"}


def test_a_hostile_reply_is_parsed_in_linear_time():
    """Any chat message answers a pending form, on the server's event loop: the old line pattern
    took a minute on one line of 8k spaces (and held the GIL, so nothing else ran meanwhile)."""
    assert runs_to_the_end("""
        from deerflow.runtime.clarification_form import build_clarification
        from deerflow_jupyter.chat.clarify import parse_form_reply
        fields = build_clarification({"question": "q", "fields": [{"name": "a", "type": "text"},
                                      {"name": "b", "type": "text"}]}, tool_call_id="t").payload["fields"]
        for line in (" " * 200_000 + "x", "- " + " " * 200_000 + "x", "a" + " " * 200_000 + "x", "\t=" * 100_000):
            parse_form_reply(fields, line + "\\nb: kept")
    """)
    spaces = " " * 5000
    assert parse_form_reply(FIELDS, f"{spaces}x\n  -  Dataset  =  sales.csv \n* top n: 5\n{'x' * 81}: no") == {
        "dataset": "sales.csv", "top_n": "5"}


def test_template_placeholders_left_in_place_count_as_unanswered():
    assert parse_form_reply(FIELDS, "Dataset: sales.csv\nTop N: …\nNotes: ...") == {"dataset": "sales.csv"}


def test_a_one_field_form_takes_the_bare_message():
    field = [{"name": "city", "label": "City", "type": "text", "required": True}]
    assert parse_form_reply(field, "Lisbon") == {"city": "Lisbon"}
    assert parse_form_reply(FIELDS, "Lisbon") == {}


def test_missing_required_fields_get_a_follow_up_that_remembers_what_was_given():
    progress = FormProgress("clarification:ask_1")
    first = answer(FORM, "Dataset: sales.csv", progress)
    assert first.prompt is None
    assert "**I still need this to continue:** Thanks — I have **Dataset**." in first.follow_up
    assert "**Metrics**" in first.follow_up and "**Dataset** *(" not in first.follow_up
    second = answer(FORM, "Metrics: margin, revenue", progress)
    assert second.follow_up is None
    assert second.prompt == "Dataset: sales.csv\nMetrics: margin, revenue"


def test_a_value_that_does_not_fit_is_named_in_the_follow_up():
    outcome = answer(FORM, "Dataset: s.csv\nMetrics: revenue\nTop N: lots", FormProgress("x"))
    assert outcome.prompt is None
    assert "field 'top_n' (Top N) expects a number, got 'lots'" in outcome.follow_up
    fixed = answer(FORM, "Top N: 3", FormProgress("x", {"dataset": "s.csv", "metrics": "revenue"}))
    assert fixed.prompt == "Dataset: s.csv\nMetrics: revenue\nTop N: 3"


def test_prose_that_names_no_field_answers_a_form_as_text():
    assert answer(FORM, "Use whatever you think is best.", FormProgress("x")).prompt == \
        "Use whatever you think is best."


def test_options_by_number_text_or_own_words_and_a_wrong_number_is_asked_again():
    assert answer(CHOICE, "2", None).prompt == "line"
    assert answer(CHOICE, "BAR", None).prompt == "bar"
    assert answer(CHOICE, "a pie chart", None).prompt == "a pie chart"
    wrong = answer(CHOICE, "7", None)
    assert wrong.prompt is None and "option 7 does not exist" in wrong.follow_up
    assert "Reply with a number from 1 to 2" in wrong.follow_up


def test_fields_can_be_answered_by_number_and_a_placeholder_says_e_g_once():
    assert parse_form_reply(FIELDS, "1: sales.csv\n3 = 5") == {"dataset": "sales.csv", "top_n": "5"}
    request = {"question": "Where?", "input_mode": "form",
               "fields": [{"name": "region", "label": "Region", "type": "text", "placeholder": "e.g. Upper Midwest"}]}
    assert "1. **Region** — e.g. Upper Midwest" in describe(request)
