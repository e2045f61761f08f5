"""``deerflow doctor`` on a PostgreSQL ``storage.url``: reachable or not, and the schema's versions, in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from deerflow.persistence import pgsql
from deerflow.persistence.store import MetadataStore
from deerflow.scheduling.store import ScheduleStore
from fixtures.jupyter_process import running_jupyter
from fixtures.processes import running_process

pytestmark = pytest.mark.integration

DEADLINE = 120  # hang guard, not a timing assertion


def doctor(tmp_path: Path, url: str) -> tuple[int, list[str]]:
    """Run ``deerflow doctor`` as a user would; its exit status and its ``database`` lines."""
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"storage": {"url": url, "connect_timeout": 2}, "memory": {"enabled": False}}))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with running_process([sys.executable, "-m", "deerflow.cli", "--config", str(config),
                          "--home", str(tmp_path / "home"), "doctor"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env) as proc:
        out, err = proc.communicate(timeout=DEADLINE)
    assert "Traceback" not in err, err
    return proc.returncode, [line for line in out.splitlines() if " database: " in line]


def test_doctor_reports_a_reachable_database_and_its_schema_versions(postgres_url: str, tmp_path: Path) -> None:
    status, (line,) = doctor(tmp_path, postgres_url)
    assert status == 0, line
    assert line.startswith("ok ") and "reachable (PostgreSQL " in line and "not set up yet" in line
    MetadataStore(postgres_url).list_threads("u")
    ScheduleStore(postgres_url).list_schedules("u")
    pgsql.database(postgres_url).close()
    status, (line,) = doctor(tmp_path, postgres_url)
    assert status == 0 and "schema: metadata v1, schedules v1" in line


def test_doctor_says_an_unreachable_database_is_broken_without_its_password(tmp_path: Path) -> None:
    status, (line,) = doctor(tmp_path, f"postgresql://ann:hunter2@/db?host={tmp_path}&port=1")
    assert status == 1
    assert line.startswith(f"BROKEN database: PostgreSQL at {tmp_path}:1/db (storage.url): not reachable within 2s "
                           "(No such file or directory)")  # which database, and libpq's reason: no socket there
    assert "check storage.url" in line and "hunter2" not in line


def test_doctor_flags_a_schema_newer_than_this_deerflow(postgres_url: str, tmp_path: Path) -> None:
    import psycopg

    MetadataStore(postgres_url).list_threads("u")
    pgsql.database(postgres_url).close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("UPDATE deerflow_schema SET version = 5 WHERE part = 'metadata'")
    status, (line,) = doctor(tmp_path, postgres_url)
    assert status == 1 and "metadata v5 (this DeerFlow knows v1)" in line and "upgrade DeerFlow" in line


def test_the_health_route_reports_the_database_as_the_doctor_does(postgres_url: str, tmp_path: Path) -> None:
    """``GET /deerflow/api/health`` on a server whose storage is PostgreSQL: one ``database`` finding,
    reachable, with its schema; the URL (and its password) never in the answer."""
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"storage": {"url": postgres_url}, "memory": {"enabled": False}}))
    env = {"DEERFLOW_HOME": str(tmp_path / "home"), "DEERFLOW_CONFIG": str(config)}
    with running_jupyter(tmp_path, env=env) as jp, httpx.Client(headers=jp.headers, timeout=DEADLINE) as http:
        http.post(f"{jp.api}/threads", json={"thread_id": "t1"}).raise_for_status()  # the schema is set up
        answer = http.get(f"{jp.api}/health")
    assert answer.status_code == 200, answer.text
    (database,) = [f for f in answer.json()["findings"] if f["check"] == "database"]
    assert database["ok"] and database["detail"].startswith("reachable (PostgreSQL "), database
    assert "metadata v1" in answer.text and postgres_url not in answer.text
