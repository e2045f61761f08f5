"""Corrupt or unreadable storage is reported, not hidden: a real jupyter server and the CLI.

Each case puts something broken where a store file lives (garbage bytes, a
truncated SQLite file, a directory, an unreadable file) before anything opens it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from tornado.httpclient import HTTPClientError

from deerflow.doctor import repair

pytestmark = pytest.mark.integration

API = ("deerflow", "api")
CONFIG = "models:\n  - name: offline\n    use: deerflow.models.scripted:ScriptedChatModel\n    script: quickstart\n"


def garbage(path: Path) -> None:
    path.write_bytes(bytes(range(256)) * 20)


def truncated(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE filler (x TEXT)")
    db.executemany("INSERT INTO filler VALUES (?)", [("x" * 500,)] * 200)
    db.commit()
    db.close()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])


def directory(path: Path) -> None:
    path.mkdir()
    (path / "keep.txt").write_text("someone's data")


def unreadable(path: Path) -> None:
    if os.geteuid() == 0:  # root reads through any permission bits: a symlink loop cannot be read by anyone
        path.symlink_to(path.name)
    else:
        garbage(path)
        path.chmod(0)


BREAKERS: dict[str, Callable[[Path], None]] = {
    "garbage": garbage, "truncated": truncated, "directory": directory, "unreadable": unreadable}
CASES = [(name, kind) for name in ("deerflow.db", "checkpoints.db") for kind in BREAKERS]


@pytest.fixture(params=CASES, ids=[f"{n}-{k}" for n, k in CASES])
def broken(request, deerflow_home: Path) -> Path:
    name, kind = request.param
    path = deerflow_home / name
    BREAKERS[kind](path)
    return path


@pytest.fixture
def jp_server_config(broken: Path, deerflow_home: Path, tmp_path: Path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text(CONFIG)
    return {
        "ServerApp": {"jpserver_extensions": {"deerflow_jupyter": True}},
        "DeerFlowExtension": {"export_kernel_env": False, "config_path": str(cfg), "home": str(deerflow_home),
                              "owner": "owner", "scheduler_enabled": False},
    }


async def refused(jp_fetch, *parts: str, method: str = "GET", body: str | None = None) -> tuple[int, dict]:
    with pytest.raises(HTTPClientError) as info:
        await jp_fetch(*API, *parts, method=method, body=body)
    response = info.value.response
    assert response is not None and response.headers["Content-Type"].startswith("application/json")
    return info.value.code, json.loads(response.body)


async def test_the_server_loads_and_reports_the_broken_file(jp_fetch, broken: Path):
    code, health = await refused(jp_fetch, "health")
    assert code == 503 and health["status"] == "broken"
    (problem,) = health["problems"]
    assert str(broken) in problem and "deerflow doctor --repair" in problem
    (finding,) = [f for f in health["findings"] if not f["ok"]]
    assert finding["check"] == "storage" and finding["subject"] == str(broken)

    body = json.dumps({"assistant_id": "lead_agent", "if_not_exists": "create",
                       "input": {"messages": [{"role": "user", "content": "hi"}]}})
    for parts, method, payload in [(("threads", "t1", "runs", "wait"), "POST", body),
                                   (("threads",), "POST", "{}"), (("threads", "search"), "POST", "{}")]:
        code, error = await refused(jp_fetch, *parts, method=method, body=payload)
        assert code == 503, (parts, error)
        assert str(broken) in error["detail"] and "\n" not in error["detail"]
        assert "Traceback" not in error["detail"]
    assert broken.exists() or broken.is_symlink()  # nothing was deleted or replaced

    repair(broken)  # what `deerflow doctor --repair` does; the running server recovers without a restart
    health = json.loads((await jp_fetch(*API, "health")).body)
    assert health["status"] == "ok" and health["problems"] == []
    run = json.loads((await jp_fetch(*API, "threads", "t2", "runs", "wait", method="POST", body=body)).body)
    assert run["messages"][-1]["type"] == "ai"


def files(home: Path) -> list[str]:
    """The home's entries, without SQLite's own -wal/-shm files (opening a WAL database may create them)."""
    return sorted(p.name for p in home.iterdir() if not p.name.endswith(("-wal", "-shm")))


def cli(*args: str, home: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in {"OPENAI_API_KEY", "DEERFLOW_CONFIG"}}
    env["DEERFLOW_HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "deerflow.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_cli_prints_one_line_and_doctor_repairs_without_deleting(broken: Path, deerflow_home, tmp_path):
    run = cli("run", "hi", home=deerflow_home, cwd=tmp_path)
    assert run.returncode == 4
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr
    assert run.stderr.startswith(f"deerflow: storage error: {broken}: ")

    before = files(deerflow_home)
    doctor = cli("doctor", home=deerflow_home, cwd=tmp_path)
    assert doctor.returncode == 1 and "Traceback" not in doctor.stderr
    (bad,) = [line for line in doctor.stdout.splitlines() if line.startswith("BROKEN")]
    assert str(broken) in bad and "--repair" in bad
    assert files(deerflow_home) == before  # diagnosis moves or creates no store file

    repaired = cli("doctor", "--repair", "--json", home=deerflow_home, cwd=tmp_path)
    report = json.loads(repaired.stdout)
    assert repaired.returncode == 0 and report["ok"], repaired.stdout
    (moved,) = [m for r in report["repaired"] for m in r["moved"] if m[0] == str(broken)]
    aside = Path(moved[1])
    assert aside.name.startswith(f"{broken.name}.broken-")
    assert aside.exists() or aside.is_symlink()  # the old data is kept, renamed
    if aside.is_dir():
        assert (aside / "keep.txt").read_text() == "someone's data"

    again = cli("run", "Write me a report", home=deerflow_home, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "run finished: success" in again.stdout
