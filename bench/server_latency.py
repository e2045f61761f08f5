"""Server extension latency: first SSE event, streaming rate, concurrent runs.

Starts a real ``jupyter server`` with the DeerFlow extension on loopback and measures,
in one run:

1. time from ``POST .../runs/stream`` to the first SSE event and to the first DeerFlow
   event (zero-latency scripted model, warm server; goal ≤ 50 ms);
2. events per second streamed for a long reply;
3. 20 concurrent runs with a model that sleeps 0.5 s per call: per-step time vs a single
   run (goal: within 2x).

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
sys.path.insert(0, str(HERE.parent / "tests"))
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


async def scenario(api: str, headers: dict[str, str], runs: int) -> None:
    async with httpx.AsyncClient(base_url=api, headers=headers, timeout=120) as client:
        await stream_run(client, "quick")  # warm up
        firsts = [await stream_run(client, "quick") for _ in range(10)]
        print(f"first SSE event:      median {statistics.median(f[0] for f in firsts) * 1000:6.1f} ms")
        print(f"first DeerFlow event: median {statistics.median(f[1] for f in firsts) * 1000:6.1f} ms")
        _, _, count, total = await stream_run(client, "long")
        print(f"long reply: {count} events in {total:.2f} s = {count / total:,.0f} events/s")
        _, _, _, single = await stream_run(client, "sleepy")
        start = time.perf_counter()
        results = await asyncio.gather(*(stream_run(client, "sleepy") for _ in range(runs)))
        wall = time.perf_counter() - start
        per_step_single = single / 3
        per_step_conc = statistics.median(r[3] for r in results) / 3
        print(f"sleepy model (0.5 s/call, 3 calls/run): single run {single:.2f} s ({per_step_single:.2f} s/step)")
        print(f"{runs} concurrent runs: wall {wall:.2f} s, median run {per_step_conc * 3:.2f} s "
              f"({per_step_conc:.2f} s/step) = {per_step_conc / per_step_single:.2f}x a single run")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "config.yaml").write_text(CONFIG)
        env = {"DEERFLOW_HOME": str(work / "home"), "DEERFLOW_CONFIG": str(work / "config.yaml"),
               # bench_tools first, then the caller's path (a worktree's harness), never replaced
               "PYTHONPATH": os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p),
               "OPENAI_API_KEY": ""}
        with running_jupyter(work, env=env) as server:
            asyncio.run(scenario(server.api, server.headers, args.runs))


if __name__ == "__main__":
    main()
