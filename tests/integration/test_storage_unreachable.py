"""A ``storage.url`` whose PostgreSQL cannot be reached: one line, everywhere a user looks.

Nothing listens on the port (a loopback port just freed), so every connection is refused.
What a user would notice: over HTTP a 503 whose detail names the database by host, port and
name, says what failed (no connection within the wait, and libpq's reason) and what to check;
in the CLI that same line alone on stderr and exit status 75 ("try again"); never psycopg's
``PoolTimeout: couldn't get a connection after 10.00 sec``, never the URL or its password.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import pytest
import yaml
from tornado.httpclient import HTTPClientError

from deerflow.config.storage import StorageConfig
from deerflow.persistence import pgsql
from deerflow.persistence.checkpointer import open_checkpointer
from deerflow.persistence.postgres import DatabaseUnavailable
from fixtures.jupyter_process import free_port
from fixtures.processes import running_process

pytestmark = pytest.mark.integration

API = ("deerflow", "api")
DEADLINE = 120  # hang guard, not a timing assertion
PASSWORD = "hunter2-secret"


@pytest.fixture
def unreachable() -> Iterator[str]:
    """A PostgreSQL URL (with a password) on a loopback port nothing listens on."""
    url = f"postgresql://labuser9:{PASSWORD}@127.0.0.1:{free_port()}/lab"
    yield url
    pgsql.database(url).close()  # this process's pool for it, if a store opened one


def assert_one_clear_line(text: str, url: str) -> None:
    """The database by host and port, the failure and libpq's reason, what to do; nothing of psycopg's."""
    port = url.rsplit(":", 1)[1].split("/")[0]
    assert "\n" not in text.strip(), text
    assert f"PostgreSQL at 127.0.0.1:{port}/lab (storage.url)" in text, text
    assert "no connection within" in text and "(Connection refused)" in text, text
    assert "check that the database server is running" in text and "try again shortly" in text, text
    assert PASSWORD not in text and "labuser9" not in text and url not in text
    assert "PoolTimeout" not in text and "couldn't get a connection" not in text


def write_config(tmp_path: Path, url: str) -> Path:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "models": [{"name": "offline", "use": "deerflow.models.scripted:ScriptedChatModel", "script": "quickstart"}],
        "storage": {"url": url, "connect_timeout": 2}, "memory": {"enabled": False}}))
    return config


@pytest.fixture
def jp_server_config(unreachable: str, deerflow_home: Path, tmp_path: Path) -> dict:
    return {
        "ServerApp": {"jpserver_extensions": {"deerflow_jupyter": True}},
        "DeerFlowExtension": {"export_kernel_env": False, "config_path": str(write_config(tmp_path, unreachable)),
                              "home": str(deerflow_home), "owner": "owner", "scheduler_enabled": False},
    }


async def test_the_checkpointer_at_start_is_one_line_and_exit_75(unreachable: str, tmp_path: Path) -> None:
    async with AsyncExitStack() as stack:
        with pytest.raises(DatabaseUnavailable) as caught:
            await open_checkpointer(StorageConfig(url=unreachable, connect_timeout=2),
                                    default_path=tmp_path / "unused.db", stack=stack)
    assert_one_clear_line(str(caught.value), unreachable)
    assert caught.value.exit_code == 75


async def test_the_api_answers_503_with_the_line(jp_fetch, unreachable: str) -> None:
    body = json.dumps({"assistant_id": "lead_agent", "if_not_exists": "create",
                       "input": {"messages": [{"role": "user", "content": "hi"}]}})
    for parts, method, payload in [(("threads",), "POST", "{}"), (("threads", "search"), "POST", "{}"),
                                   (("threads", "t1", "runs", "wait"), "POST", body)]:
        with pytest.raises(HTTPClientError) as caught:
            await jp_fetch(*API, *parts, method=method, body=payload)
        response = caught.value.response
        assert caught.value.code == 503, (parts, response.body if response else None)
        assert response is not None
        assert_one_clear_line(json.loads(response.body)["detail"], unreachable)


def test_the_cli_prints_the_line_alone_and_exits_75(unreachable: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("DEERFLOW_CONFIG", None)
    with running_process([sys.executable, "-m", "deerflow.cli", "--config", str(write_config(tmp_path, unreachable)),
                          "--home", str(tmp_path / "home"), "run", "hi"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as proc:
        _, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 75, err
    assert err.startswith("deerflow: storage unavailable: ") and err.count("\n") == 1, err  # no pool warnings
    assert_one_clear_line(err, unreachable)


@pytest.mark.parametrize(("url", "named"), [
    ("postgresql://ann:pw-1@db.lab.example/deerflow", "PostgreSQL at db.lab.example:5432/deerflow (storage.url)"),
    ("postgresql://ann:pw-1@db.lab.example:6432/deerflow?sslmode=require",
     "PostgreSQL at db.lab.example:6432/deerflow (storage.url)"),
    ("postgresql://ann:pw-1@/deerflow?host=/run/postgresql&port=5433",
     "PostgreSQL at /run/postgresql:5433/deerflow (storage.url)"),
    ("postgresql://ann:pw-1@bad host/deerflow", "PostgreSQL (storage.url)"),  # libpq cannot parse it: no details
])
def test_messages_name_the_database_by_host_port_and_name_only(url: str, named: str, monkeypatch) -> None:
    monkeypatch.delenv("PGHOST", raising=False)
    monkeypatch.delenv("PGPORT", raising=False)
    assert str(pgsql.where(url)) == named


def test_libpqs_reason_is_its_gist_and_never_the_password() -> None:
    import psycopg

    url = "postgresql://ann:pw-1@db.lab.example/deerflow"
    refused = psycopg.OperationalError('connection failed: connection to server at "10.0.0.5", port 5432 failed: '
                                       "Connection refused\n\tIs the server running on that host?")
    assert pgsql.libpq_reason(refused, url) == "Connection refused"
    auth = psycopg.OperationalError('connection to server at "10.0.0.5", port 5432 failed: FATAL:  password '
                                    'authentication failed for user "ann"')
    assert pgsql.libpq_reason(auth, url) == 'password authentication failed for user "ann"'
    echoed = psycopg.OperationalError("a driver that echoes its input: pw-1")
    assert "pw-1" not in pgsql.libpq_reason(echoed, url)


def test_a_pool_timeout_without_a_failed_attempt_says_busy_or_slow_not_down() -> None:
    from psycopg_pool import PoolTimeout

    url = "postgresql://ann:pw-1@db.lab.example/never-failed"  # no connection attempt to it has failed
    line = str(pgsql.unavailable(url, PoolTimeout("couldn't get a connection after 10.00 sec"), waited=10))
    assert line.startswith("storage unavailable: PostgreSQL at db.lab.example:5432/never-failed (storage.url): "
                           "no connection within 10 s (no attempt failed: the server is slow to answer, or every "
                           "pooled connection is in use)")
    assert "couldn't" not in line and "pw-1" not in line
