"""A host's memory after many runs on long threads: RSS idle vs after ``--runs`` runs.

One warm run manager (zero-latency scripted model).  Idle is its RSS after three runs on
a short thread.  Then ``--threads`` threads are seeded with ``--messages`` messages each
(written straight into the checkpointer, no model calls), and ``--runs`` one-answer runs
go round-robin over them; the finished runs the host keeps in memory (its last 256) must
hold their events, not copies of those threads.  RSS from ``/proc/self/status`` after a
``gc.collect()``; the host's own counts (runs kept, frames kept) are printed alongside.

    .venv/bin/python bench/run_memory.py [--runs 300] [--threads 3] [--messages 2000]

Goal: RSS after the runs within 1.5x of idle.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "harness")]  # this checkout's code, not an installed copy

from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402

from deerflow.config.loader import load_config  # noqa: E402
from deerflow.config.paths import HomePaths  # noqa: E402
from deerflow.runs.manager import RunManager, RunRequest  # noqa: E402
from deerflow.runs.thread_ops import state_reader  # noqa: E402


def rss_mb() -> float:
    gc.collect()
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def seed(manager: RunManager, messages: int) -> str:
    """A thread holding ``messages`` messages (alternating user / assistant), no model involved."""
    thread = await manager.acreate_thread("local")
    history = [HumanMessage(f"question {i} " + "x" * 200) if i % 2 == 0 else AIMessage(f"answer {i} " + "y" * 200)
               for i in range(messages)]
    await state_reader(manager.checkpointer).aupdate_state(
        {"configurable": {"thread_id": thread.thread_id}}, {"messages": history}, as_node="model")
    return thread.thread_id


async def measure(runs: int, threads: int, messages: int) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "config.yaml"
        cfg.write_text("models:\n  - name: s\n    use: deerflow.models.scripted:ScriptedChatModel\n"
                       "    script: {turns: [{text: noted}], when_exhausted: explain}\n")
        manager = await RunManager.open(loaded=load_config(cfg, env={}), home=HomePaths(Path(tmp) / "home"))
        try:
            short = (await manager.acreate_thread("local")).thread_id
            for _ in range(3):
                await (await manager.start(RunRequest(prompt="hi", thread_id=short))).wait()
            idle = rss_mb()
            ids = [await seed(manager, messages) for _ in range(threads)]
            seeded = rss_mb()
            start = time.perf_counter()
            for i in range(runs):
                live = await manager.start(RunRequest(prompt=f"note {i}", thread_id=ids[i % threads]))
                finished = await live.wait()
                if finished.status != "success":
                    raise SystemExit(f"run {i} ended {finished.status}: {finished.error}")
            seconds = time.perf_counter() - start
            after = rss_mb()
            kept = [lv for lv in manager._live.values() if lv.done]  # what the host retains
            frames = sum(len(lv.frames) for lv in kept)
        finally:
            await manager.close()
    return ["| measure | figure | goal |", "|---|---|---|",
            f"| RSS idle (warm host) | {idle:.0f} MB | ≤ 200 MB (server) |",
            f"| RSS with {threads} threads of {messages:,} messages seeded | {seeded:.0f} MB | |",
            f"| RSS after {runs} runs on them | {after:.0f} MB ({after / idle:.2f}× idle) | ≤ 1.5× idle |",
            f"| finished runs kept / their frames | {len(kept)} / {frames:,} | |",
            f"| time for the {runs} runs | {seconds:.1f} s wall | |"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--threads", type=int, default=3)
    parser.add_argument("--messages", type=int, default=2000)
    args = parser.parse_args()
    before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    lines = asyncio.run(measure(args.runs, args.threads, args.messages))
    print(f"load average {before} before, {' '.join(f'{x:.2f}' for x in os.getloadavg())} after\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
