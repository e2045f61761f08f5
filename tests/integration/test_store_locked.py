"""A store another process has locked: the server keeps answering, runs end cleanly or get a 503.

Another process holds ``deerflow.db``'s write lock (``BEGIN IMMEDIATE`` + a write,
as another DeerFlow process mid-transaction would) until the test lets go; for the
CLI, with nothing else open, it takes the file in SQLite's exclusive locking mode
(``PRAGMA locking_mode=EXCLUSIVE``: in WAL mode that shuts out readers as well).
A running server keeps its store connections open, so no other process can take
that mode while it runs.  Meanwhile a real jupyter server is asked to create
threads and runs.  The
server started by the test inherits ``DEERFLOW_LOOP_GUARD=1`` (tests/conftest.py),
so a store call made on its event loop would fail the request with a 500.

No durations are asserted: the hang guards are generous, and what is checked is
order (Jupyter's ``/api/status`` answered while the lock was still held) and the
answers (success after the lock is gone, or a one-line 503; never a 500).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from fixtures.jupyter_process import JupyterProcess, running_jupyter
from fixtures.processes import start_process, stop_process

pytestmark = pytest.mark.integration

CONFIG = "models:\n  - name: offline\n    use: deerflow.models.scripted:ScriptedChatModel\n    script: quickstart\n"
HANG_GUARD = 120.0  # seconds: only to turn a hang into a failure
LOCKER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], timeout=60, isolation_level=None)
if sys.argv[2] == "exclusive":
    db.execute("PRAGMA locking_mode=EXCLUSIVE")
db.execute("BEGIN EXCLUSIVE" if sys.argv[2] == "exclusive" else "BEGIN IMMEDIATE")
db.execute("CREATE TABLE IF NOT EXISTS locker_probe (x INTEGER)")
db.execute("INSERT INTO locker_probe VALUES (1)")
print("locked", flush=True)
sys.stdin.read()  # held until the test closes our stdin (or dies)
db.execute("ROLLBACK")
db.close()
"""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[JupyterProcess, Path]]:
    home = tmp_path / "home"
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    env = {"DEERFLOW_HOME": str(home), "DEERFLOW_CONFIG": str(config), "DEERFLOW_USER": "alice"}
    with running_jupyter(tmp_path, env=env) as jp:
        yield jp, home / "deerflow.db"


def run_body(prompt: str) -> dict:
    return {"assistant_id": "lead_agent", "input": {"messages": [{"role": "user", "content": prompt}]},
            "config": {"configurable": {"model_name": "offline"}}}


def lock(database: Path, mode: str) -> subprocess.Popen:
    """Start the locker (``mode``: ``writer`` or ``exclusive``); return once it holds the database."""
    proc = start_process([sys.executable, "-c", LOCKER, str(database), mode], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.strip() == "locked", proc.stderr.read()
    return proc


@pytest.mark.parametrize("hold", ["briefly", "until_a_write_is_refused"])
def test_a_locked_store_leaves_the_server_answering_and_requests_end_cleanly(server, hold):
    """``briefly``: the lock goes once the server has answered, the waiting requests then go through
    (or 503); ``until_a_write_is_refused``: it is held until a store write was refused (503, past the
    store call's deadline), while reads go on being answered."""
    jp, database = server
    with httpx.Client(base_url=jp.api, headers=jp.headers, timeout=HANG_GUARD) as http:
        http.post("/threads", json={"thread_id": "before"}).raise_for_status()  # store and runtime are open
        locker = lock(database, "writer")
        answers: dict[str, httpx.Response] = {}
        try:
            def ask(name: str, path: str, body: dict) -> None:
                answers[name] = http.post(path, json=body)

            pending = [threading.Thread(target=ask, args=args, daemon=True) for args in (
                ("run", "/threads/before/runs/wait", run_body("Hello while locked")),
                ("create", "/threads", {"thread_id": "during"}),
                ("search", "/threads/search", {}),
            )]
            for thread in pending:
                thread.start()
            status = httpx.get(f"{jp.url}api/status", headers=jp.headers, timeout=HANG_GUARD)
            still_locked = locker.poll() is None
            if hold == "until_a_write_is_refused":
                read = http.get("/threads/before")  # readers are not shut out by a writer (WAL)
                refused = http.post("/threads", json={"thread_id": "refused"})  # waits past the deadline
        finally:
            locker.stdin.close()  # let go
            stop_process(locker, grace=10)
        for thread in pending:
            thread.join(HANG_GUARD)
        assert not any(t.is_alive() for t in pending), "a request hung"
        assert status.status_code == 200 and still_locked  # the event loop answered during the lock
        if hold == "until_a_write_is_refused":
            assert read.status_code == 200, read.text
            assert refused.status_code == 503, refused.text
            detail = refused.json()["detail"]
            assert "storage unavailable" in detail and "\n" not in detail, detail
            assert http.get("/threads/refused").status_code == 404  # refused whole: nothing half-written
        for name, response in answers.items():
            assert response.status_code in (200, 503), (name, response.status_code, response.text)
            if response.status_code == 503:
                detail = response.json()["detail"]
                assert "\n" not in detail and "Traceback" not in detail
                assert "storage unavailable" in detail and str(database) in detail, detail
        # the lock is gone: everything works again, and what was refused can be retried
        http.post("/threads", json={"thread_id": "after"}).raise_for_status()
        done = http.post("/threads/after/runs/wait", json=run_body("Hello again"))
        assert done.status_code == 200, done.text
        assert "Traceback" not in jp.log.read_text()


def test_the_cli_reports_a_locked_store_in_one_line_with_exit_75(tmp_path: Path):
    """The CLI reads the store synchronously: past SQLite's busy timeout it says which home is
    busy and exits 75 (EX_TEMPFAIL), instead of a bare ``OperationalError``."""
    home = tmp_path / "home"
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    env = {**os.environ, "DEERFLOW_HOME": str(home), "DEERFLOW_CONFIG": str(config), "DEERFLOW_USER": "alice"}
    cli = [sys.executable, "-m", "deerflow.cli", "usage"]  # a synchronous store read (no .aio)
    first = subprocess.run(cli, env=env, capture_output=True, text=True, timeout=HANG_GUARD)
    assert first.returncode == 0, first.stderr  # creates the store
    locker = lock(home / "deerflow.db", "exclusive")
    try:
        busy = subprocess.run(cli, env=env, capture_output=True, text=True, timeout=HANG_GUARD)
    finally:
        locker.stdin.close()
        stop_process(locker, grace=10)
    assert busy.returncode == 75, (busy.returncode, busy.stderr)
    lines = busy.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in busy.stderr, busy.stderr
    assert lines[0].startswith("deerflow: storage unavailable: ") and str(home) in lines[0], lines[0]
    again = subprocess.run(cli, env=env, capture_output=True, text=True, timeout=HANG_GUARD)
    assert again.returncode == 0, again.stderr  # the lock gone, nothing lost
