"""Checkpoint write cost and per-step overhead, PostgreSQL vs SQLite, side by side in one run.

1. **Checkpoints** — one thread grown with ``create_agent`` + ``ThreadState`` (the
   ``DeltaChannel`` message channel) and a zero-latency scripted model calling a tool that
   returns 200 characters, one message per graph step (``durability="sync"``), to the
   largest size; once on LangGraph's ``SqliteSaver`` (a file in a temporary directory),
   once on its ``PostgresSaver`` (a throwaway local cluster: ``tests/fixtures/postgres.py``,
   unix socket).  For a window of steps around each size: the whole step and the
   checkpoint write alone (``put`` + ``put_writes``), p50 / p99, ms.  The ratio column is
   PostgreSQL's step p50 over SQLite's (goal: within 1.5x, flat in thread length).
2. **Run bookkeeping** — what DeerFlow's metadata store adds to every run on each backend:
   create the run with its thread lease, append its events, record its end and release the
   lease (the calls ``RunManager`` makes), p50 / p95 per run, ms.

    .venv/bin/python bench/storage_backends.py [--sizes 10,100,1000,2000] [--runs 200]

Absolute figures move with the machine's load; the two backends run back to back in one
process, so their ratio is the figure to read.  The throwaway cluster runs with
``fsync=off`` (as the tests' does); SQLite runs with LangGraph's defaults (WAL).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from checkpoint_growth import ToolLoopModel, fetch, percentile, windows
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage

from deerflow.agents.thread_state import ThreadState
from deerflow.persistence import pgsql
from deerflow.persistence.store import LeaseTerms, MetadataStore, RunRecord

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from fixtures.postgres import PostgresUnavailable, throwaway_cluster

Samples = dict[int, list[float]]


def timed(saver: Any) -> Any:
    """Wrap ``saver.put`` / ``put_writes`` to add up their time in ``saver.spent``."""
    saver.spent = 0.0
    for name in ("put", "put_writes"):
        original = getattr(saver, name)

        def wrapper(*args: Any, _original: Callable[..., Any] = original, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return _original(*args, **kwargs)
            finally:
                saver.spent += time.perf_counter() - started

        setattr(saver, name, wrapper)
    return saver


@contextmanager
def sqlite_saver(path: Path) -> Iterator[Any]:
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    connection = sqlite3.connect(path, check_same_thread=False)
    try:
        yield timed(SqliteSaver(connection))
    finally:
        connection.close()


@contextmanager
def postgres_saver(url: str) -> Iterator[Any]:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    with psycopg.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row) as connection:
        saver = PostgresSaver(connection)
        saver.setup()
        yield timed(saver)


def grow(saver: Any, sizes: list[int], budget: float) -> tuple[Samples, Samples, int]:
    """Grow one thread past the largest size; step and write seconds per size, and messages reached."""
    sampled = windows(sizes)
    target = max(r.stop for r in sampled.values())
    agent = create_agent(ToolLoopModel(rounds=target // 2), [fetch], state_schema=ThreadState, checkpointer=saver)
    config = {"configurable": {"thread_id": "bench"}, "recursion_limit": 4 * target}
    steps: Samples = {size: [] for size in sizes}
    writes: Samples = {size: [] for size in sizes}
    count, start = 0, time.perf_counter()
    last = start
    stream = agent.stream({"messages": [HumanMessage("go", id="h")]}, config, stream_mode="updates",
                          durability="sync")
    for update in stream:
        now = time.perf_counter()
        count += sum(len(node.get("messages", [])) for node in update.values() if node)
        written, saver.spent = saver.spent, 0.0
        for size, window in sampled.items():
            if count in window:
                steps[size].append(now - last)
                writes[size].append(written)
        if now - start > budget:
            stream.close()
            break
        last = time.perf_counter()
    return steps, writes, count


def bookkeeping(store: MetadataStore, runs: int) -> list[float]:
    """Seconds per run of the metadata calls a run makes (lease, events, end)."""
    store.create_thread("bench", "u")
    samples = []
    for n in range(runs):
        run_id, owner = f"r{n}", uuid.uuid4().hex
        started = time.perf_counter()
        now = time.time()
        store.create_run(RunRecord(run_id, "bench", "u", "running", now, now),
                         lease=LeaseTerms(owner, "bench:1", 30.0))
        store.renew_lease("bench", owner, 30.0)
        store.add_events(run_id, [(seq, '{"type": "x"}') for seq in range(1, 21)])
        store.finish_run(run_id, status="success", result={"text": "done"}, lease_owner=owner)
        store.update_thread("bench", title="bench")
        samples.append(time.perf_counter() - started)
    return samples


def ms(samples: list[float], q: float | None = None) -> str:
    if not samples:
        return f"{'-':>7}"
    value = statistics.median(samples) if q is None else percentile(samples, q)
    return f"{value * 1000:7.2f}"


def report(sizes: list[int], sqlite: tuple[Samples, Samples, int], pg: tuple[Samples, Samples, int]) -> str:
    head = f"{'step50':>7} {'step99':>7} {'write50':>7} {'write99':>7}"
    lines = ["checkpoints (ThreadState, one message per step, durability=sync), ms",
             f"{'':>9} | {'SQLite (SqliteSaver)':^31} | {'PostgreSQL (PostgresSaver)':^31} | PG/SQLite",
             f"{'messages':>9} | {head} | {head} | step p50", "-" * 90]
    for size in sizes:
        cells = []
        for steps, writes, _ in (sqlite, pg):
            cells.append(f"{ms(steps[size])} {ms(steps[size], 0.99)} {ms(writes[size])} {ms(writes[size], 0.99)}")
        both = sqlite[0][size] and pg[0][size]
        ratio = statistics.median(pg[0][size]) / statistics.median(sqlite[0][size]) if both else float("nan")
        lines.append(f"{size:>9} | {cells[0]} | {cells[1]} | {ratio:8.2f}x")
    lines.append(f"reached: SQLite {sqlite[2]} messages, PostgreSQL {pg[2]} messages")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000,2000", help="comma-separated message counts to report")
    parser.add_argument("--budget", type=float, default=300.0, help="seconds each backend may spend growing")
    parser.add_argument("--runs", type=int, default=200, help="runs of metadata bookkeeping per backend")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    try:
        cluster_cm = throwaway_cluster()
        cluster = cluster_cm.__enter__()
    except PostgresUnavailable as exc:
        print(f"PostgreSQL unavailable here: {exc}")
        return 1
    try:
        with tempfile.TemporaryDirectory() as tmp:
            with sqlite_saver(Path(tmp) / "checkpoints.db") as saver:
                on_sqlite = grow(saver, sizes, args.budget)
            with postgres_saver(cluster.create_database()) as saver:
                on_pg = grow(saver, sizes, args.budget)
            print(report(sizes, on_sqlite, on_pg))
            url = cluster.create_database()
            per_run = {"SQLite": bookkeeping(MetadataStore(Path(tmp) / "deerflow.db"), args.runs),
                       "PostgreSQL": bookkeeping(MetadataStore(url), args.runs)}
            pgsql.close_all()
        print(f"\nrun bookkeeping (create run + lease, renew, 20 events, finish + release, title), "
              f"{args.runs} runs, ms per run")
        for name, samples in per_run.items():
            print(f"{name:>10}: p50 {ms(samples).strip()}  p95 {ms(samples, 0.95).strip()}")
    finally:
        cluster_cm.__exit__(None, None, None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
