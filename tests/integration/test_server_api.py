"""The server extension's API in a real jupyter_server (pytest-jupyter)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urlencode

import pytest
from tornado.httpclient import HTTPClientError

from fixtures.offline_server import offline_server_config
from fixtures.routes import sample_value

pytestmark = pytest.mark.integration

API = ("deerflow", "api")


@pytest.fixture
def jp_server_config(deerflow_home: Path, tmp_path: Path):
    return offline_server_config(deerflow_home, tmp_path)


def run_body(text: str = "Write me a report", **extra) -> str:
    return json.dumps({"assistant_id": "lead_agent", "input": {"messages": [{"role": "user", "content": text}]},
                       **extra})


async def call(jp_fetch, *parts: str, method: str = "GET", body: str | None = None, **kw):
    response = await jp_fetch(*API, *parts, method=method, body=body, **kw)
    return json.loads(response.body) if response.body else None


async def new_thread(jp_fetch) -> str:
    return (await call(jp_fetch, "threads", method="POST", body="{}"))["thread_id"]


def _route_calls(thread_id: str, run_id: str) -> list[tuple[str, str]]:
    """(path, method) for every route and method the extension serves, from its own table."""
    import re

    from deerflow_jupyter.handlers import ROUTES

    values = {"thread_id": thread_id, "run_id": run_id, "assistant_id": "lead_agent", "relpath": "report.md"}
    calls = []
    for pattern, handler in ROUTES:
        path = re.sub(r"\(\?P<(\w+)>([^)]*)\)",
                      lambda m: values.get(m.group(1)) or sample_value(m.group(2)), pattern)
        for method in ("GET", "POST", "PUT", "DELETE"):
            if method.lower() in handler.__dict__ or any(method.lower() in b.__dict__ for b in handler.__mro__[1:3]):
                calls.append((path, method))
    return calls


async def test_every_route_requires_authentication(jp_fetch):
    thread_id = await new_thread(jp_fetch)
    await call(jp_fetch, "threads", thread_id, "runs", "wait", method="POST", body=run_body())
    run_id = (await call(jp_fetch, "threads", thread_id, "runs"))[0]["run_id"]
    calls = _route_calls(thread_id, run_id)
    assert len(calls) >= 20
    anonymous = {"Authorization": ""}
    for path, method in calls:
        body = "{}" if method in ("POST", "PUT") else None
        with pytest.raises(HTTPClientError) as info:
            await jp_fetch(*API, *path.strip("/").split("/"), method=method, body=body, headers=anonymous)
        assert info.value.code == 403, (method, path)


async def test_wait_run_state_history_and_artifacts(jp_fetch):
    thread_id = await new_thread(jp_fetch)
    values = await call(jp_fetch, "threads", thread_id, "runs", "wait", method="POST", body=run_body())
    assert values["artifacts"] == ["/mnt/user-data/outputs/report.md"]
    assert [m["type"] for m in values["messages"]][:2] == ["human", "ai"]
    state = await call(jp_fetch, "threads", thread_id, "state")
    assert state["values"]["title"] == "Write me a report"
    assert state["checkpoint"]["checkpoint_id"]
    history = await call(jp_fetch, "threads", thread_id, "history", method="POST", body='{"limit": 3}')
    assert len(history) == 3
    assert history[0]["checkpoint"]["checkpoint_id"] == state["checkpoint"]["checkpoint_id"]
    listing = await call(jp_fetch, "threads", thread_id, "artifacts")
    assert listing == [{"path": "/mnt/user-data/outputs/report.md", "name": "report.md",
                        "mime_type": "text/markdown", "size": listing[0]["size"]}]
    report = await jp_fetch(*API, "threads", thread_id, "artifacts", "report.md")
    assert report.body.startswith(b"# Report")
    runs = await call(jp_fetch, "threads", thread_id, "runs")
    assert [r["status"] for r in runs] == ["success"]
    events = await call(jp_fetch, "threads", thread_id, "runs", runs[0]["run_id"], "events")
    assert events[0]["type"] == "run_started" and events[-1]["type"] == "run_finished"


async def test_active_content_is_served_as_an_attachment(jp_fetch, deerflow_home):
    thread_id = await new_thread(jp_fetch)
    outputs = deerflow_home / "users" / "owner" / "threads" / thread_id / "user-data" / "outputs"
    (outputs / "page.html").write_text("<script>alert(1)</script>")
    (outputs / "chart.svg").write_text("<svg xmlns='http://www.w3.org/2000/svg'><script>1</script></svg>")
    (outputs / "plot.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    for name in ("page.html", "chart.svg"):
        res = await jp_fetch(*API, "threads", thread_id, "artifacts", name)
        assert res.headers["Content-Disposition"].startswith("attachment")
        assert res.headers["X-Content-Type-Options"] == "nosniff"
        assert "default-src 'none'" in res.headers["Content-Security-Policy"]
        assert res.headers["Content-Type"] == "application/octet-stream"
    png = await jp_fetch(*API, "threads", thread_id, "artifacts", "plot.png")
    assert png.headers["Content-Type"] == "image/png" and "Content-Disposition" not in png.headers


async def test_a_thread_exports_as_a_zip_of_its_regular_files(jp_fetch, deerflow_home, tmp_path):
    import io
    import os
    import zipfile

    thread_id = await new_thread(jp_fetch)
    outputs = deerflow_home / "users" / "owner" / "threads" / thread_id / "user-data" / "outputs"
    (outputs / "report.md").write_text("# r")
    secret = tmp_path / "secret.txt"
    secret.write_text("host-only")
    (outputs / "link.txt").symlink_to(secret)  # planted from inside the sandbox
    os.mkfifo(outputs / "pipe")  # nobody writes it: an export that opened it would hang
    res = await jp_fetch(*API, "threads", thread_id, "export", params={"folders": "outputs,uploads"},
                         request_timeout=60)
    assert res.headers["Content-Type"] == "application/zip"
    assert res.headers["Content-Disposition"].startswith(f'attachment; filename="{thread_id}.zip"')
    assert res.headers["X-DeerFlow-Skipped"] == "2"
    with zipfile.ZipFile(io.BytesIO(res.body)) as archive:
        assert archive.namelist() == ["outputs/report.md"]
    for params, code in (({"folders": "outputs,../.."}, 422), ({}, 404)):
        with pytest.raises(HTTPClientError) as info:
            await jp_fetch(*API, "threads", thread_id if params else "nope", "export", params=params)
        assert info.value.code == code


async def test_artifact_path_escape_is_refused(jp_fetch, deerflow_home):
    thread_id = await new_thread(jp_fetch)
    for bad in ("..%2F..%2Fsecret.txt", "..%2Fworkspace%2Fplan.md"):
        with pytest.raises(HTTPClientError) as info:
            await jp_fetch(*API, "threads", thread_id, "artifacts", bad)
        assert info.value.code in (404, 422)


async def test_bad_bodies_get_json_errors_and_store_nothing(jp_fetch):
    thread_id = await new_thread(jp_fetch)
    cases = [
        ("not json", 400, "not valid JSON"),
        (json.dumps({"assistant_id": "lead_agent", "input": {"messages": []}}), 422, "non-empty list"),
        (json.dumps({"input": {"messages": [{"role": "user", "content": "x"}]}}), 422, "assistant_id"),
        (run_body(stream_mode="debug"), 422, "unsupported stream_mode"),
        (run_body(config={"configurable": {"interaction_mode": "autonomous"}}), 422, "internal-only"),
        (run_body(context={"non_interactive": True}), 422, "internal-only"),
        (run_body(config={"configurable": {"modle_name": "x"}}), 422,
         "unknown run option 'modle_name'; did you mean 'model_name'?"),
        (run_body("   "), 422, "prompt is empty"),
    ]
    for body, status, needle in cases:
        with pytest.raises(HTTPClientError) as info:
            await jp_fetch(*API, "threads", thread_id, "runs", "wait", method="POST", body=body)
        assert info.value.code == status, body
        assert needle in json.loads(info.value.response.body)["detail"], body
    assert await call(jp_fetch, "threads", thread_id, "runs") == []
    assert (await call(jp_fetch, "threads", thread_id, "state"))["values"] == {}
    with pytest.raises(HTTPClientError) as info:
        await jp_fetch(*API, "threads", "no-such-thread", "runs", "wait", method="POST", body=run_body())
    assert info.value.code == 404


async def test_thread_create_conflict_and_delete(jp_fetch, deerflow_home):
    created = await call(jp_fetch, "threads", method="POST", body='{"thread_id": "mine", "metadata": {"k": 1}}')
    assert created["thread_id"] == "mine" and created["metadata"] == {"k": 1}
    with pytest.raises(HTTPClientError) as info:
        await jp_fetch(*API, "threads", method="POST", body='{"thread_id": "mine"}')
    assert info.value.code == 409
    same = await call(jp_fetch, "threads", method="POST", body='{"thread_id": "mine", "if_exists": "do_nothing"}')
    assert same["thread_id"] == "mine"
    found = await call(jp_fetch, "threads", "search", method="POST", body='{"metadata": {"k": 1}}')
    assert [t["thread_id"] for t in found] == ["mine"]
    await jp_fetch(*API, "threads", "mine", method="DELETE")
    assert not (deerflow_home / "users" / "owner" / "threads" / "mine").exists()
    with pytest.raises(HTTPClientError) as info:
        await jp_fetch(*API, "threads", "mine")
    assert info.value.code == 404


async def test_uploads_multipart_and_raw(jp_fetch):
    thread_id = await new_thread(jp_fetch)
    boundary = "XyZ"
    form = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"data.csv\"\r\n"
            f"Content-Type: text/csv\r\n\r\na,b\n1,2\n\r\n--{boundary}--\r\n")
    saved = await call(jp_fetch, "threads", thread_id, "uploads", method="POST", body=form,
                       headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    assert saved[0]["name"] == "data.csv" and saved[0]["virtual_path"] == "/mnt/user-data/uploads/data.csv"
    await call(jp_fetch, "threads", thread_id, "uploads", method="POST", body="x", params={"name": "n.txt"})
    with pytest.raises(HTTPClientError) as info:
        await jp_fetch(*API, "threads", thread_id, "uploads", method="POST", body="x", params={"name": "../evil"})
    assert info.value.code == 422
    names = [u["name"] for u in await call(jp_fetch, "threads", thread_id, "uploads")]
    assert sorted(names) == ["data.csv", "n.txt"]


async def test_assistants(jp_fetch):
    found = await call(jp_fetch, "assistants", "search", method="POST", body="{}")
    assert [a["assistant_id"] for a in found] == ["lead_agent"]
    assert (await call(jp_fetch, "assistants", "lead_agent"))["graph_id"] == "lead_agent"
    with pytest.raises(HTTPClientError) as info:
        await jp_fetch(*API, "assistants", "other")
    assert info.value.code == 404


async def test_stream_emits_langgraph_sse_events(jp_fetch):
    thread_id = await new_thread(jp_fetch)
    res = await jp_fetch(*API, "threads", thread_id, "runs", "stream", method="POST",
                         body=run_body(stream_mode=["values", "messages-tuple", "updates", "custom"]))
    assert res.headers["Content-Type"].startswith("text/event-stream")
    assert "/runs/" in res.headers["Content-Location"]
    names = [line.split(": ", 1)[1] for line in res.body.decode().splitlines() if line.startswith("event: ")]
    assert names[0] == "metadata" and names[-1] == "end"
    assert {"values", "messages", "updates", "custom"} <= set(names)


async def test_cookie_authenticated_writes_need_xsrf(jp_fetch, jp_serverapp):
    """A browser session (cookie auth) must send the XSRF token on writes; token auth need not."""
    anonymous = {"Authorization": ""}
    login = await jp_fetch("login", headers=anonymous, follow_redirects=False, raise_error=False)
    cookies = _cookies(login.headers.get_list("Set-Cookie"))
    xsrf = cookies["_xsrf"]
    token = jp_serverapp.identity_provider.token
    form = urlencode({"_xsrf": xsrf, "password": token})
    res = await jp_fetch("login", method="POST", body=form, follow_redirects=False, raise_error=False,
                         headers={**anonymous, "Cookie": _cookie_header(cookies)})
    cookies.update(_cookies(res.headers.get_list("Set-Cookie")))
    session = {**anonymous, "Cookie": _cookie_header(cookies)}
    read = await jp_fetch(*API, "assistants", "lead_agent", raise_error=False, headers=session)
    assert read.code == 200  # the session really is authenticated
    refused = await jp_fetch(*API, "threads", method="POST", body="{}", raise_error=False, headers=session)
    assert refused.code == 403  # cookie-authenticated write without the XSRF token
    ok = await jp_fetch(*API, "threads", method="POST", body="{}", raise_error=False,
                        headers={**session, "X-XSRFToken": xsrf})
    assert ok.code == 200, ok.body


def _cookies(headers: list[str]) -> dict[str, str]:
    out = {}
    for header in headers:
        match = re.match(r'([^=]+)=("?)([^";]*)\2', header)
        if match:
            out[match.group(1)] = match.group(3)
    return out


def _cookie_header(cookies: dict[str, str]) -> str:
    return "; ".join(f'{k}="{v}"' if "|" in v else f"{k}={v}" for k, v in cookies.items())


def _sse_ids_and_events(body: bytes) -> list[tuple[int | None, str]]:
    out, current_id = [], None
    for line in body.decode().splitlines():
        if line.startswith("id: "):
            current_id = int(line[4:])
        elif line.startswith("event: "):
            out.append((current_id, line[7:]))
            current_id = None
    return out


async def test_join_stream_resumes_after_last_event_id(jp_fetch):
    thread_id = await new_thread(jp_fetch)
    first = await jp_fetch(*API, "threads", thread_id, "runs", "stream", method="POST",
                           body=run_body(stream_mode=["custom", "updates"]))
    full = _sse_ids_and_events(first.body)
    ids = [i for i, name in full if i is not None and name == "custom"]
    run_id = (await call(jp_fetch, "threads", thread_id, "runs"))[0]["run_id"]
    cut = ids[len(ids) // 2]
    resumed = await jp_fetch(*API, "threads", thread_id, "runs", run_id, "stream",
                             params={"stream_mode": "custom"}, headers={"Last-Event-ID": str(cut)})
    again = _sse_ids_and_events(resumed.body)
    resumed_ids = [i for i, _ in again if i is not None]
    assert resumed_ids == [i for i in ids if i > cut]  # exactly the frames after the cut, in order
    assert again[-1][1] == "end"
