"""Hostile requests to every DeerFlow route of a real jupyter server: always a one-line 4xx, never a 500.

The routes come from the extension's own table (``deerflow_jupyter.handlers.ROUTES``),
so a route added later is covered without touching this file.  Two users
(``fixtures.jupyter_identity.TwoUsers``): alice owns a thread with a finished
run; bob tries her ids.  Requests go out through ``http.client`` so that
``../`` and ``%2e%2e`` reach the server as sent, not normalised by a client.
"""

from __future__ import annotations

import http.client
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

import pytest
from tornado.web import RequestHandler

from deerflow_jupyter.handlers import ROUTES
from fixtures.jupyter_process import JupyterProcess, running_jupyter
from fixtures.routes import sample_value

pytestmark = pytest.mark.integration

ALICE, BOB = "alice-token", "bob-token"
BAD_IDS = {  # as they appear in the URL
    "dotdot": "..", "dotdot-slash": "../", "encoded-dotdot": "%2e%2e", "encoded-escape": "..%2F..%2Fetc",
    "empty": "", "10kb": "a" * 10_240, "nul": "%00", "crlf": "%0D%0A", "percent": "%25s", "non-ascii": "%E6%8A%A5",
}
BAD_NAMES = ["a\r\nb.txt", "a\nSet-Cookie: x=1", 'q"u\'ote.txt', "报告.txt", "n" * 1000, "../x", "", "a/b", "%s%n"]
DEEP_JSON = b"[" * 100_000 + b"]" * 100_000
DEEP_OBJECT = b'{"a":' * 100_000 + b"1" + b"}" * 100_000
NON_UTF8 = [b'{"thread_id": "\xff\xfe"}', b"\xff\xfe{\x00}\x00", b"\x80\x81\x82"]
WRITE_METHODS = ("post", "put", "patch")
VALID_RUN = json.dumps({"assistant_id": "lead_agent", "input": {"messages": [{"role": "user", "content": "hi"}]}})


@dataclass
class Answer:
    status: int
    body: bytes
    headers: http.client.HTTPMessage


@dataclass
class World:
    server: JupyterProcess
    home: Path
    thread: str  # alice's, with one finished run
    run: str
    bob_thread: str

    def send(self, method: str, path: str, *, token: str = ALICE, body: bytes | None = None,
             content_type: str = "application/json") -> Answer:
        """One raw request to ``{base}deerflow/api{path}``; ``path`` goes out byte for byte."""
        url = urlsplit(self.server.url)
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=120)
        try:
            headers = {"Authorization": f"token {token}", "Content-Type": content_type}
            if body is None and method in ("POST", "PUT", "PATCH"):
                body = b"{}"
            conn.request(method, f"/deerflow/api{path}", body=body, headers=headers)
            res = conn.getresponse()
            return Answer(res.status, res.read(), res.headers)
        finally:
            conn.close()

    def json(self, method: str, path: str, payload: object = None, *, token: str = ALICE) -> object:
        answer = self.send(method, path, token=token, body=None if payload is None else json.dumps(payload).encode())
        assert answer.status < 300, (method, path, answer.status, answer.body[:300])
        return json.loads(answer.body) if answer.body else None


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[World]:
    work = tmp_path_factory.mktemp("malformed")
    home = work / "deerflow-home"
    config = work / "config.yaml"
    config.write_text("models:\n  - name: offline\n    use: deerflow.models.scripted:ScriptedChatModel\n"
                      "    script: quickstart\n")
    args = ["--ServerApp.jpserver_extensions={'deerflow_jupyter': True}",
            "--ServerApp.identity_provider_class=fixtures.jupyter_identity.TwoUsers",
            f"--DeerFlowExtension.config_path={config}", f"--DeerFlowExtension.home={home}",
            "--DeerFlowExtension.single_user=False", "--DeerFlowExtension.export_kernel_env=False",
            "--DeerFlowExtension.scheduler_enabled=False"]
    env = {"DEERFLOW_HOME": str(home), "HOME": str(work)}
    with running_jupyter(work, args=args, env=env, token=ALICE, timeout=120) as server:
        probe = World(server, home, "", "", "")
        thread = probe.json("POST", "/threads", {})["thread_id"]
        run_body = {"assistant_id": "lead_agent", "input": {"messages": [{"role": "user", "content": "Write a report"}]}}
        probe.json("POST", f"/threads/{thread}/runs/wait", run_body)
        run = probe.json("GET", f"/threads/{thread}/runs")[0]["run_id"]
        bob_thread = probe.json("POST", "/threads", {}, token=BOB)["thread_id"]
        yield World(server, home, thread, run, bob_thread)


def route_calls() -> list[tuple[str, list[str], str]]:
    """(pattern, its group names, method) for every route and method the extension serves."""
    calls = []
    for pattern, handler in ROUTES:
        groups = re.findall(r"\(\?P<(\w+)>", pattern)
        for method in ("get", "post", "put", "patch", "delete"):
            if getattr(handler, method) is not getattr(RequestHandler, method):
                calls.append((pattern, groups, method.upper()))
    return calls


