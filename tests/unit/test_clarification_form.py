"""Normalization of ask_clarification arguments: every rule, and malformed input never raises."""

from __future__ import annotations

import json

import pytest

from deerflow.runtime.clarification_form import (
    MAX_FIELD_OPTIONS,
    MAX_FORM_BYTES,
    MAX_FORM_FIELDS,
    MAX_TEXT_CHARS,
    build_clarification,
    normalize_fields,
    normalize_options,
)
from deerflow.tools.errors import ToolFailure


def one(entry: object, **kwargs: object) -> dict:
    form = normalize_fields([entry, {"name": "other", "label": "Other"}], **kwargs)
    return form.fields[0]


def names(raw: object) -> list[str]:
    return [f["name"] for f in normalize_fields(raw).fields]


def test_a_good_form_keeps_every_field_in_order():
    form = normalize_fields([
        {"name": "dataset", "label": "Dataset", "type": "text", "required": True, "placeholder": "sales.csv"},
        {"name": "metrics", "label": "Metrics", "type": "multi_select", "options": ["revenue", "margin"]},
        {"name": "start", "label": "Start", "type": "date"},
    ])
    assert form.dropped == () and form.degraded is None
    assert [f["name"] for f in form.fields] == ["dataset", "metrics", "start"]
    assert form.fields[0] == {"name": "dataset", "label": "Dataset", "type": "text", "required": True,
                              "placeholder": "sales.csv"}
    assert form.fields[1]["options"] == [
        {"id": "metrics-option-1", "label": "revenue", "value": "revenue"},
        {"id": "metrics-option-2", "label": "margin", "value": "margin"},
    ]


@pytest.mark.parametrize("kind", ["text", "textarea", "number", "checkbox", "date"])
def test_known_types_are_kept(kind):
    assert one({"name": "x", "label": "X", "type": kind})["type"] == kind


@pytest.mark.parametrize("raw", ["colour-picker", "", None, 7, ["select"], {"t": 1}])
def test_unknown_or_malformed_types_become_text(raw):
    assert one({"name": "x", "label": "X", "type": raw})["type"] == "text"


def test_type_spelling_variants_are_understood():
    assert one({"name": "x", "type": "Multi-Select", "options": ["a"]})["type"] == "multi_select"


@pytest.mark.parametrize("kind", ["select", "multi_select"])
@pytest.mark.parametrize("options", [None, [], ["", "   "], "", [None, {"x": 1}]])
def test_choice_fields_without_usable_options_become_text(kind, options):
    field = one({"name": "x", "label": "X", "type": kind, "options": options})
    assert field["type"] == "text" and "options" not in field


def test_options_are_only_kept_on_choice_fields():
    assert "options" not in one({"name": "x", "type": "number", "options": ["1", "2"]})


def test_options_are_trimmed_deduplicated_and_blank_ones_dropped():
    assert normalize_options(["  bar ", "bar", "BAR", "", "line", 3, None]) == ["bar", "line", "3"]


def test_options_given_as_json_text_or_objects_are_accepted():
    assert normalize_options('["a", "b"]') == ["a", "b"]
    assert normalize_options([{"label": "Bar chart", "value": "bar"}, {"label": "Line"}]) == ["bar", "Line"]


def test_options_are_capped_and_long_ones_clipped():
    options = normalize_options([f"opt {i}" for i in range(100)] + ["x" * 5000])
    assert len(options) == MAX_FIELD_OPTIONS
    long = normalize_options(["y" * 5000])[0]
    assert len(long) == MAX_TEXT_CHARS and long.endswith("…")


def test_entries_that_are_not_objects_are_dropped():
    form = normalize_fields(["dataset", 3, None, {"name": "ok", "label": "OK"}])
    assert [f["name"] for f in form.fields] == ["ok"]
    assert len(form.dropped) == 3 and "not an object" in form.dropped[0]


@pytest.mark.parametrize("bad", ["__proto__", "constructor", "prototype", "toString", "hasOwnProperty",
                                 "__secret", "has space", "1st", "a-b", "<script>", "x" * 65, "名前", 12])
def test_reserved_and_unsafe_names_are_rejected(bad):
    form = normalize_fields([{"name": bad, "label": "Bad"}, {"name": "good", "label": "Good"}])
    assert [f["name"] for f in form.fields] == ["good"]
    assert len(form.dropped) == 1


def test_duplicate_names_keep_the_first_field():
    form = normalize_fields([{"name": "a", "label": "First"}, {"name": "a", "label": "Second"}])
    assert [f["label"] for f in form.fields] == ["First"]
    assert "duplicate" in form.dropped[0]


def test_a_missing_name_is_derived_from_the_label():
    assert names([{"label": "Start date!"}, {"label": "2nd metric"}]) == ["start_date", "f_2nd_metric"]


def test_a_label_that_slugs_to_a_reserved_name_is_dropped():
    assert names([{"label": "Constructor"}, {"name": "ok"}]) == ["ok"]


def test_a_missing_label_is_derived_from_the_name():
    assert one({"name": "top_n"})["label"] == "Top n"


def test_labels_and_placeholders_are_single_line_and_clipped():
    field = one({"name": "x", "label": "A\n  very\tlong " + "label " * 200, "placeholder": "p" * 999})
    assert "\n" not in field["label"] and len(field["label"]) == MAX_TEXT_CHARS
    assert len(field["placeholder"]) == MAX_TEXT_CHARS


@pytest.mark.parametrize(("raw", "expected"), [(True, True), ("true", True), ("yes", True), (1, True),
                                                (False, False), ("no", False), (None, False), ([1], False)])
def test_required_is_coerced_to_a_boolean(raw, expected):
    assert one({"name": "x", "required": raw})["required"] is expected


