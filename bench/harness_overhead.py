"""Harness overhead per agent step: DeerFlow's lead agent vs plain ``create_agent``.

Both sides play the same zero-latency scripted conversation (N tool-calling
steps, then a final answer) with the same SQLite checkpointer.  The plain side
is ``langchain.agents.create_agent`` with no middleware, invoked directly; the
DeerFlow side is a full run through the run manager: every middleware, the
thread state and its reducers, the event projection and the run records.

    .venv/bin/python bench/harness_overhead.py [--steps 10,100] [--repeat 5]

Prints a side-by-side table with the ratio (goal: at most 1.5x).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiosqlite
from langchain.agents import create_agent
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_tools import echo

from deerflow.config.loader import load_config
from deerflow.config.paths import HomePaths
from deerflow.models.scripted import ScriptedChatModel
from deerflow.runtime.manager import RunManager, RunRequest


def script(steps: int) -> dict:
    turns = [{"tool_calls": [{"name": "echo", "args": {"text": f"{i:05d}" + "x" * 195}}]} for i in range(steps)]
    return {"name": f"bench-{steps}", "turns": [*turns, {"text": "done"}]}


async def plain_run(steps: int, db: Path) -> float:
    conn = await aiosqlite.connect(str(db))
    saver = AsyncSqliteSaver(conn)
    await saver.setup()
    agent = create_agent(ScriptedChatModel(script(steps)), [echo], checkpointer=saver)
    cfg = {"configurable": {"thread_id": "t"}, "recursion_limit": 10_000}
    start = time.perf_counter()
    await agent.ainvoke({"messages": [{"role": "user", "content": "go"}]}, cfg)
    elapsed = time.perf_counter() - start
    await conn.close()
    return elapsed


async def deerflow_run(steps: int, home: Path) -> float:
    script_file = home / "script.yaml"
    import yaml

    script_file.write_text(yaml.safe_dump(script(steps)))
    cfg = home / "config.yaml"
    cfg.write_text(
        "models:\n  - name: s\n    use: deerflow.models.scripted:ScriptedChatModel\n"
        f"    script: {script_file}\n"
        "tools:\n  - name: echo\n    group: bench\n    use: bench_tools:echo\n"
    )
    manager = await RunManager.open(loaded=load_config(cfg, env={}), home=HomePaths(home))
    start = time.perf_counter()
    live = await manager.start(RunRequest(prompt="go", options={"recursion_limit": 10_000}))
    finished = await live.wait()
    elapsed = time.perf_counter() - start
    await manager.close()
    assert finished.status == "success", finished.error
    return elapsed


async def measure(steps: int, repeat: int) -> tuple[float, float]:
    """Median wall time (seconds) of a whole run of ``steps`` tool steps, plain vs DeerFlow."""
    plain, ours = [], []
    for i in range(repeat):
        with tempfile.TemporaryDirectory() as tmp:
            plain.append(await plain_run(steps, Path(tmp) / f"p{i}.db"))
        with tempfile.TemporaryDirectory() as tmp:
            ours.append(await deerflow_run(steps, Path(tmp)))
    return statistics.median(plain), statistics.median(ours)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="10,100")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    sizes = [int(s) for s in args.steps.split(",")]
    totals = {n: asyncio.run(measure(n, args.repeat)) for n in sizes}
    print(f"{'steps':>6} | {'create_agent ms/step':>21} | {'DeerFlow ms/step':>17} | {'ratio':>6}")
    print("-" * 62)
    for n, (plain, ours) in totals.items():
        print(f"{n:>6} | {plain / n * 1000:>21.2f} | {ours / n * 1000:>17.2f} | {ours / plain:>5.2f}x")
    if len(sizes) >= 2:
        lo, hi = min(sizes), max(sizes)
        marg_plain = (totals[hi][0] - totals[lo][0]) / (hi - lo) * 1000
        marg_ours = (totals[hi][1] - totals[lo][1]) / (hi - lo) * 1000
        print("-" * 62)
        print(f"{'marginal':>6} | {marg_plain:>21.2f} | {marg_ours:>17.2f} | {marg_ours / marg_plain:>5.2f}x"
              "   (per extra step, fixed costs removed)")
        fixed_plain = totals[lo][0] * 1000 - marg_plain * lo
        fixed_ours = totals[lo][1] * 1000 - marg_ours * lo
        print(f"fixed cost per run: create_agent {fixed_plain:.1f} ms, DeerFlow {fixed_ours:.1f} ms "
              "(DeerFlow's includes building the agent, run records and event persistence)")


if __name__ == "__main__":
    main()
