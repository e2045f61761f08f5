"""The persona manager's own one-shot route, ``POST /api/ai/message/DeerFlow``, on a real server.

The route builds a persona manager of its own with no parent (no persona-manager extension above
it), so DeerFlow must find its host through the running server: it answers with the run's reply
(the offline model's), and the run is a thread of the server's owner like any chat's.  DeerFlow is
the chat's default persona, as the install sets it.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from deerflow_jupyter.app import PERSONA_ID
from fixtures.jupyter_process import running_jupyter

pytestmark = pytest.mark.integration

RUN_TIMEOUT = 300  # a hang guard: one offline run takes seconds


def test_the_persona_managers_message_route_runs_deerflow(tmp_path: Path):
    env = {"DEERFLOW_HOME": str(tmp_path / "home"), "DEERFLOW_CONFIG": "", "DEERFLOW_SERVER_URL": ""}
    with running_jupyter(tmp_path, env=env, args=["--DeerFlowExtension.export_kernel_env=False"]) as server, \
            httpx.Client(headers=server.headers, timeout=RUN_TIMEOUT) as http:
        answer = http.post(f"{server.url}api/ai/message/DeerFlow", json={"message": "Write me a report"})
        assert answer.status_code == 200, answer.text
        response = answer.json()["response"]
        assert "I'll start by writing down a plan in the workspace." in response  # the offline script ran
        assert "not enabled" not in response and "Traceback" not in response
        threads = http.post(f"{server.api}/threads/search", json={}).json()
        assert [t["thread_id"] for t in threads if t["thread_id"].startswith("chat-")], threads
        page = http.get(f"{server.url}lab").text  # the persona manager's page config for the chat UI
        assert f'"jupyter_ai_default_persona": "{PERSONA_ID}"' in page  # the install's default, honoured
        unknown = http.post(f"{server.url}api/ai/message/Nobody", json={"message": "hi"})
        assert unknown.status_code == 404
    log = server.log.read_text()
    assert "LookupError" not in log and "Traceback" not in log, log[-3000:]
    # (the route's one-shot chat, a uuid, has none: the persona manager builds it without the server's config)
    assert [line for line in log.splitlines() if "No default persona" in line
            and not re.search(r"chat '[0-9a-f-]{36}\.chat'", line)] == []
