"""20 concurrent runs over two servers on one PostgreSQL, beside one server on SQLite, in one run.

Starts a throwaway PostgreSQL cluster (``tests/fixtures/postgres.py``, unix socket, durability
turned back on as in ``bench/storage_backends.py``) and three real ``jupyter server`` processes
with the DeerFlow extension, each with its own ``DEERFLOW_HOME`` and the offline scripted model
(one tool call, then an answer; no latency):

* **PG ×2** — two servers whose config says ``storage.url: postgresql://…`` (one database, shared);
* **SQLite** — one server on the default storage (``$DEERFLOW_HOME/checkpoints.db``).

Each round fires a burst of ``--runs`` concurrent ``POST …/threads/{id}/runs/wait``
(``if_not_exists: create``, a new thread per run) on each setup in turn — PG ×2 split evenly over
the two servers, SQLite on its one server, and (unless ``--no-single``) the same burst on one PG
server alone — with the order rotated every round so the machine's load drift hits all alike.
Reported per setup: per-run latency p50 / p95 over every round, the burst's wall time (median of
rounds), server CPU per run (the jupyter processes' user + system, and the PostgreSQL cluster's:
postmaster, its exited children and its live backends) and every failure (there should be none).

    .venv/bin/python bench/storage_concurrency.py [--runs 20] [--rounds 5]

Every server and the cluster are stopped on the way out (SIGTERM, SIGKILL after a grace
period), on an exception, Ctrl-C or SIGTERM alike.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "tests"))
from fixtures.jupyter_process import JupyterProcess, running_jupyter  # noqa: E402
from fixtures.postgres import PostgresCluster, PostgresUnavailable, throwaway_cluster  # noqa: E402

MODEL = """
models:
  - name: quick
    use: deerflow.models.scripted:ScriptedChatModel
    script: |
      turns:
        - tool_calls: [{name: ls, args: {path: /mnt/user-data/workspace}}]
        - text: done
memory:
  enabled: false
