"""The live browser view over the server extension's REST API: owner only, JPEG and MJPEG."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from tornado.httpclient import HTTPClientError

from fixtures.web_browser import PAGES, need_chromium
from fixtures.web_server import serve

pytestmark = pytest.mark.integration

API = ("deerflow", "api")
ALICE = {"Authorization": "token alice-token"}
BOB = {"Authorization": "token bob-token"}


@pytest.fixture
def site():
    with serve(dict(PAGES)) as web:
        yield web


@pytest.fixture
def jp_server_config(deerflow_home: Path, tmp_path: Path, site):
    need_chromium()
    (tmp_path / "browse.yaml").write_text(yaml.safe_dump({"turns": [
        {"tool_calls": [{"name": "browser_navigate", "args": {"url": site.url("/about")}}]},
        "The about page is open.",
    ]}))
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump({
        "models": [{"name": "browse", "use": "deerflow.models.scripted:ScriptedChatModel", "script": "browse.yaml"}],
        "browser": {"enabled": True, "allow_private_addresses": True},
    }))
    return {
        "ServerApp": {"jpserver_extensions": {"deerflow_jupyter": True},
                      "identity_provider_class": "fixtures.jupyter_identity.TwoUsers"},
        "DeerFlowExtension": {"export_kernel_env": False, "config_path": str(cfg), "home": str(deerflow_home), "single_user": False},
    }


async def new_thread(jp_fetch, who: dict[str, str]) -> str:
    return json.loads((await jp_fetch(*API, "threads", method="POST", body="{}", headers=who)).body)["thread_id"]


async def test_the_owner_watches_the_page_and_nobody_else_can(jp_fetch) -> None:
    thread = await new_thread(jp_fetch, ALICE)
    body = json.dumps({"assistant_id": "lead_agent", "input": {"messages": [{"role": "user", "content": "go"}]}})
    await jp_fetch(*API, "threads", thread, "runs", "wait", method="POST", body=body, headers=ALICE)

    frame = await jp_fetch(*API, "threads", thread, "browser", "frame", headers=ALICE)
    assert frame.headers["Content-Type"] == "image/jpeg" and frame.body.startswith(b"\xff\xd8\xff")

    live = await jp_fetch(*API, "threads", thread, "browser", "live", headers=ALICE,
                          params={"max_frames": "1", "interval": "0.2"})
    assert live.headers["Content-Type"].startswith("multipart/x-mixed-replace; boundary=deerflow-frame")
    assert live.body.startswith(b"--deerflow-frame\r\nContent-Type: image/jpeg\r\n")
    assert b"\r\n\r\n\xff\xd8\xff" in live.body

    for path in ("frame", "live"):
        with pytest.raises(HTTPClientError) as info:
            await jp_fetch(*API, "threads", thread, "browser", path, headers=BOB)
        assert info.value.code == 404

    empty = await new_thread(jp_fetch, ALICE)
    with pytest.raises(HTTPClientError) as info:
        await jp_fetch(*API, "threads", empty, "browser", "frame", headers=ALICE)
    assert info.value.code == 404
    assert "no open browser session" in json.loads(info.value.response.body)["detail"]
