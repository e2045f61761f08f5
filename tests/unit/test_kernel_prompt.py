"""Turning a cell into a prompt: option parsing, {var} interpolation, --with attachments."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest
from IPython.core.error import UsageError

from deerflow.errors import UserError
from deerflow_kernel.options import HelpShown, parse_cell_line, split_line
from deerflow_kernel.prompt import attachments_note, interpolate, make_attachment


class Report:
    title = "Q3"


def test_interpolation_fills_names_attributes_items_and_specs():
    ns = {"topic": "deer", "r": Report(), "rows": [3, 4], "share": 0.4567, "df": pd.DataFrame({"a": [1, 2, 3]})}
    text = "About {topic} for {r.title}: {rows[1]} rows, {share:.1%}, {df.shape[0]} lines, {topic!r}"
    assert interpolate(text, ns) == "About deer for Q3: 4 rows, 45.7%, 3 lines, 'deer'"


def test_braces_that_are_not_variables_survive_untouched():
    ns = {"x": 1}
    code = 'def f(d): return {"a": d}\nsets = {1, 2}\nlatex = \\frac{a}{b}\nstray } and { here\nunknown {nope} {x.missing} {x:bad}'
    assert interpolate(code, ns) == code
    assert interpolate("{x} and {{x}} and {{ x }}", ns) == "1 and {x} and {{ x }}"


def test_cell_options_parse_and_map_to_run_options(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    opts = parse_cell_line("--new --model gpt --plan --subagents --mode autonomous --with a b --with c --record run.jsonl")
    assert opts.new and opts.with_vars == ["a", "b", "c"]
    assert opts.run_options().to_dict() == {"model_name": "gpt", "interaction_mode": "autonomous", "is_plan_mode": True,
                                  "subagent_enabled": True, "record": str(tmp_path / "run.jsonl")}


def test_ref_is_repeatable_and_grants_the_named_threads(tmp_path):
    opts = parse_cell_line("--ref a1 --ref b2 --ref a1")
    assert opts.run_options().to_dict() == {"referenced_threads": ["a1", "b2"]}
    assert split_line("--ref a1 compare --ref")[0].refs == ["a1"]


@pytest.mark.parametrize(("line", "message"), [
    ("--record a --replay b", "not allowed with argument --record"),
    ("--thread t --new", "not allowed with argument --thread"),
    ("--mode sometimes", "invalid choice: 'sometimes'"),
    ("--bogus", "unrecognized arguments: --bogus"),
    ("--model", "expected one argument"),
    ('--model "unterminated', "cannot parse the options"),
])
def test_bad_cell_options_are_usage_errors_with_the_usage_line(line, message):
    with pytest.raises(UsageError) as info:
        parse_cell_line(line)
    assert message in str(info.value)


def test_help_is_shown_not_an_error(capsys):
    with pytest.raises(HelpShown):
        parse_cell_line("--help")
    assert "--with VAR" in capsys.readouterr().out


def test_line_magic_takes_options_only_before_the_prompt():
    opts, prompt = split_line("--new --model m  Compare --verbose and  -v {x}")
    assert opts.new and opts.model == "m"
    assert prompt == "Compare --verbose and  -v {x}"
    opts, prompt = split_line("-- --new is a flag")
    assert not opts.new and prompt == "--new is a flag"
    with pytest.raises(UsageError, match="--model needs a value"):
        split_line("--model")


def test_dataframe_attachment_is_csv_named_after_the_variable():
    sales = pd.DataFrame({"region": ["N", "S"], "revenue": [10, 20]})
    att = make_attachment("sales:csv", {"sales": sales})
    assert att.name == "sales.csv"
    assert pd.read_csv(io.BytesIO(att.data)).equals(sales)
    assert "2 rows × 2 columns: region, revenue" in att.description
    note = attachments_note([(att, "/mnt/user-data/uploads/sales.csv")])
    assert "`sales` → /mnt/user-data/uploads/sales.csv" in note


def test_other_attachment_kinds(tmp_path: Path):
    data_file = tmp_path / "measurements.tsv"
    data_file.write_text("a\tb\n1\t2\n")
    ns = {"path": str(data_file), "png": b"\x89PNG\r\n\x1a\nrest", "blob": b"\x00\x01", "cfg": {"k": [1, 2]}}
    assert make_attachment("path", ns).name == "path.tsv"
    assert make_attachment("path", ns).data == data_file.read_bytes()
    assert make_attachment("png", ns).name == "png.png"
    assert make_attachment("blob", ns).name == "blob.bin"
    assert make_attachment("cfg", ns).data.startswith(b'{\n  "k"')


@pytest.mark.parametrize(("spec", "ns", "message"), [
    ("missing", {}, "no variable named 'missing'"),
    ("n", {"n": 42}, "cannot attach a int"),
    ("p", {"p": "/definitely/not/here.csv"}, "is not a file"),
    ("df:xlsx", {"df": pd.DataFrame()}, "unknown format 'xlsx'"),
    ("1bad", {}, "expected a variable name"),
])
def test_bad_attachments_say_what_is_wrong(spec, ns, message):
    with pytest.raises(UserError, match=message):
        make_attachment(spec, ns)
