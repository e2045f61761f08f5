"""Soak: hostile tool calls in ten threads do not stall ten normal runs or the server.

A real ``jupyter server`` with the extension (tests/fixtures/soak.py) serves
hostile runs (catastrophic regexes, 1 MB commands, forks, FIFO reads) and
normal runs at once, while a probe polls ``/api/status``.  Bounded to about a
minute, loopback only.  The only time limit asserted is a hang guard: every
status request answers within 15 s.  It answers in milliseconds (p99 ~0.1 s
under this load; the figures are in docs/PERFORMANCE.md, from
bench/soak_latency.py), and the freezes this guards against lasted 6 s to
forever; the guard is wide because a loaded 2-core CI machine starting twenty
runs at once can stall a single request for seconds without anything being wrong.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from fixtures.jupyter_process import running_jupyter
from fixtures.soak import StatusProbe, soak, write_config

pytestmark = pytest.mark.integration

HANG_GUARD_S = 15.0


def test_hostile_tool_calls_do_not_stall_normal_runs_or_the_server(tmp_path: Path) -> None:
    cfg = write_config(tmp_path)
    env = {"DEERFLOW_HOME": str(tmp_path / "home"), "DEERFLOW_CONFIG": str(cfg), "OPENAI_API_KEY": ""}
    with running_jupyter(tmp_path, env=env) as server:
        with StatusProbe(server.url, server.headers, hang_guard=HANG_GUARD_S) as probe:
            result = asyncio.run(soak(server.api, server.headers, hostile=10, normal=10))
        log = server.log.read_text()
    assert result.normal == ["success"] * 10
    assert len(result.hostile) == 10  # each hostile run ended: its tools failed, it did not hang
    assert probe.failures == []
    assert len(probe.latencies) > 20
    assert "Traceback" not in log
