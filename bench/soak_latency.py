"""``/api/status`` latency with and without hostile tool calls, side by side, in one run.

Starts a real ``jupyter server`` with the DeerFlow extension on loopback and polls
``GET /api/status`` every 50 ms:

1. **idle**: for ``--idle`` seconds with nothing running;
2. **soak**: while ``--hostile`` runs call tools the way an attacker would
   (catastrophic regexes in grep/glob, 1 MB and 84 KB bash commands, a hundred
   forks, FIFO reads; see tests/fixtures/soak.py) beside ``--normal`` ordinary runs.

Prints p50/p99/max status latency for both phases, how long the normal runs took,
and their statuses.  Figures go in docs/PERFORMANCE.md ("Hostile load").

    .venv/bin/python bench/soak_latency.py [--hostile 10] [--normal 10] [--idle 10]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
from fixtures.jupyter_process import running_jupyter  # noqa: E402
from fixtures.soak import StatusProbe, soak, write_config  # noqa: E402


def row(label: str, probe: StatusProbe) -> str:
    p50, p99, worst = probe.percentiles()
    return (f"{label:<22} p50 {p50:7.1f} ms   p99 {p99:7.1f} ms   max {worst:7.1f} ms   "
            f"({len(probe.latencies)} requests, {len(probe.failures)} over the 5 s guard)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hostile", type=int, default=10)
    parser.add_argument("--normal", type=int, default=10)
    parser.add_argument("--idle", type=float, default=10.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        env = {"DEERFLOW_HOME": str(work / "home"), "DEERFLOW_CONFIG": str(write_config(work)),
               "OPENAI_API_KEY": ""}
        with running_jupyter(work, env=env) as server:
            asyncio.run(soak(server.api, server.headers, hostile=0, normal=1, head_start=0))  # warm up
            with StatusProbe(server.url, server.headers) as idle:
                time.sleep(args.idle)
            with StatusProbe(server.url, server.headers) as loaded:
                result = asyncio.run(soak(server.api, server.headers, hostile=args.hostile,
                                          normal=args.normal))
    print(row("idle", idle))
    print(row(f"{args.hostile} hostile + {args.normal} normal", loaded))
    print(f"normal runs: {', '.join(sorted(set(result.normal)))}; median {statistics.median(result.normal_seconds):.1f} s, "
          f"slowest {max(result.normal_seconds):.1f} s; soak wall {result.wall:.0f} s")


if __name__ == "__main__":
    main()
