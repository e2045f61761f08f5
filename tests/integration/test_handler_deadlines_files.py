"""A thread's file routes have a deadline: an uploads listing, an upload, an artifact listing or
download, or an export whose file work hangs (a stalled mount, a held lock) is a one-line 503
once the deadline passes, the rest of the server answers meanwhile, and the route works again
once the disk does.

Shaped as ``test_handler_deadlines.py``: a real jupyter_server in this process; the route's
underlying call is replaced by one that waits on a ``threading.Event`` (then does the real
work), with a short deadline.  On the old code (``asyncio.to_thread``, no deadline) the hung
request never answers and the hang guard fails the test.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from deerflow.persistence.offloop import OFF_LOOP
from deerflow.runs import thread_files
from deerflow.sandbox.files.virtual_paths import VirtualFS
from fixtures.hung_disk import (
    GUARD_S,
    SHORT_S,
    answer,
    fetch,
    hung_disk,
    stall,
    until_nothing_is_stuck,
)
from fixtures.offline_server import offline_server_config

pytestmark = pytest.mark.integration


@pytest.fixture
def jp_server_config(deerflow_home: Path, tmp_path: Path):
    return offline_server_config(deerflow_home, tmp_path)


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """The "disk": calls replaced with :func:`stall` wait until this is set (always, at the end)."""
    yield from hung_disk(monkeypatch, (thread_files, "EXPORT_DEADLINE_SECONDS"))


async def thread_with_a_report(jp_fetch, deerflow_home: Path) -> str:
    _, thread = await answer(jp_fetch, "threads", method="POST", body="{}")
    thread_id = thread["thread_id"]
    outputs = deerflow_home / "users" / "owner" / "threads" / thread_id / "user-data" / "outputs"
    (outputs / "report.md").write_text("# Report\n")
    return thread_id


ROUTES = [
    # (owner, name of the call that hangs, route after threads/{id}/, request, what the 503 says)
    (thread_files, "list_uploads", ("uploads",), {}, "listing the uploads"),
    (thread_files, "save_upload", ("uploads",), {"method": "POST", "body": b"a,b\n", "params": {"name": "t.csv"}},
     "saving the upload 't.csv'"),
    (thread_files, "_sizes", ("artifacts",), {}, "listing the artifacts"),
    (VirtualFS, "open_output", ("artifacts", "report.md"), {}, "opening the artifact"),
    (os, "pread", ("artifacts", "report.md"), {}, "reading the artifact"),
    (thread_files, "write_export", ("export",), {}, "exporting the thread"),
    (tempfile.SpooledTemporaryFile, "read", ("export",), {}, "sending the export"),
]


@pytest.mark.parametrize(("owner", "name", "parts", "request_kw", "what"), ROUTES,
                         ids=[f"{r[1]} {r[3].get('method', 'GET')} {'/'.join(r[2])}" for r in ROUTES])
async def test_a_hung_file_route_is_a_503_while_the_server_answers_and_works_again_after(
        jp_fetch, deerflow_home, disk, monkeypatch, owner, name, parts, request_kw, what):
    thread_id = await thread_with_a_report(jp_fetch, deerflow_home)
    stall(monkeypatch, owner, name, disk)
    hung = asyncio.create_task(answer(jp_fetch, "threads", thread_id, *parts, **request_kw))
    health_code, health = await answer(jp_fetch, "health")  # served while the route hangs
    code, body = await hung
    assert code == 503, body
    assert body["detail"].startswith(f"{what} did not finish within {SHORT_S:g} s")
    assert "try again shortly" in body["detail"] and "\n" not in body["detail"]
    assert health_code == 200, health

    disk.set()  # the disk answers again: so does the route
    await until_nothing_is_stuck()
    monkeypatch.setattr(OFF_LOOP, "deadline", GUARD_S)
    monkeypatch.setattr(thread_files, "EXPORT_DEADLINE_SECONDS", GUARD_S)
    code, content = await fetch(jp_fetch, "threads", thread_id, *parts, **request_kw)
    assert code in (200, 201), content
    if parts == ("artifacts", "report.md"):
        assert content == b"# Report\n"