"""


@dataclass
class Setup:
    """One side of the comparison: the servers a burst is spread over, and what it measured."""

    name: str
    servers: list[JupyterProcess]
    latencies: list[float] = field(default_factory=list)
    walls: list[float] = field(default_factory=list)
    cpu: float = 0.0  # seconds, over every burst
    runs: int = 0
    failures: list[str] = field(default_factory=list)


def body() -> str:
    return json.dumps({"assistant_id": "lead_agent", "if_not_exists": "create",
                       "input": {"messages": [{"role": "user", "content": "go"}]},
                       "config": {"configurable": {"model_name": "quick"}}})


def proc_cpu(pid: int, *, children: bool = False) -> float:
    """User + system CPU seconds of ``pid`` (plus its reaped children's with ``children``), from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if children else 0)
    return ticks / os.sysconf("SC_CLK_TCK")


def cluster_cpu(cluster: PostgresCluster) -> float:
    """CPU seconds of the PostgreSQL cluster so far: the postmaster, its reaped and its live children."""
    try:
        postmaster = int((cluster.data_dir / "postmaster.pid").read_text().split()[0])
        live = Path(f"/proc/{postmaster}/task/{postmaster}/children").read_text().split()
    except (OSError, ValueError, IndexError):
        return 0.0
    return proc_cpu(postmaster, children=True) + sum(proc_cpu(int(pid)) for pid in live)


def setup_cpu(setup: Setup, cluster: PostgresCluster | None) -> float:
    servers = sum(proc_cpu(s.process.pid, children=True) for s in setup.servers)
    return servers + (cluster_cpu(cluster) if cluster is not None else 0.0)


async def one_run(client: httpx.AsyncClient, server: JupyterProcess, setup: Setup) -> None:
    thread = f"bench-{uuid.uuid4().hex[:12]}"
    started = time.perf_counter()
    try:
        res = await client.post(f"{server.api}/threads/{thread}/runs/wait", content=body(),
                                headers=server.headers)
        elapsed = time.perf_counter() - started
        values = res.json() if res.status_code == 200 else None
        answer = (values or {}).get("messages", [{}])[-1].get("content") if isinstance(values, dict) else None
        if res.status_code != 200 or "__error__" in values or answer != "done":
            setup.failures.append(f"{server.url} {thread}: HTTP {res.status_code} {res.text[:300]}")
            return
    except (httpx.HTTPError, ValueError) as exc:
        setup.failures.append(f"{server.url} {thread}: {type(exc).__name__}: {exc}")
        return
    setup.latencies.append(elapsed)


async def burst(client: httpx.AsyncClient, setup: Setup, runs: int, cluster: PostgresCluster | None) -> None:
    """``runs`` concurrent runs spread round-robin over the setup's servers."""
    cpu = setup_cpu(setup, cluster)
    started = time.perf_counter()
    await asyncio.gather(*(one_run(client, setup.servers[n % len(setup.servers)], setup) for n in range(runs)))
    setup.walls.append(time.perf_counter() - started)
    setup.cpu += setup_cpu(setup, cluster) - cpu
    setup.runs += runs


async def measure(setups: list[tuple[Setup, PostgresCluster | None]], runs: int, rounds: int) -> None:
    limits = httpx.Limits(max_connections=4 * runs, max_keepalive_connections=4 * runs)
    async with httpx.AsyncClient(timeout=300, limits=limits) as client:
        warm = [Setup("warm-up", s.servers) for s, _ in setups]
        for w in warm:  # first-use imports, schema creation, caches — not measured
            await burst(client, w, 2 * len(w.servers), None)
            for failure in w.failures:
                print(f"warm-up failure: {failure}")
        for r in range(rounds):
            order = setups[r % len(setups):] + setups[:r % len(setups)]
            for setup, cluster in order:
                await burst(client, setup, runs, cluster)
            print(f"round {r + 1}/{rounds}: " + ", ".join(f"{s.name} {s.walls[-1]:.2f} s" for s, _ in order),
                  flush=True)


def ms(samples: list[float], q: float) -> str:
    if not samples:
        return "-"
    ordered = sorted(samples)
    return f"{ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000:.0f}"


def report(setups: list[Setup], runs: int, rounds: int) -> list[str]:
    lines = [f"{runs} concurrent runs per burst, {rounds} rounds (a new thread per run, scripted model: "
             "one tool call + answer)", "",
             "| setup | run p50 ms | run p95 ms | burst wall s (median) | CPU per run ms | failures |",
             "|---|---|---|---|---|---|"]
    for s in setups:
        wall = f"{statistics.median(s.walls):.2f}" if s.walls else "-"
        cpu = f"{s.cpu / s.runs * 1000:.0f}" if s.runs else "-"
        lines.append(f"| {s.name} | {ms(s.latencies, 0.5)} | {ms(s.latencies, 0.95)} | {wall} | {cpu} "
                     f"| {len(s.failures)} of {s.runs} |")
    return lines


def server_env(work: Path, name: str, storage_url: str | None) -> dict[str, str]:
    """A server's own home and config (``storage.url`` when given), running this checkout's code."""
    root = work / name
    root.mkdir()
    config = MODEL + (f"storage:\n  url: {json.dumps(storage_url)}\n" if storage_url else "")
    (root / "config.yaml").write_text(config)
    path = [str(HERE), str(REPO / "harness"), str(REPO / "extension"), str(REPO), str(REPO / "tests"),
            os.environ.get("PYTHONPATH", "")]
    return {"DEERFLOW_HOME": str(root / "home"), "DEERFLOW_CONFIG": str(root / "config.yaml"),
            "PYTHONPATH": os.pathsep.join(p for p in path if p), "OPENAI_API_KEY": ""}


def interrupted(signum: int, frame: object) -> None:
    """SIGTERM unwinds like Ctrl-C, so every ``finally`` stops what it started."""
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="concurrent runs per burst")
    parser.add_argument("--rounds", type=int, default=5, help="bursts per setup, interleaved")
    parser.add_argument("--no-single", action="store_true", help="skip the one-server PostgreSQL burst")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, interrupted)
    from storage_backends import durable

    before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    with ExitStack() as stack:
        try:
            cluster = stack.enter_context(throwaway_cluster())
        except PostgresUnavailable as exc:
            print(f"PostgreSQL unavailable here: {exc}")
            return 1
        durable(cluster.url())
        url = cluster.create_database()
        work = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        servers = {}
        for name, storage in (("pg-a", url), ("pg-b", url), ("sqlite", None)):
            (work / f"{name}-root").mkdir()
            servers[name] = stack.enter_context(
                running_jupyter(work / f"{name}-root", env=server_env(work, name, storage), timeout=120))
        setups = [(Setup("PostgreSQL, 2 servers", [servers["pg-a"], servers["pg-b"]]), cluster),
                  (Setup("SQLite, 1 server", [servers["sqlite"]]), None)]
        if not args.no_single:
            setups.append((Setup("PostgreSQL, 1 server", [servers["pg-a"]]), cluster))
        asyncio.run(measure(setups, args.runs, args.rounds))
    print(f"\nload average {before} before, {' '.join(f'{x:.2f}' for x in os.getloadavg())} after "
          f"({os.cpu_count()} CPUs)\n")
    print("\n".join(report([s for s, _ in setups], args.runs, args.rounds)))
    failures = [f"{s.name}: {f}" for s, _ in setups for f in s.failures]
    for failure in failures:
        print(f"FAILED {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
