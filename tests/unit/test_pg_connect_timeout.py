"""``storage.connect_timeout`` reaches the metadata stores' pools (not a fixed ten seconds).

The stores get their database as one string (``HomePaths.store``), so the wait travels in
it as libpq's ``connect_timeout``; ``pgsql`` reads it back for its pool's wait.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deerflow.config.paths import HomePaths, with_connect_timeout
from deerflow.config.storage import StorageConfig
from deerflow.persistence import pgsql

URL = "postgresql://ann:pw-1@db.lab.example:6432/deerflow"


@pytest.mark.parametrize(("seconds", "whole"), [(2, "2"), (2.5, "3"), (0.5, "2"), (30, "30")])
def test_the_configured_wait_travels_with_the_url(tmp_path: Path, seconds: float, whole: str) -> None:
    home = HomePaths(tmp_path).with_storage(StorageConfig(url=URL, connect_timeout=seconds))
    assert home.metadata == f"{URL}?connect_timeout={whole}"
    assert pgsql.connect_seconds(str(home.metadata)) == float(whole)
    assert str(pgsql.where(str(home.metadata))) == "PostgreSQL at db.lab.example:6432/deerflow (storage.url)"


def test_other_parameters_and_the_users_own_timeout_are_kept() -> None:
    assert with_connect_timeout(f"{URL}?sslmode=require", 4) == f"{URL}?sslmode=require&connect_timeout=4"
    assert with_connect_timeout(f"{URL}?connect_timeout=7", 4) == f"{URL}?connect_timeout=7"
    assert pgsql.connect_seconds(f"{URL}?connect_timeout=7") == 7.0


def test_a_url_without_a_wait_falls_back_to_the_default() -> None:
    assert pgsql.connect_seconds(URL) == pgsql.CONNECT_SECONDS
    assert pgsql.connect_seconds("not a url at all") == pgsql.CONNECT_SECONDS
    database = pgsql.PostgresDatabase(f"{URL}?connect_timeout=3")
    assert database.connect_seconds == 3.0 and database._connect_wait() == 3.0
