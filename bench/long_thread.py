"""Per-step cost on a long thread against a fresh one: DeerFlow's run manager and plain ``create_agent``.

Each run plays N zero-latency tool-calling steps (the script parsed before any timer
starts) on a thread that already holds ``--history`` messages (seeded straight into
the checkpointer, outside the timer: alternating user / assistant messages of ~210
characters) or on a new thread.  A step is read inside the run: the scripted model
notes the process's CPU time as each answer is made (``bench_tools.ANSWER_CLOCK``), and
consecutive answers are one step apart (the rest of the model call, the tool, the
checkpoint, the next call's middleware and the model's own work on its input), so what
a run pays once (loading the thread from its checkpoint, the first model call's first
reading of the loaded messages, building the agent, recording the run) is never in it,
and no two noisy whole-run medians are subtracted.  Per step = (last answer − first) / N.
Plain side: ``create_agent`` (no middleware, one tool, ``add_messages``) on an
``AsyncSqliteSaver``; floor side: the same ``create_agent`` with DeerFlow's ``messages``
channel (``ThreadState``: the incremental reducer in a ``DeltaChannel``, whose lists also
let the model node's invalid-tool-call walk read only new messages: ``agents.invalid_calls``,
installed before any timer) and still no middleware, so what it pays per step on a long
thread is ``BaseChatModel``'s own walks over the request at every call, the floor under a
harness built on ``create_agent`` that does not name the history to the model call
(DeerFlow does: ``agents.model_passes``); DeerFlow side: ``RunManager.start()`` + wait on a
warm host.
The variants are interleaved over rounds, CPU time (``process_time``, all threads); medians.

    .venv/bin/python bench/long_thread.py [--history 2000] [--steps 11] [--rounds 9]

Goal: DeerFlow's per-step cost at 2,000 messages at most 1.3x a fresh thread's.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiosqlite
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "harness")]  # this checkout's code, not an installed copy
import bench_tools  # noqa: E402
import harness_overhead  # noqa: E402
from bench_tools import echo  # noqa: E402

from deerflow.agents import invalid_calls, model_passes  # noqa: E402
from deerflow.agents.thread_state import ThreadState  # noqa: E402
from deerflow.config.loader import load_config  # noqa: E402
from deerflow.config.paths import HomePaths  # noqa: E402
from deerflow.models.script_format import load_script  # noqa: E402
from deerflow.models.scripted import TURN_STAMP  # noqa: E402
from deerflow.run_options import RunOptions  # noqa: E402
from deerflow.runs.manager import RunManager, RunRequest  # noqa: E402
from deerflow.runs.thread_ops import state_reader  # noqa: E402

Key = tuple[str, int]  # (side, history)


def history(messages: int, steps: int) -> list[BaseMessage]:
    """An old conversation; its last answer is stamped so the script starts at its first turn."""
    stamp = {"model_name": f"scripted:bench-{steps}", TURN_STAMP: -1}
    return [HumanMessage(f"question {i} " + "x" * 200) if i % 2 == 0
            else AIMessage(f"answer {i} " + "y" * 200, response_metadata=stamp) for i in range(messages)]


class Sides:
    def __init__(self, manager: RunManager, saver: AsyncSqliteSaver) -> None:
        self.manager, self.saver, self.n = manager, saver, 0

    async def deerflow(self, size: int, steps: int) -> float:
        thread_id = None
        if size:
            thread_id = (await self.manager.acreate_thread("local")).thread_id
            await state_reader(self.manager.checkpointer).aupdate_state(
                {"configurable": {"thread_id": thread_id}}, {"messages": history(size, steps)}, as_node="model")
        bench_tools.ANSWER_CLOCK.clear()
        live = await self.manager.start(RunRequest(prompt="go", thread_id=thread_id, options=RunOptions(
            recursion_limit=10_000, model_name=f"bench-{steps}")))
        finished = await live.wait()
        assert finished.status == "success", finished.error
        return per_step(steps)

    async def plain(self, size: int, steps: int) -> float:
        return await self._create_agent(size, steps, None)

    async def floor(self, size: int, steps: int) -> float:
        return await self._create_agent(size, steps, ThreadState)

    async def _create_agent(self, size: int, steps: int, state: Any) -> float:
        model = bench_tools.PreparsedScriptedModel(script_key=f"bench-{steps}")
        self.n += 1
        cfg: Any = {"configurable": {"thread_id": f"plain-{self.n}"}, "recursion_limit": 10_000}
        if size:
            seeder = create_agent(model, [echo], checkpointer=self.saver, state_schema=state)
            await seeder.aupdate_state(cfg, {"messages": history(size, steps)}, as_node="model")
        bench_tools.ANSWER_CLOCK.clear()
        agent = create_agent(model, [echo], checkpointer=self.saver, state_schema=state)
        await agent.ainvoke({"messages": [{"role": "user", "content": "go"}]}, cfg)
        return per_step(steps)


def per_step(steps: int) -> float:
    """CPU seconds a step, read off the run's answers (one answer per step, then the final one)."""
    clock = bench_tools.ANSWER_CLOCK
    assert len(clock) == steps + 1, f"{len(clock)} answers for {steps} steps"
    return (clock[-1] - clock[0]) / steps


