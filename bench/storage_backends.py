"""Checkpoint write cost and per-step overhead, PostgreSQL vs SQLite, side by side in one run.

1. **Checkpoints** — one thread grown with ``create_agent`` + ``ThreadState`` (the
   ``DeltaChannel`` message channel) and a zero-latency scripted model calling a tool that
   returns 200 characters, one message per graph step (``durability="sync"``), to the
   largest size: one thread on LangGraph's ``SqliteSaver`` (a file in a temporary directory)
   and one on its ``PostgresSaver`` (a throwaway local cluster: ``tests/fixtures/postgres.py``,
   unix socket), grown in lockstep — a step of one, then a step of the other — so a change in
   the machine's load during the run hits both alike.  For a window of steps around each size: the whole step and the
   checkpoint write alone (``put`` + ``put_writes``), p50 / p99, ms.  The ratio column is
   PostgreSQL's step p50 over SQLite's (goal: within 1.5x, flat in thread length).
2. **Run bookkeeping** — what DeerFlow's metadata store adds to every run on each backend:
   create the run with its thread lease, append its events, record its end and release the
   lease (the calls ``RunManager`` makes), p50 / p95 per run, ms.

    .venv/bin/python bench/storage_backends.py [--sizes 10,100,1000,2000] [--runs 200]

Absolute figures move with the machine's load; the two backends run interleaved in one
process, so their ratio is the figure to read.  The throwaway cluster's durability
(``fsync``, ``synchronous_commit``, ``full_page_writes``; off for the tests) is turned back
on first, so both backends wait for the disk on commit; SQLite runs with LangGraph's defaults.
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


def steps(saver: Any, target: int) -> Iterator[tuple[int, float, float]]:
    """Grow one thread on ``saver``: per graph step, (messages so far, step seconds, write seconds)."""
    agent = create_agent(ToolLoopModel(rounds=target // 2), [fetch], state_schema=ThreadState, checkpointer=saver)
    config = {"configurable": {"thread_id": "bench"}, "recursion_limit": 4 * target}
    stream = agent.stream({"messages": [HumanMessage("go", id="h")]}, config, stream_mode="updates",
                          durability="sync")
    count = 0
    while True:
        started = time.perf_counter()
        try:
            update = next(stream)
        except StopIteration:
            return
        step = time.perf_counter() - started
        count += sum(len(node.get("messages", [])) for node in update.values() if node)
        written, saver.spent = saver.spent, 0.0
        yield count, step, written


Grown = tuple[Samples, Samples, int]


def grow_together(savers: list[Any], sizes: list[int], budget: float) -> list[Grown]:
    """Grow one thread per saver in lockstep (a step on each in turn), so load drift hits both alike.

    Returns, per saver, the step and write seconds sampled around each size and the messages reached.
    """
    sampled = windows(sizes)
    target = max(r.stop for r in sampled.values())
    runs = [steps(saver, target) for saver in savers]
    grown: list[Grown] = [({s: [] for s in sizes}, {s: [] for s in sizes}, 0) for _ in savers]
    started = time.perf_counter()
    live = True
    while live and time.perf_counter() - started < budget:
        for i, run in enumerate(runs):
            found = next(run, None)
            if found is None:
                live = False
                break
            count, step, written = found
            step_samples, write_samples, _ = grown[i]
            for size, window in sampled.items():
                if count in window:
                    step_samples[size].append(step)
                    write_samples[size].append(written)
            grown[i] = (step_samples, write_samples, count)
    return grown


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


def durable(url: str) -> None:
    """Turn the throwaway cluster's durability back on (the tests run it without fsync).

    SQLite commits here wait for the disk (WAL, ``synchronous=FULL`` for the metadata store);
    a PostgreSQL that skipped its fsyncs would look cheaper than it is in production.
    """
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for name in ("fsync", "synchronous_commit", "full_page_writes"):
            conn.execute(f"ALTER SYSTEM SET {name} = on")
        conn.execute("SELECT pg_reload_conf()")


def ms(samples: list[float], q: float | None = None) -> str:
    if not samples:
        return f"{'-':>7}"
    value = statistics.median(samples) if q is None else percentile(samples, q)
    return f"{value * 1000:7.2f}"


def report(sizes: list[int], sqlite: Grown, pg: Grown) -> str:
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
        durable(cluster.url())
        with tempfile.TemporaryDirectory() as tmp:
            with sqlite_saver(Path(tmp) / "checkpoints.db") as lite, \
                    postgres_saver(cluster.create_database()) as pg:
                on_sqlite, on_pg = grow_together([lite, pg], sizes, args.budget)
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