def fill(pattern: str, values: dict[str, str]) -> str:
    """The route's path with each group replaced by ``values`` (or a value its own pattern accepts)."""
    def one(match: re.Match[str]) -> str:
        name, sub = match.group(1), match.group(2)
        return values[name] if name in values else sample_value(sub)

    return re.sub(r"\(\?P<(\w+)>((?:[^()]|\[[^\]]*\])*)\)", one, pattern)


def problems_with(answer: Answer, what: str) -> list[str]:
    """What is wrong with an answer to a malformed request (empty if it is a clean 4xx)."""
    found = []
    if answer.status >= 500:
        found.append(f"{what}: {answer.status} {answer.body[:200]!r}")
    if b"Traceback" in answer.body or b'File "' in answer.body:
        found.append(f"{what}: traceback in the body")
    reply = json.loads(answer.body) if answer.headers.get("Content-Type", "").startswith("application/json") else {}
    if answer.status >= 400 and isinstance(reply, dict) and "detail" in reply:  # (a 409 on cancel is a run)
        detail = reply["detail"]
        if not isinstance(detail, str) or "\n" in detail or len(detail) > 400:
            found.append(f"{what}: the reason is not one short line: {detail!r:.200}")
    return found


def error_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if line.startswith("[E ") or "Traceback" in line]


def test_every_route_answers_malformed_requests_with_a_clean_4xx(world: World):
    log_start = world.server.log.stat().st_size
    valid = {"thread_id": world.thread, "run_id": world.run, "relpath": "report.md"}
    calls = route_calls()
    assert len(calls) >= 30
    problems: list[str] = []
    sent = 0
    for pattern, groups, method in calls:
        for group in groups:  # every id parameter, every bad value
            for label, bad in BAD_IDS.items():
                path = fill(pattern, {**valid, group: bad})
                problems += problems_with(world.send(method, path), f"{method} {pattern} {group}={label}")
                sent += 1
        if "thread_id" in groups:  # another user's thread (and run): exactly a 404
            body = VALID_RUN.encode() if method.lower() in WRITE_METHODS else None  # valid: the id is what is wrong
            answer = world.send(method, fill(pattern, valid), token=BOB, body=body)
            sent += 1
            problems += problems_with(answer, f"{method} {pattern} as bob")
            if answer.status != 404:
                problems.append(f"{method} {pattern}: alice's thread as bob gave {answer.status}, not 404")
        if "run_id" in groups:
            body = VALID_RUN.encode() if method.lower() in WRITE_METHODS else None
            answer = world.send(method, fill(pattern, {**valid, "thread_id": world.bob_thread}), token=BOB, body=body)
            sent += 1
            if answer.status != 404:
                problems.append(f"{method} {pattern}: alice's run in bob's thread gave {answer.status}, not 404")
        if method.lower() in WRITE_METHODS:
            path = fill(pattern, valid)
            bodies = [DEEP_JSON, DEEP_OBJECT, *NON_UTF8]
            bodies += [json.dumps({"thread_id": unquote(b), "name": unquote(b)}).encode() for b in BAD_IDS.values()]
            bodies += [json.dumps({"thread_id": n, "name": n, "metadata": {"file": n}}).encode() for n in BAD_NAMES]
            for index, body in enumerate(bodies):
                problems += problems_with(world.send(method, path, body=body), f"{method} {pattern} body#{index}")
                sent += 1
    for name in BAD_NAMES:  # odd file names where a route takes one
        encoded = quote(name, safe="")
        for method, path, body in [("POST", f"/threads/{world.thread}/uploads?name={encoded}", b"x"),
                                   ("GET", f"/threads/{world.thread}/artifacts/{encoded}", None)]:
            problems += problems_with(world.send(method, path, body=body, content_type="application/octet-stream"),
                                      f"{method} file name {name[:20]!r}")
            sent += 1
    assert sent > 500
    assert problems == [], "\n".join(problems)
    assert error_lines(world.server.log.read_text(errors="replace")[log_start:]) == []