async def measure(size: int, steps: int, rounds: int) -> dict[Key, list[float]]:
    bench_tools.SCRIPTS[f"bench-{steps}"] = load_script(harness_overhead.script(steps))
    invalid_calls.install()  # what a DeerFlow run installs, in place for every side from the first round
    model_passes.install()
    samples: dict[Key, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        conn = await aiosqlite.connect(str(home / "plain.db"))
        saver = AsyncSqliteSaver(conn)
        await saver.setup()
        manager = await RunManager.open(loaded=load_config(harness_overhead.write_config(home, [steps]), env={}),
                                        home=HomePaths(home / "home"))
        try:
            sides = Sides(manager, saver)
            runs = {"create_agent": sides.plain, "floor": sides.floor, "DeerFlow": sides.deerflow}
            for run in runs.values():  # warm-up, untimed
                await run(0, steps)
            for r in range(rounds):
                order = list(runs.items()) if r % 2 == 0 else list(reversed(runs.items()))
                for h in ((0, size) if r % 2 == 0 else (size, 0)):
                    for name, run in order:
                        samples.setdefault((name, h), []).append(await run(h, steps))
        finally:
            await manager.close()
            await conn.close()
    return samples


def table(samples: dict[Key, list[float]], size: int, steps: int) -> list[str]:
    med = {k: statistics.median(v) * 1000 for k, v in samples.items()}
    rows = {side: (med[(side, 0)], med[(side, size)]) for side in ("create_agent", "floor", "DeerFlow")}
    (pf, pl), (ff, fl), (df, dl) = rows["create_agent"], rows["floor"], rows["DeerFlow"]
    return [f"| per step (ms CPU, read inside {steps}-step runs) | create_agent | create_agent + DeerFlow's channel "
            "(no middleware) | DeerFlow | goal |", "|---|---|---|---|---|",
            f"| fresh thread | {pf:.2f} | {ff:.2f} | {df:.2f} | |",
            f"| thread of {size:,} messages | {pl:.2f} | {fl:.2f} | {dl:.2f} | |",
            f"| growth per step (ms) | {pl - pf:+.2f} | {fl - ff:+.2f} | {dl - df:+.2f} | |",
            f"| {size:,} messages ÷ fresh | {pl / pf:.2f}× | {fl / ff:.2f}× | {dl / df:.2f}× | ≤ 1.3× (DeerFlow) |"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=11)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    steps = args.steps
    before = harness_overhead.load()
    samples = asyncio.run(measure(args.history, steps, args.rounds))
    print(f"commit {harness_overhead.commit()}, {time.strftime('%Y-%m-%d')}, load average {before} before, "
          f"{harness_overhead.load()} after, {args.rounds} rounds interleaved\n")
    print("\n".join(table(samples, args.history, steps)))


if __name__ == "__main__":
    main()
