"""The CLI's log lines: the config's format, and no secret from the config or the environment."""

from __future__ import annotations

import json

import pytest

from deerflow.cli import main
from fixtures.leaky_tools import KEY, TOKEN, write_leaky_config

pytestmark = pytest.mark.integration



@pytest.mark.parametrize("fmt", ["text", "json"])
def test_cli_log_lines_never_carry_a_secret(fmt, deerflow_home, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LAB_SERVICE_TOKEN", TOKEN)
    config = write_leaky_config(tmp_path, fmt)
    assert main(["--config", str(config), "run", "go"]) == 0
    err = capsys.readouterr().err
    assert KEY not in err and TOKEN not in err
    ours = [line for line in err.splitlines() if "deerflow.tests.leaky" in line]
    assert len(ours) == 2, err
    if fmt == "json":
        warned, failed = (json.loads(line) for line in ours)
        assert warned["upstream"] == "401 for key *** and token ***" and warned["level"] == "warning"
        assert failed["error"] == "RuntimeError: request failed with 401 for key *** and token ***"
    else:
        assert "upstream answered: 401 for key *** and token ***" in ours[0]
        assert "RuntimeError: request failed with 401 for key *** and token ***" in ours[1]
