"""``/memory`` in a real in-memory chat: answered without a run, the owner's facts."""

from __future__ import annotations

from pathlib import Path

import pytest

from deerflow_jupyter.chat.session import THREAD_KEY
from deerflow_jupyter.host import HarnessHost
from fixtures.chat_harness import OWNER, make_chat, open_rig


@pytest.fixture
def root(tmp_path: Path, deerflow_home: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    return root


async def test_memory_verbs_in_the_chat(tmp_path, root, monkeypatch):
    rig = await open_rig(make_chat(), root=root, host=HarnessHost(config_path=None), monkeypatch=monkeypatch)
    rig.send("/memory add I study white-tailed deer in Minnesota")
    [added] = await rig.until_said("🧠")
    book = (await rig.host.manager()).services.memory.book(OWNER)
    [fact] = book.list()
    assert fact.text == "I study white-tailed deer in Minnesota" and fact.id in added

    rig.send("/memory")
    listed = (await rig.until_said("🧠", count=2))[-1]
    assert "white-tailed deer" in listed

    rig.send("/memory remember everything")
    assert "unknown memory command" in (await rig.until_said("⚠️"))[-1]

    rig.send(f"/memory forget {fact.id}")
    assert "forgot" in (await rig.until_said("🧠", count=3))[-1]
    assert book.list() == []
    assert THREAD_KEY not in rig.chat.get_metadata()  # no run, no thread
    await rig.host.close()


async def test_a_run_that_taught_memory_says_so_in_the_chat_and_undo_forgets_it(tmp_path, root, monkeypatch):
    rig = await open_rig(make_chat(), root=root, host=HarnessHost(config_path=None), monkeypatch=monkeypatch)
    rig.send("I study white-tailed deer in Minnesota. Write me a report")
    [line] = [b for b in await rig.until_said("🧠 memory: +1 fact", timeout=90) if "🧠 memory" in b]
    assert "I study white-tailed deer in Minnesota" in line and "/memory undo " in line
    run_id = line.rsplit("/memory undo ", 1)[1].strip("` \n")
    book = (await rig.host.manager()).services.memory.book(OWNER)
    assert [f.text for f in book.list()] == ["I study white-tailed deer in Minnesota"]

    rig.send(f"/memory undo {run_id}")
    assert "undid the memory change of run" in (await rig.until_said("undid"))[-1]
    assert book.list() == []
    await rig.host.close()
