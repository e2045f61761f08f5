"""Start-up cost: imports, ``deerflow --help``, an offline ``deerflow run "hi"``, each in a new process.

Every measure runs in a fresh interpreter on this checkout's code (its ``harness`` and
``extension`` first on ``PYTHONPATH``, the caller's path after), the measures interleaved
over rounds so load hits them alike; each is reported as the median of CPU time (the
child's user + system, from ``getrusage``) and wall time.  The import lines also give
Python's own ``-X importtime`` cumulative figure for the module.  The offline run uses a
fresh ``DEERFLOW_HOME`` and no config (the embedded offline model), so nothing is
reused from an earlier run.

Bytecode is cached as for an installed package (``pip`` compiles it at install): the
children write ``.pyc`` files to a private ``PYTHONPYCACHEPREFIX`` (``PYTHONDONTWRITEBYTECODE``
is dropped), and one unrecorded warm-up round compiles them, so no measure pays for
compiling this checkout's sources (which, with bytecode writing off, every process did).

    .venv/bin/python bench/startup.py [--rounds 5]

Goals: ``import deerflow.cli`` ≤ 150 ms cumulative, ``deerflow --help`` ≤ 0.3 s, an offline
``deerflow run "hi"`` ≤ 1.5 s wall on an idle machine.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
Sample = tuple[float, float, float | None]  # (cpu s, wall s, importtime cumulative s)


def child_env(home: Path, pycache: Path) -> dict[str, str]:
    path = [str(REPO / "harness"), str(REPO / "extension"), str(REPO), os.environ.get("PYTHONPATH", "")]
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DEERFLOW_", "OPENAI_", "LANGSMITH_")) and k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPATH": os.pathsep.join(p for p in path if p), "DEERFLOW_HOME": str(home),
            "DEERFLOW_NOTEBOOK_ROOT": str(home), "PYTHONPYCACHEPREFIX": str(pycache)}


def run(argv: list[str], env: dict[str, str], cwd: Path, module: str | None = None) -> Sample:
    """CPU, wall and (for an import) ``-X importtime`` cumulative seconds of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=300, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    cumulative = None
    if module is not None:
        found = re.search(rf"^import time:\s+\d+ \|\s+(\d+) \| {re.escape(module)}$", done.stderr, re.MULTILINE)
        cumulative = int(found.group(1)) / 1e6 if found else None
    return cpu, wall, cumulative


def measures() -> dict[str, tuple[list[str], str | None]]:
    py = sys.executable
    script = Path(py).with_name("deerflow")
    cli = [str(script)] if script.exists() else [py, "-m", "deerflow.cli"]
    return {
        "`import deerflow.cli`": ([py, "-X", "importtime", "-c", "import deerflow.cli"], "deerflow.cli"),
        "`deerflow --help`": ([*cli, "--help"], None),
        "`import deerflow.client`": ([py, "-X", "importtime", "-c", "import deerflow.client"], "deerflow.client"),
        # What DeerFlow builds on, for scale: the agent stack with LangGraph's SQLite checkpointer (what any
        # run imports), and LangSmith's run trees (reached through langchain_core.tracers).
        "third-party floor: `import langchain.agents` + LangGraph's SQLite checkpointer":
            ([py, "-c", "import langchain.agents, langgraph.checkpoint.sqlite.aio"], None),
        "of which `import langsmith.run_trees`": ([py, "-c", "import langsmith.run_trees"], None),
        "`deerflow run \"hi\"` (offline model, new home)": ([*cli, "run", "hi"], None),
    }


def measure(rounds: int) -> dict[str, list[Sample]]:
    samples: dict[str, list[Sample]] = {}
    items = list(measures().items())
    with tempfile.TemporaryDirectory() as tmp:
        pycache = Path(tmp) / "pycache"
        for r in range(-1, rounds):  # round -1 compiles the bytecode and is not recorded
            for name, (argv, module) in items if r % 2 == 0 else reversed(items):
                home = Path(tmp) / f"home-{r}-{len(samples.get(name, []))}-{abs(hash(name))}"
                home.mkdir()
                sample = run(argv, child_env(home, pycache), home, module)
                if r >= 0:
                    samples.setdefault(name, []).append(sample)
    return samples


def table(samples: dict[str, list[Sample]]) -> list[str]:
    goals = {"`import deerflow.cli`": "≤ 150 ms cumulative", "`deerflow --help`": "≤ 0.3 s",
             "`deerflow run \"hi\"` (offline model, new home)": "≤ 1.5 s wall, idle machine"}
    lines = ["| measure (median) | CPU | wall | `-X importtime` cumulative | goal |", "|---|---|---|---|---|"]
    for name, values in samples.items():
        cpu = statistics.median(v[0] for v in values)
        wall = statistics.median(v[1] for v in values)
        cums = [v[2] for v in values if v[2] is not None]
        cum = f"{statistics.median(cums) * 1000:,.0f} ms" if cums else ""
        lines.append(f"| {name} | {cpu:.2f} s | {wall:.2f} s | {cum} | {goals.get(name, '')} |")
    return lines


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    before = load()
    samples = measure(args.rounds)
    print(f"load average {before} before, {load()} after, {args.rounds} rounds interleaved\n")
    print("\n".join(table(samples)))


if __name__ == "__main__":
    main()
