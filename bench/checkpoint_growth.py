"""Checkpoint cost of a growing thread: ThreadState's delta channel vs add_messages.

Grows one thread per message channel with ``create_agent`` + ``SqliteSaver`` and
a zero-latency scripted model that calls a tool returning 200 characters, one
message per graph step, until the largest requested size. For a window of
steps around each size it reports the per-step wall time (model node or tool
node, reducer, checkpoint write) and the database size on disk when that size is
reached::

    .venv/bin/python bench/checkpoint_growth.py --sizes 10,100,1000,2000

A run that exceeds ``--budget`` seconds stops growing; sizes it did not reach
are shown as ``-``.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware.types import AgentState
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver

from deerflow.agents.thread_state import ThreadState

RESULT_TEXT = "r" * 200


class ToolLoopModel(BaseChatModel):
    """Zero-latency model: a tool call per turn until ``rounds``, then ``done``."""

    rounds: int

    @property
    def _llm_type(self) -> str:
        return "bench-tool-loop"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ToolLoopModel:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        if len(messages) // 2 < self.rounds:
            call = {"name": "fetch", "args": {"n": len(messages)}, "id": f"c{len(messages)}"}
            message = AIMessage(content="", tool_calls=[call])
        else:
            message = AIMessage(content="done")
        return ChatResult(generations=[ChatGeneration(message=message)])


@tool
def fetch(n: int) -> str:
    """Return a fixed 200-character result."""
    return RESULT_TEXT


class TimedSaver(SqliteSaver):
    """A SqliteSaver that adds up the time spent writing checkpoints and pending writes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pending = 0.0

    def put(self, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return super().put(*args, **kwargs)
        finally:
            self.pending += time.perf_counter() - started

    def put_writes(self, *args: Any, **kwargs: Any) -> None:
        started = time.perf_counter()
        try:
            super().put_writes(*args, **kwargs)
        finally:
            self.pending += time.perf_counter() - started

    def take(self) -> float:
        """Seconds spent writing since the last call."""
        spent, self.pending = self.pending, 0.0
        return spent


@dataclass
class Growth:
    """What one variant measured while its thread grew."""

    step_seconds: dict[int, list[float]] = field(default_factory=dict)
    write_seconds: dict[int, list[float]] = field(default_factory=dict)
    db_bytes: dict[int, int] = field(default_factory=dict)
    reached: int = 0
    wall_seconds: float = 0.0
    get_state_ms: float | None = None


def windows(sizes: list[int]) -> dict[int, range]:
    """Message counts sampled for each size: up to 50 steps centred on it."""
    result = {}
    for size in sizes:
        half = max(5, min(25, size // 2))
        result[size] = range(max(2, size - half), size + half)
    return result


def db_size(path: Path) -> int:
    """Bytes of the database file once its write-ahead log is folded in.

    The WAL file keeps its high-water size after each checkpoint, so adding it
    would count reused space; folding it in first measures the data itself.
    """
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path.stat().st_size


def grow(schema: type, path: Path, sizes: list[int], budget: float) -> Growth:
    """Grow one thread past the largest size, timing every step in the windows."""
    sampled = windows(sizes)
    target = max(r.stop for r in sampled.values())
    growth = Growth(step_seconds={size: [] for size in sizes}, write_seconds={size: [] for size in sizes})
    connection = sqlite3.connect(path, check_same_thread=False)
    try:
        saver = TimedSaver(connection)
        agent = create_agent(
            ToolLoopModel(rounds=target // 2),
            [fetch],
            state_schema=schema,
            checkpointer=saver,
        )
        config = {"configurable": {"thread_id": "bench"}, "recursion_limit": 4 * target}
        growth.reached = _stream_steps(agent, config, path, sampled, growth, budget, saver)
        started = time.perf_counter()
        agent.get_state(config)
        growth.get_state_ms = (time.perf_counter() - started) * 1000
    finally:
        connection.close()
    return growth


def _stream_steps(
    agent: Any,
    config: dict[str, Any],
    path: Path,
    sampled: dict[int, range],
    growth: Growth,
    budget: float,
    saver: TimedSaver,
) -> int:
    """Drive the run step by step; return the message count reached."""
    count = 0
    start = last = time.perf_counter()
    # durability="sync": each step's checkpoint is on disk before the next step
    # starts, so the step time includes the write (the default writes in the
    # background and a slow saver would only show up as a queue at the end).
    stream = agent.stream(
        {"messages": [HumanMessage("go", id="h")]},
        config,
        stream_mode="updates",
        durability="sync",
    )
    for update in stream:
        now = time.perf_counter()
        count += sum(len(node.get("messages", [])) for node in update.values() if node)
        written = saver.take()
        for size, window in sampled.items():
            if count in window:
                growth.step_seconds[size].append(now - last)
                growth.write_seconds[size].append(written)
            if count == size:
                growth.db_bytes[size] = db_size(path)
        growth.wall_seconds = now - start
        if growth.wall_seconds > budget:
            stream.close()
            break
        last = time.perf_counter()
    return count


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def cell(growth: Growth, size: int) -> str:
    steps, writes = growth.step_seconds[size], growth.write_seconds[size]
    if size not in growth.db_bytes or not steps:
        return f"{'-':>7} {'-':>7} {'-':>7} {'-':>7} {'-':>8}"
    return (f"{statistics.median(steps) * 1000:7.2f} {percentile(steps, 0.99) * 1000:7.2f} "
            f"{statistics.median(writes) * 1000:7.2f} {percentile(writes, 0.99) * 1000:7.2f} "
            f"{growth.db_bytes[size] / 1e6:8.2f}")


def report(sizes: list[int], delta: Growth, full: Growth) -> str:
    head = f"{'step50':>7} {'step99':>7} {'write50':>7} {'write99':>7} {'DB MB':>8}"
    lines = [
        "per step: whole graph step; per write: checkpoint put + put_writes only (ms)",
        f"{'':>9} | {'ThreadState (DeltaChannel)':^40} | {'AgentState (add_messages)':^40}",
        f"{'messages':>9} | {head} | {head}",
        "-" * 95,
    ]
    lines += [f"{size:>9} | {cell(delta, size)} | {cell(full, size)}" for size in sizes]
    lines.append("-" * 95)
    for name, growth in (("ThreadState", delta), ("AgentState", full)):
        lines.append(
            f"{name}: reached {growth.reached} messages in {growth.wall_seconds:.1f} s; "
            f"get_state afterwards {growth.get_state_ms:.1f} ms"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", default="10,100,1000,2000", help="comma-separated message counts to report"
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=240.0,
        help="seconds each variant may spend growing its thread",
    )
    parser.add_argument(
        "--db-dir",
        type=Path,
        default=None,
        help="keep the databases here instead of a temporary directory",
    )
    args = parser.parse_args(argv)
    sizes = sorted(int(size) for size in args.sizes.split(","))
    with tempfile.TemporaryDirectory() as scratch:
        directory = args.db_dir or Path(scratch)
        directory.mkdir(parents=True, exist_ok=True)
        delta = grow(ThreadState, directory / "thread_state.sqlite", sizes, args.budget)
        full = grow(AgentState, directory / "add_messages.sqlite", sizes, args.budget)
    print(report(sizes, delta, full))


if __name__ == "__main__":
    main()
