"""DeerFlow's persona in a real in-memory chat (YChat + router + persona manager) on the scripted model."""

from __future__ import annotations

import asyncio
import base64
import json
import re
from pathlib import Path

import pytest
from jupyterlab_chat.models import FileAttachment

from deerflow_jupyter.chat.session import (
    BUSY_REPLY,
    CHAT_COMMANDS,
    THREAD_KEY,
    WELCOME,
    derived_thread_id,
)
from deerflow_jupyter.host import HarnessHost
from fixtures.chat_harness import OWNER, ChatRig, make_chat, open_rig, scripted_config

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")

CLARIFY = """
      turns:
        - text: "I need a few details first."
          tool_calls:
            - name: ask_clarification
              id: ask_1
              args:
                question: "How should I analyse the sales data?"
                context: "There are two CSV files and no stated period."
                fields:
                  - {name: dataset, label: Dataset, type: text, required: true, placeholder: sales.csv}
                  - {name: metrics, label: Metrics, type: multi_select, options: [revenue, margin, cost], required: true}
                  - {name: start, label: Start date, type: date, required: true}
                  - {name: notes, label: Notes, type: textarea}
        - "Analysis finished with the chosen settings."
"""

SLOW = """
      turns:
        - text: "This will take a while."
          tool_calls:
            - name: wait
              args: {seconds: 60}
        - "never reached"
"""
TWO_TURNS = "      turns:\n        - \"First answer.\"\n        - \"Second answer.\"\n"
SLOW_TOOLS = "tools:\n  - {name: wait, group: test, use: 'fixtures.slow_tools:wait'}\n"


