"""Server extension latency: first SSE event, streaming rate, concurrent runs.

Starts a real ``jupyter server`` with the DeerFlow extension on loopback and measures,
in one run:

1. time from ``POST .../runs/stream`` to the first SSE event and to the first DeerFlow
   event (zero-latency scripted model, warm server; goal ≤ 30 ms), and the server's CPU
   time per such run (user + system of the server process, from ``/proc``);
2. events per second streamed for a long reply;
3. 20 concurrent runs with a model that sleeps 0.5 s per call: per-step time vs a single
   run (goal: within 1.5x).

The server runs this checkout's code: its ``harness`` and ``extension`` go first on the
server's ``PYTHONPATH``, then the caller's path and the test fixtures' (nothing replaced).

    .venv/bin/python bench/server_latency.py [--runs 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "tests"))
from fixtures.jupyter_process import running_jupyter  # noqa: E402

LONG_TEXT = " ".join(f"word{i}" for i in range(3000))
CONFIG = f"""
models:
  - name: quick
    use: deerflow.models.scripted:ScriptedChatModel
    script: |
      turns:
        - text: "hello"
  - name: long
    use: deerflow.models.scripted:ScriptedChatModel
    words_per_chunk: 1
    script: |
      turns:
        - text: "{LONG_TEXT}"
  - name: sleepy
    use: bench_tools:SleepyScriptedModel
    delay: 0.5
    script: |
      turns:
        - tool_calls: [{{name: ls, args: {{path: /mnt/user-data/workspace}}}}]
        - tool_calls: [{{name: ls, args: {{path: /mnt/user-data/outputs}}}}]
        - text: done
"""


def body(model: str) -> str:
    return json.dumps({"assistant_id": "lead_agent", "stream_mode": ["custom"],
                       "input": {"messages": [{"role": "user", "content": "go"}]},
                       "config": {"configurable": {"model_name": model}}})


async def stream_run(client: httpx.AsyncClient, model: str) -> tuple[float, float, int, float]:
    """(first SSE event s, first DeerFlow event s, events, total s) of one streamed run."""
    thread = (await client.post("/threads", content="{}")).json()["thread_id"]
    start = time.perf_counter()
    first = first_custom = None
    count = 0
    async with client.stream("POST", f"/threads/{thread}/runs/stream", content=body(model)) as res:
        async for line in res.aiter_lines():
            if line.startswith("event: "):
                now = time.perf_counter() - start
                first = first if first is not None else now
                if line == "event: custom":
                    first_custom = first_custom if first_custom is not None else now
                    count += 1
    return first or 0.0, first_custom or 0.0, count, time.perf_counter() - start


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def scenario(api: str, headers: dict[str, str], runs: int, pid: int) -> list[str]:
    """The markdown table of one warm server's figures."""
    async with httpx.AsyncClient(base_url=api, headers=headers, timeout=120) as client:
        for _ in range(3):
            await stream_run(client, "quick")  # warm up: first-use imports and caches
        cpu = cpu_seconds(pid)
        firsts = [await stream_run(client, "quick") for _ in range(20)]
        server_cpu = (cpu_seconds(pid) - cpu) / len(firsts)
        _, _, count, total = await stream_run(client, "long")
        _, _, _, single = await stream_run(client, "sleepy")
        results = await asyncio.gather(*(stream_run(client, "sleepy") for _ in range(runs)))
    per_step_single = single / 3
    per_step_conc = statistics.median(r[3] for r in results) / 3
    ms = 1000
    return ["| measure (median of 20 warm runs) | figure | goal |", "|---|---|---|",
            f"| `POST …/runs/stream` → first SSE event | {statistics.median(f[0] for f in firsts) * ms:.1f} ms | |",
            f"| `POST …/runs/stream` → first DeerFlow event | {statistics.median(f[1] for f in firsts) * ms:.1f} ms "
            "| ≤ 30 ms warm |",
            f"| server CPU per trivial run | {server_cpu * ms:.1f} ms | |",
            f"| long reply streamed | {count / total:,.0f} events/s | |",
            f"| {runs} concurrent runs, model sleeping 0.5 s per call (3 calls) | {per_step_conc:.2f} s/step vs "
            f"{per_step_single:.2f} s/step single ({per_step_conc / per_step_single:.2f}×) | within 1.5× |"]


def measure(runs: int) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "config.yaml").write_text(CONFIG)
        path = [str(HERE), str(REPO / "harness"), str(REPO / "extension"), str(REPO), str(REPO / "tests"),
                os.environ.get("PYTHONPATH", "")]
        env = {"DEERFLOW_HOME": str(work / "home"), "DEERFLOW_CONFIG": str(work / "config.yaml"),
               "PYTHONPATH": os.pathsep.join(p for p in path if p), "OPENAI_API_KEY": ""}
        with running_jupyter(work, env=env) as server:
            return asyncio.run(scenario(server.api, server.headers, runs, server.process.pid))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    lines = measure(args.runs)
    print(f"load average {before} before, {' '.join(f'{x:.2f}' for x in os.getloadavg())} after\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