def test_a_standalone_multi_select_question_is_a_one_field_form():
    built = build_clarification({"question": "Which metrics should I report?", "options": ["revenue", "margin"],
                                 "fields": [{"type": "multi_select"}]}, tool_call_id="c1")
    assert built.payload["input_mode"] == "form" and built.payload["version"] == 2
    (field,) = built.payload["fields"]
    assert field["name"] == "answer" and field["label"] == "Which metrics should I report?"
    assert field["type"] == "multi_select" and [o["value"] for o in field["options"]] == ["revenue", "margin"]


def test_fields_given_as_json_text_or_a_single_object_are_accepted():
    assert names(json.dumps([{"name": "a"}, {"name": "b"}])) == ["a", "b"]
    assert names({"name": "solo", "label": "Solo"}) == ["solo"]


def test_too_many_fields_degrade_the_whole_form_to_text():
    built = build_clarification({"question": "Tell me everything",
                                 "fields": [{"name": f"f{i}", "label": f"F{i}"} for i in range(MAX_FORM_FIELDS + 1)]})
    assert built.payload["input_mode"] == "free_text" and built.payload["version"] == 1
    assert "fields" not in built.payload and "limit" in (built.form.degraded or "")
    assert built.text == "Tell me everything"


def test_exactly_the_field_limit_is_still_a_form():
    fields = [{"name": f"f{i}", "label": f"F{i}"} for i in range(MAX_FORM_FIELDS)]
    assert len(normalize_fields(fields).fields) == MAX_FORM_FIELDS


def test_a_form_over_the_byte_budget_degrades_to_a_choice_when_options_exist():
    fields = [{"name": f"f{i}", "label": "L" * 300, "type": "select", "options": [f"{'o' * 190}{j}" for j in range(30)]}
              for i in range(MAX_FORM_FIELDS)]
    built = build_clarification({"question": "Pick", "options": ["a", "b"], "fields": fields})
    assert "bytes" in (built.form.degraded or "") and str(MAX_FORM_BYTES) in (built.form.degraded or "")
    assert built.payload["input_mode"] == "choice_with_other"
    assert [o["value"] for o in built.payload["options"]] == ["a", "b"]


def test_a_form_whose_entries_are_all_invalid_degrades():
    built = build_clarification({"question": "Which?", "fields": [{"name": "__proto__"}, "junk"]})
    assert built.payload["input_mode"] == "free_text" and built.form.degraded == "no valid field"


@pytest.mark.parametrize("fields", ["not json", 42, True, "{broken"])
def test_a_fields_value_of_the_wrong_shape_degrades(fields):
    built = build_clarification({"question": "Which?", "fields": fields})
    assert built.payload["input_mode"] == "free_text"


def test_v1_choice_payload_and_text():
    built = build_clarification({"question": "Which chart?", "options": ["bar", "line"],
                                 "clarification_type": "approach_choice", "context": "Two layouts fit."},
                                tool_call_id="call_9")
    payload = built.payload
    assert payload == {
        "version": 1, "kind": "human_input_request", "source": "ask_clarification",
        "request_id": "clarification:call_9", "clarification_type": "approach_choice",
        "question": "Which chart?", "input_mode": "choice_with_other", "context": "Two layouts fit.",
        "tool_call_id": "call_9",
        "options": [{"id": "option-1", "label": "bar", "value": "bar"},
                    {"id": "option-2", "label": "line", "value": "line"}],
    }
    assert built.text.startswith("Two layouts fit.\n\nWhich chart?") and "  2. line" in built.text


def test_unknown_clarification_type_falls_back_to_missing_info():
    assert build_clarification({"question": "Q?", "clarification_type": ["x"]}).payload["clarification_type"] \
        == "missing_info"


def test_form_text_fallback_lists_fields_with_hints():
    built = build_clarification({"question": "Details?", "fields": [
        {"name": "n", "label": "Count", "type": "number", "required": True},
        {"name": "d", "label": "When", "type": "date"},
        {"name": "m", "label": "Metrics", "type": "multi_select", "options": ["a", "b"]},
    ]})
    assert "1. Count (required) — a number" in built.text
    assert "2. When — a date, YYYY-MM-DD" in built.text
    assert "3. Metrics — any of: a / b" in built.text


def test_no_question_and_no_form_is_an_error_the_model_can_fix():
    with pytest.raises(ToolFailure) as info:
        build_clarification({"question": "  "})
    assert info.value.code == "bad_arguments"


def test_a_form_without_a_question_gets_a_generic_one():
    built = build_clarification({"fields": [{"name": "a", "label": "A"}, {"name": "b", "label": "B"}]})
    assert built.payload["question"] and built.payload["input_mode"] == "form"


def test_long_question_and_context_are_clipped():
    built = build_clarification({"question": "q" * 10_000, "context": "c" * 10_000})
    assert len(built.payload["question"]) == 2_000 and len(built.payload["context"]) == 4_000


@pytest.mark.parametrize("args", [
    {"question": "Q", "fields": [{"name": "__proto__", "type": {"$gt": 1}, "options": {"a": [1, {"b": 2}]}}]},
    {"question": "Q", "fields": [{"name": f"f{i}"} for i in range(1000)]},
    {"question": "Q", "fields": [{"name": "x", "label": "L" * 100_000, "options": "x" * 100_000}]},
    {"question": "Q", "options": 5, "fields": [[["nested"]]], "context": ["not", "text"]},
    {"question": 42, "fields": [{"name": "x", "required": {"deep": True}, "placeholder": ["p"]}]},
])
def test_malformed_arguments_never_raise_and_stay_bounded(args):
    built = build_clarification(args)
    assert built.payload["input_mode"] in {"free_text", "choice_with_other", "form"}
    assert len(json.dumps(built.payload)) < MAX_FORM_BYTES + 8_000
