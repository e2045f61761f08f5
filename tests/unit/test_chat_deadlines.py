"""The chat's file reads have a deadline: an attachment whose read hangs (a stalled mount under the
Jupyter root, a held lock) stops the message with the chat's one-line reply and runs nothing; a
presented file whose read hangs is captioned "could not be read" and the run is shown to its end.

A real in-memory chat (``fixtures.chat_harness``).  The hung call waits on a ``threading.Event``
set at the end; the chat's and the thread files' ``off_loop`` get a short deadline (nothing else
does).  On the old code (``asyncio.to_thread``, no deadline) the reply never comes and the hang
guard fails the test.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from jupyterlab_chat.models import FileAttachment

from deerflow.persistence.offloop import OFF_LOOP
from deerflow.runs import thread_files
from deerflow.runs.thread_files import ThreadFiles
from deerflow_jupyter.chat import session as chat_session
from deerflow_jupyter.chat.session import THREAD_KEY
from deerflow_jupyter.host import HarnessHost
from fixtures.chat_harness import OWNER, ChatRig, make_chat, open_rig, scripted_config
from fixtures.hung_disk import GUARD_S, SHORT_S, stall

TWO_TURNS = "      turns:\n        - \"First answer.\"\n        - \"Second answer.\"\n"


@pytest.fixture
def root(tmp_path: Path, deerflow_home: Path) -> Path:
    root = tmp_path / "root"
    (root / "data").mkdir(parents=True)
    (root / "data" / "sales.csv").write_text("month,revenue\njan,1\n")
    return root


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """The "disk": calls replaced with :func:`stall` wait until this is set (always, at the end)."""
    for module in (chat_session, thread_files):
        real = module.off_loop

        async def hurried(fn: Callable[..., Any], *args: Any, what: str, deadline: float | None = None,
                          _real: Callable[..., Any] = real, **kwargs: Any) -> Any:
            return await _real(fn, *args, what=what, deadline=SHORT_S, **kwargs)

        monkeypatch.setattr(module, "off_loop", hurried)
    answers = threading.Event()
    yield answers
    answers.set()


async def rig_for(script: str | None, tmp_path: Path, root: Path, monkeypatch) -> ChatRig:
    config = scripted_config(tmp_path, script) if script else None
    host = HarnessHost(config_path=str(config) if config else None)
    return await open_rig(make_chat(), root=root, host=host, monkeypatch=monkeypatch)


@pytest.mark.parametrize(("owner", "name", "what"), [
    (chat_session, "_open_attachment", "opening the attachment data/sales.csv"),
    (thread_files, "save_upload", "saving the upload 'sales.csv'"),
], ids=["open", "save"])
async def test_an_attachment_whose_read_hangs_gets_the_one_line_reply_and_nothing_runs(
        tmp_path, root, disk, monkeypatch, owner, name, what):
    stall(monkeypatch, owner, name, disk)
    rig = await rig_for(TWO_TURNS, tmp_path, root, monkeypatch)
    attachment = rig.chat.set_attachment(FileAttachment(value="data/sales.csv", mimetype="text/csv"))
    rig.send("What is in this file?", attachments=[attachment])
    reply = (await rig.until_said("did not finish within", timeout=GUARD_S))[-1]
    assert reply.startswith(f"⚠️ {what} did not finish within {SHORT_S:g} s")
    assert "try again shortly" in reply and "nothing was sent" in reply and "\n" not in reply
    await rig.idle()
    manager = await rig.host.manager()
    assert await manager.store.aio.list_runs(rig.chat.get_metadata()[THREAD_KEY], OWNER) == []
    disk.set()
    await rig.host.close()


async def test_a_presented_file_whose_read_hangs_is_captioned_and_the_run_is_shown_to_its_end(
        tmp_path, root, disk, monkeypatch):
    stall(monkeypatch, ThreadFiles, "read_artifact_blocking", disk)
    rig = await rig_for(None, tmp_path, root, monkeypatch)  # the quickstart script presents report.md
    rig.send("Write me a report")
    await rig.until_said("Run finished", timeout=GUARD_S)
    caption = next(b for b in rig.bodies() if "[report.md](" in b and "could not be read" in b)
    assert f"could not be read: reading the artifact did not finish within {SHORT_S:g} s" in caption
    assert not any(m.mime_model for m in rig.replies())  # nothing shown inline, nothing lost after it
    assert any(b.startswith("Done.") for b in rig.bodies())
    disk.set()
    async with asyncio.timeout(GUARD_S):  # the abandoned read ends; nothing is left stuck
        while OFF_LOOP.stuck():
            await asyncio.sleep(0.02)
    await rig.host.close()