def test_a_foreign_thread_id_answers_like_a_missing_or_held_one(world: World):
    """Reads: another user's thread is word for word an unknown one.  Create: word for word a held one."""
    for path in ("/threads/{id}", "/threads/{id}/state", "/threads/{id}/runs", "/threads/{id}/artifacts"):
        foreign = world.send("GET", path.format(id=world.thread), token=BOB)
        missing = world.send("GET", path.format(id="never-was"), token=BOB)
        assert (foreign.status, missing.status) == (404, 404)
        assert foreign.body.replace(world.thread.encode(), b"ID") == missing.body.replace(b"never-was", b"ID")

    taken_by_alice = world.send("POST", "/threads", token=BOB, body=json.dumps({"thread_id": world.thread}).encode())
    held_by_bob = world.send("POST", "/threads", token=BOB, body=json.dumps({"thread_id": world.bob_thread}).encode())
    assert (taken_by_alice.status, held_by_bob.status) == (409, 409)
    assert (taken_by_alice.body.replace(world.thread.encode(), b"ID")
            == held_by_bob.body.replace(world.bob_thread.encode(), b"ID"))
    assert json.loads(taken_by_alice.body)["detail"].endswith("send no thread_id to get a new one")
    again = world.send("POST", "/threads", token=BOB,
                       body=json.dumps({"thread_id": world.thread, "if_exists": "do_nothing"}).encode())
    assert again.status == 409  # do_nothing returns only your own thread

    run = {"assistant_id": "lead_agent", "if_not_exists": "create",
           "input": {"messages": [{"role": "user", "content": "squat"}]}}
    squat = world.send("POST", f"/threads/{world.thread}/runs/wait", token=BOB, body=json.dumps(run).encode())
    plain = {**run, "if_not_exists": None}
    missing = world.send("POST", "/threads/never-was/runs/wait", token=BOB, body=json.dumps(plain).encode())
    assert (squat.status, missing.status) == (404, 404)
    assert squat.body.replace(world.thread.encode(), b"ID") == missing.body.replace(b"never-was", b"ID")

    bobs = [t["thread_id"] for t in world.json("POST", "/threads/search", {}, token=BOB)]
    assert world.thread not in bobs
    runs = world.json("GET", f"/threads/{world.thread}/runs")
    assert [r["run_id"] for r in runs] == [world.run]  # alice's thread untouched
    assert not (world.home / "users" / "bob" / "threads" / world.thread).exists()


@pytest.mark.parametrize("name", ["报告.html", "line\r\nbreak.html", 'say "hi"; x=1.html', "tab\there.bin"])
def test_artifacts_with_odd_names_download_with_rfc6266_names(world: World, name: str):
    outputs = world.home / "users" / "alice" / "threads" / world.thread / "user-data" / "outputs"
    (outputs / name).write_bytes(b"<p>content of " + name.encode() + b"</p>")
    answer = world.send("GET", f"/threads/{world.thread}/artifacts/{quote(name, safe='')}")
    assert answer.status == 200, answer.body
    assert answer.body == b"<p>content of " + name.encode() + b"</p>"
    disposition = answer.headers["Content-Disposition"]
    assert disposition.startswith("attachment; filename=\"")
    assert all(ch.isprintable() and ch.isascii() for ch in disposition)
    fallback = re.fullmatch(r'attachment; filename="([^"\\]*)"; filename\*=UTF-8\'\'(\S+)', disposition)
    assert fallback, disposition
    assert unquote(fallback.group(2), errors="strict") == name
    assert answer.headers["Content-Type"] == "application/octet-stream"


def _open_download(world: World, name: str) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    url = urlsplit(world.server.url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=120)
    conn.request("GET", f"/deerflow/api/threads/{world.thread}/artifacts/{quote(name, safe='')}",
                 headers={"Authorization": f"token {ALICE}"})
    return conn, conn.getresponse()


def test_an_artifact_larger_than_the_read_bound_downloads_whole(world: World):
    # sparse: past ARTIFACT_MAX_BYTES (64 MiB) without the disk; the route streams it from its descriptor
    from deerflow.runs.thread_files import ARTIFACT_MAX_BYTES

    outputs = world.home / "users" / "alice" / "threads" / world.thread / "user-data" / "outputs"
    size = ARTIFACT_MAX_BYTES + 3 * 1024 * 1024 + 7
    with open(outputs / "huge.csv", "wb") as huge:
        huge.seek(size - 4)
        huge.write(b"end\n")
    conn, res = _open_download(world, "huge.csv")
    try:
        assert res.status == 200 and res.headers["Content-Length"] == str(size)
        received, tail = 0, b""
        while chunk := res.read(1 << 20):
            received += len(chunk)
            tail = (tail + chunk)[-4:]
    finally:
        conn.close()
    assert (received, tail) == (size, b"end\n")


def test_an_artifact_cut_while_downloaded_ends_short_not_complete(world: World):
    outputs = world.home / "users" / "alice" / "threads" / world.thread / "user-data" / "outputs"
    (outputs / "shrinking.bin").write_bytes(b"x" * (256 << 20))  # far more than the socket buffers hold
    conn, res = _open_download(world, "shrinking.bin")
    try:
        assert res.status == 200 and res.headers["Content-Length"] == str(256 << 20)
        assert res.read(1 << 20) == b"x" * (1 << 20)
        os.truncate(outputs / "shrinking.bin", 10)  # the agent's code cuts it meanwhile
        with pytest.raises(http.client.IncompleteRead):
            res.read()
    finally:
        conn.close()
        (outputs / "shrinking.bin").unlink()
    assert world.send("GET", f"/threads/{world.thread}/artifacts").status == 200  # the server goes on
    log = world.server.log.read_text()
    assert "shrank while it was sent" in log and "Traceback" not in log
