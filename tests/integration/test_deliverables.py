"""Thread files and deliverables, end to end through the embedded client and a scripted model.

Each test gives the scripted model a conversation (``expect`` checks what the model was
shown at that turn) and asserts on events, the persisted thread and the stored run.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import yaml
from langchain_core.messages import HumanMessage, ToolMessage

from deerflow import DeerFlowClient
from deerflow.persistence.store import MetadataStore
from deerflow.runtime import events as ev
from deerflow.terminal import TerminalRenderer
from fixtures.big_tools import big_text

OUT = "/mnt/user-data/outputs"
CSV = b"region,revenue\nnorth,120\nsouth,80\n"
REPORT = "# Sales report\n\nNorth leads with 120.\n"


def client_for(tmp_path: Path, turns: list[Any], *, extra: str = "") -> DeerFlowClient:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"name": "deliverables", "turns": turns}))
    config = tmp_path / "config.yaml"
    config.write_text(f"""
models:
  - name: scripted
    use: deerflow.models.scripted:ScriptedChatModel
    script: {script}
{extra}""")
    return DeerFlowClient(config_path=config)


def call(name: str, call_id: str | None = None, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, **({"id": call_id} if call_id else {})}


def of_type(events: list[Any], cls: type) -> list[Any]:
    return [e for e in events if isinstance(e, cls)]


READ_CSV = {"expect": "/mnt/user-data/uploads/sales.csv (34 bytes)",
            "tool_calls": [call("read_file", path="/mnt/user-data/uploads/sales.csv")]}
WRITE_REPORT = {"expect": "north,120", "tool_calls": [call("write_file", path=f"{OUT}/report.md", content=REPORT)]}
PRESENT = {"tool_calls": [call("present_files", filepaths=[f"{OUT}/report.md"])]}


def test_uploaded_csv_to_presented_report_is_delivered(deerflow_home, tmp_path):
    with client_for(tmp_path, [READ_CSV, WRITE_REPORT, PRESENT, "Report ready."]) as client:
        thread = client.create_thread()
        client.upload(thread, CSV, "sales.csv")
        result = client.chat("Summarise my sales data", thread)
    assert result.status == "success"
    (changes,) = of_type(result.events, ev.WorkspaceChanges)
    created = {c["path"]: c for c in changes.changes["created"]}
    assert set(created) == {f"{OUT}/report.md"}  # the upload is an input, not a change
    assert "+North leads with 120." in created[f"{OUT}/report.md"]["diff"]
    assert result.receipt == {"status": "delivered", "produced": [f"{OUT}/report.md"],
                              "presented": [f"{OUT}/report.md"], "unpresented": []}
    assert not of_type(result.events, ev.Notice)
    stored = MetadataStore(deerflow_home / "deerflow.db").get_run(result.run_id, "local")
    assert stored is not None and stored.result["receipt"]["status"] == "delivered"
    assert stored.result["workspace_changes"]["counts"] == {"created": 1, "modified": 0, "deleted": 0}


def test_unpresented_report_is_marked_undelivered(deerflow_home, tmp_path):
    with client_for(tmp_path, [READ_CSV, WRITE_REPORT, "I wrote the report."]) as client:
        thread = client.create_thread()
        client.upload(thread, CSV, "sales.csv")
        result = client.chat("Summarise my sales data", thread)
    assert result.status == "success"  # it ran fine; delivery is reported separately
    assert result.receipt["status"] == "undelivered"
    assert result.receipt["unpresented"] == [f"{OUT}/report.md"]
    (notice,) = of_type(result.events, ev.Notice)
    assert notice.kind == "undelivered" and f"{OUT}/report.md" in notice.text
    out = io.StringIO()
    renderer = TerminalRenderer(out)
    for event in result.events:
        renderer.render(event)
    text = out.getvalue()
    assert "+ /mnt/user-data/outputs/report.md" in text
    assert "! Not delivered:" in text
    assert "run finished: success — delivery: undelivered (0 of 1 new outputs presented)" in text
    stored = MetadataStore(deerflow_home / "deerflow.db").get_run(result.run_id, "local")
    assert stored is not None and stored.result["receipt"]["status"] == "undelivered"


def test_only_this_runs_presentations_count(deerflow_home, tmp_path):
    turns = [
        WRITE_REPORT | {"expect": "first"}, PRESENT, "Done.",
        {"expect": "second", "tool_calls": [call("write_file", path=f"{OUT}/summary.md", content="short\n")]},
        PRESENT, "Presented the old report only.",
        "Nothing to do.",
    ]
    with client_for(tmp_path, turns) as client:
        first = client.chat("first")
        second = client.chat("second", first.thread_id)
        third = client.chat("third", first.thread_id)
    assert first.receipt["status"] == "delivered"
    assert second.receipt == {"status": "undelivered", "produced": [f"{OUT}/summary.md"],
                              "presented": [f"{OUT}/report.md"], "unpresented": [f"{OUT}/summary.md"]}
    assert third.receipt["status"] == "nothing_produced" and third.artifacts == []
    assert of_type(third.events, ev.WorkspaceChanges)[0].changes["counts"] == {
        "created": 0, "modified": 0, "deleted": 0}


def test_uploads_are_announced_once_on_the_next_turn(deerflow_home, tmp_path):
    turns = [
        READ_CSV, "Read it.",
        {"expect": "/mnt/user-data/uploads/notes.txt (5 bytes)", "text": "Saw the notes."},
        "Nothing new.",
    ]
    with client_for(tmp_path, turns) as client:
        thread = client.create_thread()
        client.upload(thread, CSV, "sales.csv")
        assert client.chat("look at my data", thread).status == "success"
        client.upload(thread, b"hello", "notes.txt")
        assert client.chat("and now?", thread).status == "success"
        assert client.chat("anything else?", thread).status == "success"
        view = client.thread(thread)
    notes = [m for m in view.messages if isinstance(m, HumanMessage) and m.additional_kwargs.get("deerflow_note")]
    assert len(notes) == 2
    assert "sales.csv" in notes[0].content and "notes.txt" not in notes[0].content
    assert "notes.txt" in notes[1].content and "sales.csv" not in notes[1].content
    prompts = [m.content for m in view.messages if isinstance(m, HumanMessage) and m not in notes]
    assert prompts == ["look at my data", "and now?", "anything else?"]  # the user's words stay untouched
    assert view.record.title == "look at my data"
    assert [f["name"] for f in view.values["uploaded_files"]] == ["notes.txt", "sales.csv"]


def test_a_50_mb_tool_result_is_externalized_and_readable(deerflow_home, tmp_path):
    saved = f"{OUT}/.tool-results/huge_output-call_big.txt"
    turns = [
        {"tool_calls": [call("huge_output", "call_big", megabytes=50)]},
        {"expect": f'read_file(path="{saved}", start_line=',
         "tool_calls": [call("read_file", path=saved, start_line=300_000, end_line=300_001)]},
        {"expect": "row 0299999", "text": "Found row 299999."},
    ]
    tools = "tools:\n  - name: huge_output\n    group: test\n    use: fixtures.big_tools:huge_output\n"
    with client_for(tmp_path, turns, extra=tools) as client:
        result = client.chat("dump everything")
        view = client.thread(result.thread_id)
    assert result.status == "success", result.error
    limit = client.config.tool_output.max_chars
    huge = next(m for m in view.messages if isinstance(m, ToolMessage) and m.name == "huge_output")
    assert len(huge.content) < limit  # the model sees a bounded message, in every later turn too
    assert "52,428,800 characters" in huge.content and "row 0000000" in huge.content
    (event,) = [e for e in of_type(result.events, ev.ToolResult) if e.name == "huge_output"]
    assert len(event.text) < limit
    host = next(deerflow_home.glob("users/local/threads/*/user-data/outputs/.tool-results/huge_output-call_big.txt"))
    assert host.stat().st_size == 50 * 1024 * 1024
    with host.open() as fh:
        assert fh.readline() == big_text(1).splitlines(keepends=True)[0]
    assert result.receipt["status"] == "nothing_produced"  # process feedback is not a deliverable
    assert of_type(result.events, ev.WorkspaceChanges)[0].changes["counts"]["created"] == 0


def test_a_new_threads_first_run_walks_its_folders_only_after(deerflow_home, tmp_path, monkeypatch):
    """The run's start made the thread's folders, empty, and nothing ran there yet: its "before" is the
    empty snapshot, not a walk; a later run on the thread walks before and after. The summaries are the same."""
    from deerflow.runs import deliverables

    walks: list[str] = []
    real = deliverables.take_snapshot

    def counted(paths: Any, **kwargs: Any) -> Any:
        walks.append("after" if kwargs.get("previous") is not None else "before")
        return real(paths, **kwargs)

    monkeypatch.setattr(deliverables, "take_snapshot", counted)
    write = {"tool_calls": [call("write_file", path=f"{OUT}/a.md", content="a\n")]}
    with client_for(tmp_path, [write, "Done.", "Nothing to do."]) as client:
        first = client.chat("first")
        assert walks == ["after"]
        second = client.chat("second", first.thread_id)
        assert walks == ["after", "before", "after"]
    assert [c["path"] for c in of_type(first.events, ev.WorkspaceChanges)[0].changes["created"]] == [f"{OUT}/a.md"]
    assert of_type(second.events, ev.WorkspaceChanges)[0].changes["counts"] == {"created": 0, "modified": 0, "deleted": 0}