@pytest.fixture
def root(tmp_path: Path, deerflow_home: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    return root


async def rig_for(script: str | None, tmp_path: Path, root: Path, monkeypatch, *, extra: str = "",
                  chat=None) -> ChatRig:
    config = scripted_config(tmp_path, script, extra=extra) if script else None
    host = HarnessHost(config_path=str(config) if config else None)
    return await open_rig(chat or make_chat(), root=root, host=host, monkeypatch=monkeypatch)


async def thread_messages(rig: ChatRig) -> list:
    manager = await rig.host.manager()
    thread_id = rig.chat.get_metadata()[THREAD_KEY]
    return (await manager.thread_values(thread_id, OWNER))["messages"]


async def test_a_run_streams_into_few_messages_with_tool_lines_artifact_and_summary(tmp_path, root, monkeypatch):
    rig = await rig_for(None, tmp_path, root, monkeypatch)  # the default offline model: quickstart script
    rig.send("Write me a report")
    await rig.until_said("Run finished")
    bodies = rig.bodies()
    # the streamed paragraphs and the tool calls before the artifact share one message
    first = bodies[0]
    assert "I'll start by writing down a plan in the workspace." in first
    assert "Let me read the plan back to check it." in first
    assert "✓ **write_file** `/mnt/user-data/workspace/plan.md`" in first
    assert "✓ **read_file**" in first
    assert len([b for b in bodies if "I'll start by writing" in b]) == 1
    # the presented report: a caption with the authenticated download link, then rendered markdown
    thread_id = rig.chat.get_metadata()[THREAD_KEY]
    url = f"/lab-base/deerflow/api/threads/{thread_id}/artifacts/report.md"
    assert any(f"[report.md]({url})" in b for b in bodies)
    rich = [m for m in rig.replies() if m.mime_model]
    assert len(rich) == 1 and rich[0].mime_model["data"]["text/markdown"].startswith("# Report")
    # the text after the artifact comes below it, then the summary
    later = bodies.index(next(b for b in bodies if b.startswith("Done.")))
    assert later > rig.replies().index(rich[0])
    summary = bodies[-1]
    assert "**Files changed:** 2 created" in summary
    assert f"[`/mnt/user-data/outputs/report.md`]({url})" in summary
    assert "`/mnt/user-data/workspace/plan.md`" in summary
    assert f"_✓ Run finished · thread `{thread_id}`_" in summary
    # the thread is the chat's own and belongs to the server's owner
    manager = await rig.host.manager()
    assert thread_id == derived_thread_id(rig.chat.get_id())
    assert (await manager.athread(thread_id, OWNER)).metadata.get("chat_path") == "test.chat"
    await rig.host.close()


async def test_an_image_artifact_is_an_inline_png(tmp_path, root, monkeypatch):
    script = """
      turns:
        - tool_calls:
            - name: present_files
              args: {filepaths: [/mnt/user-data/outputs/dot.png]}
        - "Here is the chart."
"""
    rig = await rig_for(script, tmp_path, root, monkeypatch)
    manager = await rig.host.manager()
    thread = await manager.acreate_thread(OWNER, thread_id=derived_thread_id(rig.chat.get_id()))
    paths = manager.home.thread(OWNER, thread.thread_id).ensure()
    (paths.outputs / "dot.png").write_bytes(PNG)
    rig.send("Plot it")
    await rig.until_said("Run finished")
    images = [m for m in rig.replies() if m.mime_model and "image/png" in m.mime_model["data"]]
    assert len(images) == 1
    assert base64.b64decode(images[0].mime_model["data"]["image/png"]) == PNG
    assert any("📎 **[dot.png](/lab-base/deerflow/api/threads/" in b for b in rig.bodies())
    await rig.host.close()


async def test_an_artifact_is_read_off_the_event_loop(tmp_path, root, monkeypatch):
    """A presented file is read (and its view built) on a worker thread: a slow or large output
    never stalls the server's loop, which every user's chat and runs share."""
    from deerflow.runs.thread_files import ThreadFiles

    read_on: list[bool] = []
    original = ThreadFiles.read_artifact_blocking

    def spy(self, *args, **kwargs):
        try:
            asyncio.get_running_loop()
            read_on.append(True)
        except RuntimeError:
            read_on.append(False)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(ThreadFiles, "read_artifact_blocking", spy)
    rig = await rig_for(None, tmp_path, root, monkeypatch)  # the quickstart script presents report.md
    rig.send("Write me a report")
    await rig.until_said("Run finished")
    assert read_on == [False]  # read once, and not on a thread running an event loop
    assert any(m.mime_model and m.mime_model["data"]["text/markdown"].startswith("# Report") for m in rig.replies())
    await rig.host.close()


async def test_clarification_round_trip_with_a_follow_up_for_missing_fields(tmp_path, root, monkeypatch):
    rig = await rig_for(CLARIFY, tmp_path, root, monkeypatch)
    rig.send("Analyse the sales data")
    await rig.until_said("Waiting for your answer")
    question = next(b for b in rig.bodies() if "❓" in b)
    assert "**❓ How should I analyse the sales data?**" in question
    assert "> There are two CSV files and no stated period." in question
    assert "2. **Metrics** *(required)* — any of: revenue / margin / cost" in question
    assert "Start date: …" in question

    rig.send("Dataset: sales.csv")
    follow_up = (await rig.until_said("I still need"))[-1]
    assert "**Metrics**" in follow_up and "**Start date**" in follow_up and "**Dataset** *(" not in follow_up
    await rig.idle()
    manager = await rig.host.manager()
    thread_id = rig.chat.get_metadata()[THREAD_KEY]
    assert len(await manager.store.aio.list_runs(thread_id, OWNER)) == 1  # the incomplete answer started nothing

    rig.send("metrics: revenue, margin\nstart date: 2024-01-31")
    await rig.until_said("Run finished")
    assert any("Analysis finished with the chosen settings." in b for b in rig.bodies())
    humans = [m.content for m in await thread_messages(rig) if m.type == "human"]
    assert humans[-1] == "Dataset: sales.csv\nMetrics: revenue, margin\nStart date: 2024-01-31"
    await rig.host.close()


async def test_the_stop_button_cancels_the_run_and_a_second_message_is_refused(tmp_path, root, monkeypatch):
    rig = await rig_for(SLOW, tmp_path, root, monkeypatch, extra=SLOW_TOOLS)
    rig.send("Do the slow thing")
    await rig.until_said("⏳ **wait**")
    rig.send("And another thing")
    await rig.until_said(BUSY_REPLY)
    assert rig.persona.processing  # what the persona manager's cancel handler checks
    await rig.persona.cancel_response()
    summary = (await rig.until_said("Stopped"))[-1]
    assert "**⏹ Stopped.** The run was cancelled" in summary
    assert any("⏹ **wait** — stopped" in b for b in rig.bodies())  # the tool line no longer says running
    manager = await rig.host.manager()
    runs = await manager.store.aio.list_runs(rig.chat.get_metadata()[THREAD_KEY], OWNER)
    assert [r.status for r in runs] == ["cancelled"]  # the refused message never ran
    await rig.idle()
    await rig.host.close()


async def test_slash_commands_reach_the_harness_unchanged(tmp_path, root, monkeypatch):
    rig = await rig_for(TWO_TURNS, tmp_path, root, monkeypatch)
    rig.send("@DeerFlow /deep-research Write a report about /tmp")
    await rig.until_said("Run finished")
    humans = [m.content for m in await thread_messages(rig) if m.type == "human"]
    assert humans == ["/deep-research Write a report about /tmp"]
    # the harness decides what a slash command means, and its refusal is shown as it is
    rig.send("/no-such-skill please")
    refusal = (await rig.until_said("/no-such-skill is not an enabled skill"))[-1]
    assert refusal.startswith("⚠️ ") and "Traceback" not in refusal
    await rig.host.close()


async def test_attachments_become_thread_uploads_the_agent_is_told_about(tmp_path, root, monkeypatch):
    script = """
      turns:
        - text: "Reading it."
          expect: "/mnt/user-data/uploads/sales.csv"
          tool_calls:
            - name: read_file
              args: {path: /mnt/user-data/uploads/sales.csv}
        - "It has two rows."
"""
    (root / "data").mkdir()
    (root / "data" / "sales.csv").write_text("month,revenue\njan,1\nfeb,2\n")
    rig = await rig_for(script, tmp_path, root, monkeypatch)
    attachment = rig.chat.set_attachment(FileAttachment(value="data/sales.csv", mimetype="text/csv"))
    rig.send("What is in this file?", attachments=[attachment])
    await rig.until_said("Run finished")
    bodies = rig.bodies()
    assert "📎 `sales.csv` added to the thread's uploads" in bodies[0]
    assert "It has two rows." in "\n".join(bodies)
    manager = await rig.host.manager()
    uploads = manager.home.thread(OWNER, rig.chat.get_metadata()[THREAD_KEY]).uploads
    assert (uploads / "sales.csv").read_text() == "month,revenue\njan,1\nfeb,2\n"
    await rig.host.close()


async def test_an_attachment_outside_the_root_is_refused_and_nothing_runs(tmp_path, root, monkeypatch):
    (tmp_path / "secret.txt").write_text("nope")
    rig = await rig_for(TWO_TURNS, tmp_path, root, monkeypatch)
    attachment = rig.chat.set_attachment(FileAttachment(value="../secret.txt"))
    rig.send("Read this", attachments=[attachment])
    reply = (await rig.until_said("not a file under the Jupyter root"))[-1]
    assert "nothing was sent" in reply
    await rig.idle()
    manager = await rig.host.manager()
    assert await manager.store.aio.list_runs(rig.chat.get_metadata()[THREAD_KEY], OWNER) == []
    await rig.host.close()


@pytest.mark.parametrize("plant", ["symlink", "fifo"])
async def test_an_attachment_that_is_a_link_or_a_fifo_is_refused_and_nothing_is_read(tmp_path, root, monkeypatch,
                                                                                     plant):
    """Thread folders may lie under the Jupyter root, so a name there is sandbox-controlled: a link
    planted to a host file is not followed, and a FIFO is refused before anything blocks on it."""
    import os

    (tmp_path / "secret.txt").write_text("host secret")
    if plant == "symlink":
        (root / "report.csv").symlink_to(tmp_path / "secret.txt")
    else:
        os.mkfifo(root / "report.csv")
    rig = await rig_for(TWO_TURNS, tmp_path, root, monkeypatch)
    attachment = rig.chat.set_attachment(FileAttachment(value="report.csv", mimetype="text/csv"))
    rig.send("Read this", attachments=[attachment])
    reply = (await rig.until_said("not a file under the Jupyter root"))[-1]
    assert "nothing was sent" in reply
    await rig.idle()
    manager = await rig.host.manager()
    thread_id = rig.chat.get_metadata()[THREAD_KEY]
    assert await manager.store.aio.list_runs(thread_id, OWNER) == []
    assert not (manager.home.thread(OWNER, thread_id).uploads / "report.csv").exists()
    await rig.host.close()


def test_an_attachment_swapped_for_a_link_while_it_is_opened_never_yields_the_link_target(tmp_path, root):
    """Sandboxed code racing a file/link swap under the root: every open either refuses or reads
    the plain file, never the host file the link names (no check-then-use)."""
    import os
    import threading

    from deerflow_jupyter.chat.session import _open_attachment

    (tmp_path / "secret.txt").write_text("host secret")
    target = root / "report.csv"
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            (root / "staged.csv").write_text("a,b\n")
            os.replace(root / "staged.csv", target)
            os.symlink(tmp_path / "secret.txt", root / "staged-link.csv")
            os.replace(root / "staged-link.csv", target)

    swapper = threading.Thread(target=swap)
    swapper.start()
    read: list[bytes] = []
    try:
        for _ in range(3000):
            opened = _open_attachment(root, "report.csv")
            if opened is not None:
                with opened:
                    read.append(opened.read())
    finally:
        stop.set()
        swapper.join(timeout=30)
    assert b"host secret" not in read
    assert read  # the plain file was read at least once: the race ran


async def test_the_chat_keeps_its_thread_across_a_server_restart(tmp_path, root, monkeypatch):
    rig = await rig_for(TWO_TURNS, tmp_path, root, monkeypatch)
    rig.send("Hello")
    await rig.until_said("Run finished")
    thread_id = rig.chat.get_metadata()[THREAD_KEY]
    saved = rig.chat.get()
    await rig.host.close()

    restarted = await rig_for(TWO_TURNS, tmp_path, root, monkeypatch, chat=make_chat(content=saved))
    restarted.send("Now add a chart")
    await restarted.until_said("Run finished", count=2)
    assert any("Second answer." in b for b in restarted.bodies())
    assert restarted.chat.get_metadata()[THREAD_KEY] == thread_id
    manager = await restarted.host.manager()
    assert [t.thread_id for t in await manager.store.aio.list_threads(OWNER)] == [thread_id]
    assert len(await manager.store.aio.list_runs(thread_id, OWNER)) == 2
    await restarted.host.close()


async def test_a_chat_whose_thread_is_gone_continues_in_a_new_one_and_says_so(tmp_path, root, monkeypatch):
    chat = make_chat(content=json.dumps({"metadata": {"id": "c1", THREAD_KEY: "deleted-thread"}}))
    rig = await rig_for(TWO_TURNS, tmp_path, root, monkeypatch, chat=chat)
    rig.send("hello")
    await rig.until_said("Run finished")
    assert rig.chat.get_metadata()[THREAD_KEY] == "chat-c1"
    assert "(`deleted-thread`) no longer exists; continuing in thread `chat-c1`" in rig.bodies()[0]
    await rig.host.close()


async def test_at_deerflow_reaches_it_when_no_persona_is_picked(tmp_path, root, monkeypatch):
    rig = await rig_for(TWO_TURNS, tmp_path, root, monkeypatch)
    rig.send("@DeerFlow hi", to_persona=None, mentions=[rig.persona.id])
    await rig.until_said("Run finished")
    assert any("First answer." in b for b in rig.bodies())
    rig.send("nobody is addressed here", to_persona=None)
    rig.send("@DeerFlow again", to_persona=None)  # typed as text: the chat input offers no bots to mention
    await rig.until_said("Run finished", count=2)
    humans = [m.content for m in await thread_messages(rig) if m.type == "human"]
    assert humans == ["hi", "again"]
    await rig.host.close()


async def test_only_a_leading_at_deerflow_is_removed_from_the_prompt():
    from jupyterlab_chat.models import Message

    from deerflow_jupyter.chat.persona import incoming

    chat = make_chat()

    def body(text: str) -> str:
        return incoming(Message(body=text, id="m", time=0.0, sender="jo"), chat).text
    assert body("@DeerFlow: @DeerFlow /deep-research x") == "/deep-research x"
    assert body("ask @DeerFlow about @DeerFlowers") == "ask @DeerFlow about @DeerFlowers"


async def test_a_message_naming_another_chat_lets_the_agent_read_that_conversation(tmp_path, root, monkeypatch):
    import asyncio

    (root / "research").mkdir()
    first_chat, second_chat = make_chat("research/first.chat"), make_chat("second.chat")
    await asyncio.sleep(0)  # the documents create their ids
    first_thread = derived_thread_id(first_chat.get_id())
    script = f"""
      turns: ["unused"]
      conversations:
        - match: "Where do deer go"
          turns: ["Deer move to sheltered conifer stands in deep snow."]
        - match: "Summarise what we found"
          turns:
            - tool_calls:
                - name: read_conversation
                  args: {{thread_id: {first_thread}}}
            - "Summary written."
            - tool_calls:
                - name: read_conversation
                  args: {{thread_id: {first_thread}}}
            - "I cannot read it without a reference."
"""
    first = await rig_for(script, tmp_path, root, monkeypatch, chat=first_chat)
    first.send("Where do deer go in deep snow?")
    await first.until_said("Run finished")
    second = await open_rig(second_chat, root=root, host=first.host, monkeypatch=monkeypatch)
    second.send("Summarise what we found in first.chat")
    await second.until_said("Run finished")
    manager = await first.host.manager()
    thread = await manager.thread_values(derived_thread_id(second_chat.get_id()), OWNER)
    read = [m for m in thread["messages"] if m.type == "tool" and m.name == "read_conversation"]
    assert len(read) == 1 and "sheltered conifer stands" in read[0].content
    # without a reference in the message, the next run is not offered the tool
    second.send("And read it again")
    await second.until_said("Run finished", count=2)
    thread = await manager.thread_values(derived_thread_id(second_chat.get_id()), OWNER)
    refused = [m for m in thread["messages"] if m.type == "tool" and m.name == "read_conversation"][-1]
    assert refused.status == "error" and "conifer" not in refused.content
    await first.host.close()


async def test_an_unknown_thread_reference_is_refused_with_a_reply(tmp_path, root, monkeypatch):
    rig = await rig_for(TWO_TURNS, tmp_path, root, monkeypatch)
    rig.send("Compare with thread:no-such-thread please")
    await rig.until_said("no-such-thread")
    assert not any("First answer." in b for b in rig.bodies())  # nothing ran
    await rig.host.close()


def test_references_are_thread_ids_and_chat_names_not_urls_or_emails():
    from deerflow_jupyter.chat.references import CHAT_REF, THREAD_REF

    text = ("see thread:abc-1, notes/a.chat and b.chat; not https://x.org/c.chat, ann@d.chat, "
            "e.chatty or xthread:zzz")
    assert THREAD_REF.findall(text) == ["abc-1"]
    assert CHAT_REF.findall(text) == ["notes/a.chat", "b.chat"]


async def test_a_new_chat_is_welcomed_once_with_the_commands_a_reopened_one_is_not(tmp_path, root, monkeypatch):
    rig = await rig_for(TWO_TURNS, tmp_path, root, monkeypatch)
    welcome = [m.body for m in rig.all_replies()]
    assert welcome == [WELCOME]
    assert all(name in WELCOME for name, _ in CHAT_COMMANDS)
    rig.send("Hello")
    await rig.until_said("Run finished")
    saved = rig.chat.get()
    await rig.host.close()
    reopened = await rig_for(TWO_TURNS, tmp_path, root, monkeypatch, chat=make_chat(content=saved))
    assert [m.body for m in reopened.all_replies()].count(WELCOME) == 1  # the saved one, no second welcome
    reopened.send("/help")
    await reopened.until(lambda: [m.body for m in reopened.all_replies()].count(WELCOME) == 2)
    manager = await reopened.host.manager()
    assert len(await manager.store.aio.list_runs(reopened.chat.get_metadata()[THREAD_KEY], OWNER)) == 1  # /help ran nothing
    await reopened.host.close()


async def test_slash_commands_are_advertised_for_completion_with_the_enabled_skills(tmp_path, root, monkeypatch):
    rig = await rig_for(TWO_TURNS, tmp_path, root, monkeypatch)
    manager = await rig.host.manager()
    skills = [s for s in await asyncio.to_thread(manager.services.skills.skills, OWNER) if s.enabled]
    expected = [name for name, _ in CHAT_COMMANDS] + [f"/{s.name}" for s in skills]
    await rig.until(lambda: [c.name for c in rig.persona.get_slash_commands()] == expected)
    described = {c.name: c.description for c in rig.persona.get_slash_commands()}
    assert all(described[f"/{s.name}"] == s.description for s in skills)
    assert described["/new"] and described["/memory"]
    await rig.host.close()


async def test_new_starts_a_fresh_thread_for_the_chat_and_keeps_the_old_one(tmp_path, root, monkeypatch):
    rig = await rig_for(TWO_TURNS, tmp_path, root, monkeypatch)
    rig.send("Hello")
    await rig.until_said("Run finished")
    first = rig.chat.get_metadata()[THREAD_KEY]
    rig.send("/new")
    said = (await rig.until_said("New thread"))[-1]
    second = rig.chat.get_metadata()[THREAD_KEY]
    assert second != first and f"`{second}`" in said and f"`{first}`, is kept" in said
    assert re.fullmatch(rf"{re.escape(first)}-[0-9a-f]{{12}}", second)  # 12 characters, as ids are shown
    await rig.idle()
    rig.send("/new Start over please")  # a new thread, and the rest of the message is its first prompt
    await rig.until_said("Run finished", count=2)
    third = rig.chat.get_metadata()[THREAD_KEY]
    assert third not in (first, second)
    manager = await rig.host.manager()
    assert {t.thread_id for t in await manager.store.aio.list_threads(OWNER)} == {first, second, third}
    humans = [m.content for m in (await manager.thread_values(third, OWNER))["messages"] if m.type == "human"]
    assert humans == ["Start over please"]
    assert await manager.store.aio.list_runs(second, OWNER) == []
    await rig.host.close()
