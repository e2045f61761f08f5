"""Shared test setup: make ``tests/`` importable (``fixtures.*``) and isolate DEERFLOW_HOME."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))


@pytest.fixture
def deerflow_home(tmp_path, monkeypatch) -> Path:
    """A fresh DEERFLOW_HOME, no ambient config, no real API key."""
    home = tmp_path / "deerflow-home"
    home.mkdir()
    monkeypatch.setenv("DEERFLOW_HOME", str(home))
    monkeypatch.delenv("DEERFLOW_CONFIG", raising=False)
    monkeypatch.delenv("DEERFLOW_EXTENSIONS_CONFIG", raising=False)
    monkeypatch.delenv("DEERFLOW_SCRIPT", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    return home


# fixtures.postgres: one throwaway PostgreSQL cluster per session, started only when a test asks.
pytest_plugins = ["pytest_jupyter.jupyter_server", "fixtures.postgres"]
