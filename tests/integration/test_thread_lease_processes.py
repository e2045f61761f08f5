"""One run per thread across processes: a Jupyter server and the CLI on one DEERFLOW_HOME.

The model waits for a gate file, so the run that got the thread certainly still
holds it when the other process tries.  On even attempts the server tries at a
random moment of the CLI's start-up (a real race); on odd ones it tries once the
CLI holds the thread.  The issue's 50 attempts run the CLI's ``main()`` in one
long-lived process; a few more start a fresh CLI process each.  No durations are asserted: only
who was accepted, what the refused side was told, and that the thread's history
holds every accepted turn.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from deerflow.persistence.store import INTERRUPTED
from fixtures.gated_model import numbered_script
from fixtures.jupyter_process import JupyterProcess, running_jupyter

pytestmark = pytest.mark.integration

# The check: 50 attempts. They run against the CLI's own ``main()`` in one long-lived second
# process (tests/fixtures/cli_driver.py: no seconds of imports per attempt); a few more start a fresh
# ``python -m deerflow.cli`` each, so the race with a CLI that is still starting up is covered too.
ATTEMPTS = int(os.environ.get("DEERFLOW_LEASE_RACE_ATTEMPTS", "50"))
FRESH_ATTEMPTS = int(os.environ.get("DEERFLOW_LEASE_RACE_FRESH_ATTEMPTS", "4"))
LEASE_SECONDS = 3.0
BUSY = "already has an active run"


class Setup:
    def __init__(self, work: Path) -> None:
        self.work = work
        self.home = work / "home"
        self.gate = work / "gate"
        self.reached = work / "reached"
        self.config = work / "config.yaml"
        script = numbered_script(work / "turns.yaml", 200)
        self.config.write_text(yaml.safe_dump({
            "models": [{"name": "gated", "use": "fixtures.gated_model:GatedScriptedModel", "script": str(script),
                        "gate": str(self.gate), "reached": str(self.reached), "max_wait": 90}],
            "storage": {"run_lease_seconds": LEASE_SECONDS},
        }))
        self.env = {"DEERFLOW_HOME": str(self.home), "DEERFLOW_CONFIG": str(self.config), "DEERFLOW_USER": "alice",
                    "OPENAI_API_KEY": ""}

    def _env(self) -> dict[str, str]:
        return {**os.environ, **self.env,
                "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH", "")])}

    def cli(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "deerflow.cli", *args], cwd=self.work, env=self._env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)

    def driver(self) -> subprocess.Popen:
        """The long-lived process that runs the CLI's ``main()`` once per line (fixtures/cli_driver.py)."""
        return subprocess.Popen([sys.executable, "-m", "fixtures.cli_driver"], cwd=self.work, env=self._env(),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True)

    def lease(self, thread_id: str) -> tuple[str, float] | None:
        """The thread's lease row as (holder, expires_at), if any."""
        with sqlite3.connect(self.home / "deerflow.db") as db:
            row = db.execute("SELECT holder, expires_at FROM thread_leases WHERE thread_id=?",
                             (thread_id,)).fetchone()
        return (row[0], row[1]) if row else None

    def wait_until_held_by(self, proc: subprocess.Popen, thread_id: str, *, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while (lease := self.lease(thread_id)) is None or not lease[0].endswith(f":{proc.pid}"):
            if proc.poll() is not None or time.monotonic() > deadline:
                return  # the attempt's assertions say what went wrong
            time.sleep(0.05)


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> Iterator[tuple[Setup, JupyterProcess, httpx.Client]]:
    s = Setup(tmp_path_factory.mktemp("lease"))
    with running_jupyter(s.work, env=s.env) as server, httpx.Client(
            base_url=server.api, headers=server.headers, timeout=60) as http:
        yield s, server, http


class DriverCall:
    """One ``deerflow run`` inside the long-lived driver, shaped like the ``Popen`` of a fresh CLI."""

    def __init__(self, driver: subprocess.Popen, replies: queue.Queue, args: tuple[str, ...]) -> None:
        self.pid = driver.pid  # the lease holder is this process (host:pid)
        self.returncode: int | None = None
        self._replies = replies
        self._reply: dict | None = None
        assert driver.stdin is not None
        driver.stdin.write(json.dumps(list(args)) + "\n")
        driver.stdin.flush()

    def _take(self, reply: dict | None) -> None:
        assert reply is not None, "the CLI driver died"
        self._reply, self.returncode = reply, reply["code"]

    def poll(self) -> int | None:
        if self._reply is None:
            with contextlib.suppress(queue.Empty):
                self._take(self._replies.get_nowait())
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        if self._reply is None:
            try:
                self._take(self._replies.get(timeout=timeout))
            except queue.Empty:
                raise subprocess.TimeoutExpired("cli_driver", timeout or 0) from None
        assert self._reply is not None
        return self._reply["out"], self._reply["err"]


@pytest.fixture(scope="module")
def driver(setup) -> Iterator[Callable[..., DriverCall]]:
    s, _, _ = setup
    proc = s.driver()
    replies: queue.Queue = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            replies.put(json.loads(line))
        replies.put(None)

    threading.Thread(target=read, daemon=True).start()
    try:
        yield lambda *args: DriverCall(proc, replies, args)
    finally:
        kill(proc)


def kill(proc: subprocess.Popen | DriverCall) -> None:
    if isinstance(proc, DriverCall):  # the driver itself is killed by its fixture
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.communicate(timeout=120)
        return
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()


def run_body(prompt: str) -> dict:
    return {"assistant_id": "lead_agent", "input": {"messages": [{"role": "user", "content": prompt}]},
            "config": {"configurable": {"model_name": "gated"}}}


def race(s: Setup, http: httpx.Client, thread: str, attempts: int, start_cli: Callable[..., Any],
         startup: float) -> list[str]:
    """``attempts`` times, the CLI and the server start a run on ``thread`` at once; returns who won each.

    On even attempts the server tries at a random moment within ``startup`` seconds of the CLI's
    start (a real race); on odd ones once the CLI holds the thread.
    """
    http.post("/threads", json={"thread_id": thread}).raise_for_status()
    rng, accepted, sides = random.Random(17), [], []
    deadline = time.monotonic() + 25 * 60  # hang guard for the whole race
    for n in range(attempts):
        assert time.monotonic() < deadline, f"gave up after {n} attempts"
        s.gate.unlink(missing_ok=True)
        cli = start_cli("run", f"cli turn {n}", "--thread", thread, "--model", "gated", "--json")
        try:
            if n % 2:
                s.wait_until_held_by(cli, thread)
            else:
                time.sleep(rng.uniform(0, startup))
            response = http.post(f"/threads/{thread}/runs", json=run_body(f"server turn {n}"))
            assert response.status_code in (200, 409), response.text
            if response.status_code == 200:  # the server has the thread: the CLI must be refused
                try:
                    _, err = cli.communicate(timeout=90)
                except subprocess.TimeoutExpired:
                    pytest.fail(f"attempt {n}: the CLI's run was accepted beside the server's")
                assert cli.returncode == 75 and BUSY in err and len(err.strip().splitlines()) == 1, err
                s.gate.touch()
                joined = http.get(f"/threads/{thread}/runs/{response.json()['run_id']}/join")
                assert joined.status_code == 200 and "__error__" not in joined.json(), joined.text
                accepted.append(f"server turn {n}")
                sides.append("server")
            else:  # the CLI has the thread: it finishes once the model may answer
                assert BUSY in response.json()["detail"]
                s.gate.touch()
                out, err = cli.communicate(timeout=90)
                assert cli.returncode == 0, f"attempt {n}: neither side ran: {err}"
                assert '"status":"success"' in out.splitlines()[-1].replace(" ", "")
                accepted.append(f"cli turn {n}")
                sides.append("cli")
        finally:
            kill(cli)
    state = http.get(f"/threads/{thread}/state").json()
    messages = state["values"]["messages"]
    assert [m["content"] for m in messages if m["type"] == "human"] == accepted
    assert [m["content"] for m in messages if m["type"] == "ai"] == [f"answer {n}" for n in range(attempts)]
    runs = http.get(f"/threads/{thread}/runs").json()
    assert len(runs) == attempts and {r["status"] for r in runs} == {"success"}
    print(f"{thread}: {sides.count('server')} server runs, {sides.count('cli')} CLI runs accepted")
    return sides


def test_cli_and_server_racing_on_one_thread_get_one_run_per_attempt_and_lose_no_turn(setup, driver):
    s, _, http = setup
    sides = race(s, http, "shared", ATTEMPTS, driver, startup=0.6)
    assert {"server", "cli"} <= set(sides)


def test_a_cli_process_still_starting_up_races_the_server_the_same_way(setup):
    s, _, http = setup
    race(s, http, "shared-fresh", FRESH_ATTEMPTS, s.cli, startup=4.0)


def test_a_killed_cli_run_frees_the_thread_once_its_lease_expires(setup):
    s, _, http = setup
    http.post("/threads", json={"thread_id": "orphan"}).raise_for_status()
    s.gate.unlink(missing_ok=True)
    s.reached.unlink(missing_ok=True)
    cli = s.cli("run", "never finished", "--thread", "orphan", "--model", "gated", "--json")
    try:
        deadline = time.monotonic() + 120
        while not s.reached.exists():  # the CLI's run is inside its model call, holding the thread
            assert cli.poll() is None, cli.communicate()
            assert time.monotonic() < deadline, "the CLI's run never reached its model call"
            time.sleep(0.1)
    finally:
        kill(cli)
    refused = http.post("/threads/orphan/runs", json=run_body("too early"))
    assert refused.status_code == 409 and BUSY in refused.json()["detail"]  # the dead holder's lease still runs
    lease = s.lease("orphan")
    assert lease is not None
    time.sleep(max(0.0, lease[1] - time.time()) + 0.2)  # let the lease lapse: nobody renews it any more
    s.gate.touch()
    done = http.post("/threads/orphan/runs/wait", json=run_body("after the crash"))
    assert done.status_code == 200 and "__error__" not in done.json(), done.text
    runs = {r["metadata"].get("error"): r for r in http.get("/threads/orphan/runs").json()}
    assert set(runs) == {INTERRUPTED, None}
    assert runs[INTERRUPTED]["status"] == "error" and runs[None]["status"] == "success"
