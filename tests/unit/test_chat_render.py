"""A run's events as chat messages: coalesced streaming, tool lines, artifacts, the closing summary."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from deerflow.runtime import events as ev
from deerflow.tools.errors import ToolFailure
from deerflow_jupyter.chat.artifacts import (
    MAX_INLINE_IMAGE_BYTES,
    MAX_TABLE_COLUMNS,
    MAX_TABLE_ROWS,
    artifact_view,
    csv_table,
)
from deerflow_jupyter.chat.render import RunRenderer

RUN = {"run_id": "r1", "thread_id": "chat-1"}


class RecordingChat:
    """A ChatSurface that keeps every message and counts the writes."""

    def __init__(self) -> None:
        self.messages: dict[str, dict[str, Any]] = {}
        self.writes = 0
        self.status: str | None = None
        self.settings: dict[str, Any] = {}

    chat_id = "c1"
    chat_path = "test.chat"

    def post(self, markdown: str) -> str:
        self.writes += 1
        message_id = f"m{len(self.messages)}"
        self.messages[message_id] = {"body": markdown}
        return message_id

    def edit(self, message_id: str, markdown: str) -> None:
        self.writes += 1
        self.messages[message_id]["body"] = markdown

    def post_mime(self, bundle: Mapping[str, Any], *, fallback: str) -> str:
        message_id = self.post(fallback)
        self.messages[message_id]["mime"] = dict(bundle)
        return message_id

    def set_status(self, text: str | None) -> None:
        self.status = text

    def load_setting(self, key: str) -> Any:
        return self.settings.get(key)

    def store_setting(self, key: str, value: Any) -> None:
        self.settings[key] = value

    def bodies(self) -> list[str]:
        return [m["body"] for m in self.messages.values()]


def renderer(chat: RecordingChat, artifacts: dict[str, bytes] | None = None) -> RunRenderer:
    files = artifacts or {}

    def view(path: str):
        name = path.rsplit("/", 1)[-1]
        return artifact_view(path, url=f"/files/{name}", read=lambda: files[name])

    return RunRenderer(chat, thread_id="chat-1", artifact=view, link=lambda rel: f"/files/{rel}")


def delta(text: str, message_id: str = "a1") -> ev.MessageDelta:
    return ev.MessageDelta(**RUN, message_id=message_id, text=text)


def test_streamed_deltas_coalesce_into_one_message_pushed_on_flush():
    chat = RecordingChat()
    view = renderer(chat)
    for word in ["The ", "answer ", "is ", "forty-two. "] * 5:
        view.handle(delta(word))
    assert chat.writes == 0  # nothing pushed per delta
    view.flush()
    view.flush()  # nothing changed: no second write
    assert chat.writes == 1
    assert chat.bodies() == [("The answer is forty-two. " * 5).strip()]
    view.handle(delta("More."))
    view.flush()
    assert chat.writes == 2 and len(chat.messages) == 1
    assert chat.bodies()[0].endswith("forty-two. More.")


def test_tool_lines_turn_from_running_to_done_or_failed_in_place():
    chat = RecordingChat()
    view = renderer(chat)
    view.handle(ev.Message(**RUN, message_id="a1", text="Working on it."))
    view.handle(ev.ToolCall(**RUN, call_id="t1", name="write_file", args={"path": "/mnt/user-data/outputs/a.md"}))
    assert chat.bodies() == ["Working on it.\n\n⏳ **write_file** `/mnt/user-data/outputs/a.md`"]
    assert chat.status == "is running write_file…"
    view.handle(ev.ToolResult(**RUN, call_id="t1", name="write_file", text="ok"))
    view.handle(ev.ToolCall(**RUN, call_id="t2", name="bash", args={"command": "ls\nrm -rf x"}))
    view.handle(ev.ToolResult(**RUN, call_id="t2", name="bash", status="error", text="permission denied\nmore"))
    assert chat.bodies() == ["Working on it.\n\n✓ **write_file** `/mnt/user-data/outputs/a.md`  \n"
                             "✗ **bash** `ls` — permission denied"]


def test_a_delegation_that_missed_its_criteria_is_a_warning_line_not_a_check():
    chat = RecordingChat()
    view = renderer(chat)
    view.handle(ev.ToolCall(**RUN, call_id="k1", name="task", args={"description": "Write the glossary"}))
    view.handle(ev.ToolResult(**RUN, call_id="k1", name="task", text=(
        "Subagent 'general': COMPLETED\n\nAcceptance (checked by the harness): UNMET\n  - file: UNMET")))
    view.handle(ev.Subagent(**RUN, task_id="s1", status="completed", label="Write the glossary",
                            detail={"receipts": 1, "acceptance": "UNMET"}))
    [body] = chat.bodies()
    assert "⚠ **task**" in body and "acceptance not met" in body and "✓" not in body
    assert "↳ subagent ⚠ Write the glossary — completed, 0 turns, 0 tokens, 1 receipt," in body


def test_an_artifact_closes_the_segment_and_later_text_comes_below_it():
    chat = RecordingChat()
    png = b"\x89PNG\r\n\x1a\n" + b"0" * 20
    view = renderer(chat, {"chart.png": png, "notes.csv": b"a,b\n1,2\n"})
    view.handle(ev.Message(**RUN, message_id="a1", text="Here it is."))
    view.handle(ev.Artifact(**RUN, path="/mnt/user-data/outputs/chart.png", name="chart.png"))
    view.handle(ev.Artifact(**RUN, path="/mnt/user-data/outputs/notes.csv", name="notes.csv"))
    view.handle(ev.Message(**RUN, message_id="a2", text="Anything else?"))
    messages = list(chat.messages.values())
    # each artifact is framed by rules, apart from the agent's text before and after it
    assert messages[0]["body"] == "Here it is."
    assert messages[1]["body"] == "---\n\n📎 **[chart.png](/files/chart.png)** · 28 B"
    assert base64.b64decode(messages[2]["mime"]["image/png"]) == png
    assert messages[3]["body"] == "---\n\n📎 **[notes.csv](/files/notes.csv)** · 8 B"
    assert messages[4]["mime"]["text/markdown"] == "| a | b |\n| --- | --- |\n| 1 | 2 |\n\n---"  # a table
    assert messages[5]["body"] == "Anything else?"


def test_an_artifact_shown_as_a_link_only_is_framed_in_one_message():
    chat = RecordingChat()
    view = renderer(chat, {"page.html": b"<script>x</script>"})
    view.handle(ev.Message(**RUN, message_id="a1", text="The report:"))
    view.handle(ev.Artifact(**RUN, path="/mnt/user-data/outputs/page.html", name="page.html"))
    view.handle(ev.Message(**RUN, message_id="a2", text="That is all."))
    assert chat.bodies() == ["The report:", "---\n\n📎 **[page.html](/files/page.html)** · 18 B\n\n---",
                             "That is all."]


def test_the_same_notice_is_shown_once():
    chat = RecordingChat()
    view = renderer(chat)
    offline = "Using an offline model."
    view.handle(ev.RunStarted(**RUN, model="scripted", notice=offline))
    view.handle(ev.Notice(**RUN, kind="offline", text=offline))
    for _ in range(2):
        view.handle(ev.Notice(**RUN, kind="undelivered", text="wrote 1 output file(s) but presented none: r.md"))
    view.handle(ev.RunFinished(**RUN, status="success"))
    bodies = chat.bodies()
    assert sum(b.count(offline) for b in bodies) == 1
    assert sum(b.count("presented none") for b in bodies) == 1
    # across the runs of one chat (a clarification's answer is a new run) too
    seen: set[str] = set()
    for _ in range(2):
        view = RunRenderer(chat, thread_id="chat-1", artifact=lambda p: artifact_view(p, url="", read=bytes),
                           link=str, seen_notices=seen)
        view.handle(ev.RunStarted(**RUN, model="scripted", notice="Offline again."))
        view.handle(ev.RunFinished(**RUN, status="success"))
    assert sum(b.count("Offline again.") for b in chat.bodies()) == 1


def test_the_summary_lists_changes_warns_about_undelivered_outputs_and_says_how_it_ended():
    chat = RecordingChat()
    view = renderer(chat)
    view.handle(ev.WorkspaceChanges(**RUN, changes={
        "created": [{"path": "/mnt/user-data/outputs/r.md"}], "modified": [],
        "deleted": [{"path": "/mnt/user-data/outputs/old.md"}], "counts": {"created": 1, "deleted": 1}}))
    view.handle(ev.Notice(**RUN, kind="undelivered",
                          text="this run wrote 1 output file(s) but presented none of them: r.md"))
    view.handle(ev.RunFinished(**RUN, status="success"))
    assert chat.bodies()[-1] == (
        "**Files changed:** 1 created, 1 deleted\n"
        "- ➕ [`/mnt/user-data/outputs/r.md`](/files/r.md)\n"
        "- ➖ `/mnt/user-data/outputs/old.md`\n\n"
        "⚠️ **Not delivered:** this run wrote 1 output file(s) but presented none of them: r.md\n\n"
        "_✓ Run finished · thread `chat-1`_")
    assert chat.status is None


def test_cancelled_and_failed_runs_end_with_a_clear_line():
    chat = RecordingChat()
    renderer(chat).handle(ev.RunFinished(**RUN, status="cancelled"))
    renderer(chat).handle(ev.RunFinished(**RUN, status="error", error="model unreachable"))
    assert chat.bodies() == ["**⏹ Stopped.** The run was cancelled · thread `chat-1`",
                             "**✗ The run failed:** model unreachable · thread `chat-1`"]


def test_a_clarification_is_its_own_message_without_a_tool_line():
    chat = RecordingChat()
    view = renderer(chat)
    request = {"question": "Which one?", "input_mode": "free_text"}
    view.handle(ev.ToolCall(**RUN, call_id="c", name="ask_clarification", args={"question": "Which one?"}))
    view.handle(ev.Clarification(**RUN, call_id="c", request=request, text="Which one?"))
    view.handle(ev.ToolResult(**RUN, call_id="c", name="ask_clarification", text="Which one?"))
    view.handle(ev.RunFinished(**RUN, status="interrupted"))
    assert chat.bodies() == ["**❓ Which one?**\n\n_Reply with your answer in your next message._",
                             "_⏸ Waiting for your answer · thread `chat-1`_"]
    assert view.clarification == request


def test_artifact_views_inline_only_what_is_safe_and_small():
    def view(name: str, data: bytes | Exception):
        def read() -> bytes:
            if isinstance(data, Exception):
                raise data
            return data
        return artifact_view(f"/mnt/user-data/outputs/{name}", url=f"/a/{name}", read=read)

    assert view("r.md", b"# Title").bundle == {"text/markdown": "# Title"}
    assert view("page.html", b"<script>x</script>").bundle is None
    assert view("logo.svg", b"<svg/>").bundle is None
    big = view("huge.png", b"0" * (MAX_INLINE_IMAGE_BYTES + 1))
    assert big.bundle is None and "too large to show here" in big.caption
    gone = view("gone.png", ToolFailure("not an output file", code="not_found"))
    assert gone.bundle is None and gone.caption == "📎 [gone.png](/a/gone.png) — could not be read: not an output file"


def test_a_tool_call_left_running_is_marked_when_the_run_is_stopped():
    chat = RecordingChat()
    view = renderer(chat, {"a.png": b"\x89PNG"})
    view.handle(ev.ToolCall(**RUN, call_id="t1", name="wait", args={}))
    view.handle(ev.Artifact(**RUN, path="/mnt/user-data/outputs/a.png", name="a.png"))  # closes that segment
    view.handle(ev.ToolCall(**RUN, call_id="t2", name="bash", args={"command": "sleep 100"}))
    view.handle(ev.RunFinished(**RUN, status="cancelled"))
    bodies = chat.bodies()
    assert bodies[0] == "⏹ **wait** — stopped"
    assert bodies[1].startswith("---\n\n📎")
    assert "⏹ **bash** `sleep 100` — stopped" in bodies


def test_artifact_links_point_at_the_authenticated_endpoint_under_the_base_url():
    from deerflow_jupyter.chat.surface import ServerLink

    link = ServerLink(manager=None, user_id="u", base_url="/user/jo")  # type: ignore[arg-type]
    assert link.artifact_url("chat-1", "screenshots/front page.png") == \
        "/user/jo/deerflow/api/threads/chat-1/artifacts/screenshots/front%20page.png"


def test_a_csv_is_a_bounded_table_of_escaped_cells_with_a_link_to_the_whole_file():
    wide = ",".join(f"c{i}" for i in range(MAX_TABLE_COLUMNS + 3))
    rows = "\n".join(",".join(str(r * 100 + c) for c in range(MAX_TABLE_COLUMNS + 3)) for r in range(50))
    table = csv_table(f"{wide}\n{rows}\n".encode(), url="/a/big.csv")
    lines = table.splitlines()
    assert lines[0] == "| " + " | ".join(f"c{i}" for i in range(MAX_TABLE_COLUMNS)) + " |"
    assert len([line for line in lines if line.startswith("| ")]) == 2 + MAX_TABLE_ROWS  # header, rule, rows
    assert lines[-1] == (f"_Showing the first {MAX_TABLE_ROWS} of 50 rows and first {MAX_TABLE_COLUMNS} of "
                         f"{MAX_TABLE_COLUMNS + 3} columns; open [the whole file](/a/big.csv) for the rest._")
    # a cell is data: pipes, markup and newlines cannot break the table or inject links/HTML
    hostile = csv_table(b'name,note\n"a|b","<b>x</b> [x](j:1)\nl2"\n')
    assert hostile.splitlines()[2] == "| a\\|b | \\<b\\>x\\</b\\> \\[x\\](j:1) l2 |"
    assert csv_table(b"") == ""
    tsv = artifact_view("/mnt/user-data/outputs/t.tsv", url="/a/t.tsv", read=lambda: b"x\ty\n1\t2\n")
    assert tsv.bundle == {"text/markdown": "| x | y |\n| --- | --- |\n| 1 | 2 |"}
