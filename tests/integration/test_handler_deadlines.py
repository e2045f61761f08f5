"""Every file-backed route has a deadline: a call that hangs (a stalled mount, a held lock) is a
one-line 503 once the deadline passes, the rest of the server answers meanwhile, and the route
works again once the disk does.

A real jupyter_server in this process; the route's underlying library call is replaced by one
that waits on a ``threading.Event`` (then does the real work), with a short deadline.  On the old
code (``asyncio.to_thread``, no deadline) the hung request never answers and the hang guard fails
the test.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from deerflow.custom_agents import AgentStore
from deerflow.persistence.offloop import OFF_LOOP
from deerflow.skills.library import SkillLibrary
from deerflow_jupyter.handlers import mcp as mcp_handlers
from deerflow_jupyter.handlers import quickstart as quickstart_handlers
from deerflow_jupyter.handlers import skills as skills_handlers
from fixtures.hung_disk import GUARD_S, SHORT_S, answer, hung_disk, stall, until_nothing_is_stuck
from fixtures.offline_server import offline_server_config

pytestmark = pytest.mark.integration


@pytest.fixture
def jp_server_config(deerflow_home: Path, tmp_path: Path):
    return offline_server_config(deerflow_home, tmp_path)


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """The "disk": calls replaced with :func:`stall` wait until this is set (always, at the end)."""
    yield from hung_disk(monkeypatch, (skills_handlers, "INSTALL_DEADLINE_SECONDS"))


async def test_a_hung_skills_listing_is_a_503_while_the_server_answers_others(jp_fetch, disk, monkeypatch):
    stall(monkeypatch, SkillLibrary, "listing", disk)
    hung = asyncio.create_task(answer(jp_fetch, "skills"))
    health_code, health = await answer(jp_fetch, "health")  # served while the listing hangs
    threads_code, _ = await answer(jp_fetch, "threads", "search", method="POST", body="{}")
    code, body = await hung
    assert code == 503, body
    assert body["detail"].startswith(f"listing the skills did not finish within {SHORT_S:g} s")
    assert "try again shortly" in body["detail"] and "\n" not in body["detail"]
    assert (health_code, threads_code) == (200, 200), health

    disk.set()  # the disk answers again: so does the route
    await until_nothing_is_stuck()
    monkeypatch.setattr(OFF_LOOP, "deadline", GUARD_S)
    code, body = await answer(jp_fetch, "skills")
    assert code == 200 and "deep-research" in {s["name"] for s in body["skills"]}


ROUTES = [
    # (owner, method name, route parts, request, what the 503 says)
    (SkillLibrary, "listing", ("skills", "deep-research"), {}, "reading the skill deep-research"),
    (SkillLibrary, "set_enabled", ("skills", "deep-research"), {"method": "PUT", "body": '{"enabled": false}'},
     "changing the skill deep-research"),
    (SkillLibrary, "install", ("skills", "install"), {"method": "POST", "body": b"PK\x05\x06" + bytes(18),
                                                     "params": {"name": "tidy.skill"}}, "installing the skill"),
    (AgentStore, "list_agents", ("agents",), {}, "listing the agents"),
    (AgentStore, "get", ("agents", "helper"), {}, "reading the agent helper"),
    (AgentStore, "update", ("agents", "helper"), {"method": "PATCH", "body": '{"description": "x"}'},
     "changing the agent helper"),
    (AgentStore, "delete", ("agents", "helper"), {"method": "DELETE"}, "deleting the agent helper"),
    (mcp_handlers, "masked_config", ("mcp", "config"), {}, "reading the MCP config"),
    (mcp_handlers, "update_config", ("mcp", "config"), {"method": "PUT", "body": '{"mcpServers": {}}'},
     "changing the MCP config"),
    (quickstart_handlers, "copy_quickstart", ("quickstart",),
     {"method": "POST", "body": "", "headers": {"Accept": "application/json"}}, "copying the quickstart"),
]


@pytest.mark.parametrize(("owner", "name", "parts", "request_kw", "what"), ROUTES,
                         ids=[f"{r[3].get('method', 'GET')} {'/'.join(r[2])}" for r in ROUTES])
async def test_every_file_backed_route_has_a_deadline(jp_fetch, disk, monkeypatch, owner, name, parts,
                                                      request_kw, what):
    stall(monkeypatch, owner, name, disk)
    code, body = await answer(jp_fetch, *parts, **request_kw)
    assert code == 503, body
    assert body["detail"].startswith(f"{what} did not finish within") and "\n" not in body["detail"]
