"""Durable batch throughput, and what the SQL queue costs per item (SQLite and PostgreSQL).

1. **Throughput** — N items (default 100), each a scripted subagent whose model waits
   ``--latency`` seconds per answer (default 0.2 s, like a provider round trip) and then
   finishes, run by a :class:`BatchWorker` at concurrency 1, 4 and 16 over a fresh SQLite
   queue.  Reported: wall time, items/s, speed-up over concurrency 1 and efficiency
   (speed-up / concurrency; goal: near-linear up to 16).  The ideal wall time is
   ``N / concurrency * latency``.
2. **Queue overhead** — the same store with a runner that does nothing: submission
   (one transaction for all items) and claim + finish per item, in milliseconds; on SQLite
   and, side by side, on a throwaway local PostgreSQL cluster (the tests' own,
   ``tests/fixtures/postgres.py``: unix socket; skipped, saying why, without PostgreSQL).

    .venv/bin/python bench/batch_throughput.py [--items 100] [--latency 0.2] [--concurrency 1,4,16]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path

from deerflow.config.loader import load_config
from deerflow.config.paths import HomePaths
from deerflow.runtime.context import RunContext
from deerflow.runtime.services import HostServices
from deerflow.subagents.acceptance import AcceptanceReport
from deerflow.subagents.batches.sql import PostgresBackend, SqlBackend, SqliteBackend
from deerflow.subagents.batches.store import BatchStore, ClaimedItem, ItemSpec
from deerflow.subagents.batches.submitter import BatchSubmitter, item_runner
from deerflow.subagents.batches.worker import BatchWorker
from deerflow.subagents.controller import SubagentController
from deerflow.subagents.outcome import SubagentOutcome
from deerflow.subagents.runtime import SubagentRuntime

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from fixtures.postgres import PostgresUnavailable, throwaway_cluster

SCRIPT = """
turns: ["lead"]
conversations:
  - {match: ITEM, turns: ["Done."]}
"""


def write_config(root: Path, latency: float) -> Path:
    config = root / "config.yaml"
    config.write_text(
        "models:\n  - name: sleepy\n    use: deerflow.models.scripted:ScriptedChatModel\n"
        f"    latency: {latency}\n    script: |\n{textwrap.indent(SCRIPT.strip(), ' ' * 6)}\n"
        "subagents:\n  enabled: true\n  poll_interval: 0.05\n  batches:\n    enabled: true\n")
    return config


async def throughput(items: int, latency: float, concurrency: int) -> float:
    """Wall seconds for a worker at ``concurrency`` to finish ``items`` items (after a warm-up item)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        loaded = load_config(write_config(root, latency))
        home = HomePaths(root / "home")
        store = BatchStore(SqliteBackend(root / "home" / "batches.db"))
        submitter = BatchSubmitter(store, max_items=10_000)
        context = RunContext(user_id="bench", thread_id="t", run_id="r", paths=home.thread("bench", "t"),
                             config=loaded.config, model_name="sleepy")
        async with AsyncExitStack() as stack:
            controller = SubagentController()
            stack.push_async_callback(controller.aclose)
            runner = item_runner(SubagentRuntime(controller), loaded.config, home, HostServices())
            worker = BatchWorker(store, runner, concurrency=concurrency, lease_seconds=120, poll_interval=0.05)
            warm = submitter.submit(context, [{"prompt": "ITEM warm-up", "subagent_type": "general-purpose"}],
                                    label="warm", known_types=["general-purpose"])
            await worker.run(until_idle=True)  # imports, graph compilation: not what we measure
            batch = submitter.submit(context, [{"prompt": f"ITEM {n}", "subagent_type": "general-purpose"}
                                               for n in range(items)], label="bench", known_types=["general-purpose"])
            start = time.perf_counter()
            await worker.run(until_idle=True)
            elapsed = time.perf_counter() - start
            assert submitter.status(batch.record.batch_id, "bench").counts.execution["completed"] == items
            assert warm.record.batch_id
        return elapsed


async def queue_overhead(items: int, backend: Callable[[], SqlBackend]) -> tuple[float, float]:
    """(submit ms per item, claim+finish ms per item) with a runner that does nothing."""
    store = BatchStore(backend())
    try:
        specs = [ItemSpec(f"item {n}", "general-purpose") for n in range(items)]
        start = time.perf_counter()
        store.create(user_id="bench", thread_id="t", run_id="r", label="q", model_name=None, items=specs)
        submit_ms = (time.perf_counter() - start) * 1000 / items

        async def noop(item: ClaimedItem) -> SubagentOutcome:
            return SubagentOutcome(f"{item.index}", "general-purpose", "x", "completed", "finished", "", [],
                                   AcceptanceReport(()), None, True)

        worker = BatchWorker(store, noop, concurrency=1, lease_seconds=60, poll_interval=0.01)
        start = time.perf_counter()
        await worker.run(until_idle=True)
        return submit_ms, (time.perf_counter() - start) * 1000 / items
    finally:
        store.close()


async def queue_overheads(items: int) -> None:
    """Print the queue overhead on SQLite, then on a throwaway PostgreSQL (if it can run here)."""
    with tempfile.TemporaryDirectory() as tmp:
        results = {"SQLite": await queue_overhead(items, lambda: SqliteBackend(Path(tmp) / "batches.db"))}
    try:
        with throwaway_cluster() as cluster:
            url = cluster.create_database()
            results["PostgreSQL"] = await queue_overhead(items, lambda: PostgresBackend(url))
    except PostgresUnavailable as exc:
        print(f"PostgreSQL queue: skipped ({exc})")
    for name, (submit_ms, cycle_ms) in results.items():
        print(f"{name + ' queue:':<18} submit {submit_ms:.3f} ms/item (one transaction), "
              f"claim + finish {cycle_ms:.2f} ms/item")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", default="1,4,16")
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    print(f"{args.items} items, model latency {args.latency:g}s per call, 1 model call per item")
    print(f"{'concurrency':>11} {'wall s':>8} {'ideal s':>8} {'items/s':>8} {'speed-up':>9} {'efficiency':>10}")
    base = None
    for level in levels:
        elapsed = await throughput(args.items, args.latency, level)
        base = base or elapsed * levels[0]
        speedup = base / elapsed
        ideal = args.items / level * args.latency
        print(f"{level:>11} {elapsed:>8.2f} {ideal:>8.2f} {args.items / elapsed:>8.1f} {speedup:>8.1f}x "
              f"{speedup / level:>9.0%}")
    await queue_overheads(args.items * 5)


if __name__ == "__main__":
    asyncio.run(main())
