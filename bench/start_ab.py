"""A run's fixed cost at two commits, side by side: ``RunManager.start()`` and a whole 1-step run.

The harness of ``--base`` (any git revision) is extracted with ``git archive`` into a
temporary directory; this checkout's harness is the other side.  Each round starts one
fresh process per side (the order alternating), which opens a warm host, plays the same
pre-parsed 1-step script a few times untimed, then times ``--runs`` runs on new threads:
CPU time (``process_time``) spent inside ``start()`` and for the whole run, and wall
time.  Medians over rounds; the load average is printed around the measurement.

    .venv/bin/python bench/start_ab.py --base 8a6aa71 [--rounds 5] [--runs 20]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

CHILD = r'''
import asyncio, json, sys, tempfile, time
from pathlib import Path
import bench_tools
from deerflow.config.loader import load_config
from deerflow.config.paths import HomePaths
from deerflow.models.script_format import load_script
from deerflow.run_options import RunOptions
from deerflow.runs.manager import RunManager, RunRequest

async def main(runs):
    bench_tools.SCRIPTS["bench-1"] = load_script(
        {"name": "bench-1", "turns": [{"tool_calls": [{"name": "echo", "args": {"text": "x"}}]}, {"text": "done"}]})
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "config.yaml"
        cfg.write_text("models:\n  - name: bench-1\n    use: bench_tools:PreparsedScriptedModel\n"
                       "    script_key: bench-1\ntools:\n  - name: echo\n    group: bench\n    use: bench_tools:echo\n")
        manager = await RunManager.open(loaded=load_config(cfg, env={}), home=HomePaths(Path(tmp) / "home"))
        try:
            async def one():
                cpu, wall = time.process_time(), time.perf_counter()
                live = await manager.start(RunRequest(prompt="go", options=RunOptions(model_name="bench-1")))
                start_cpu = time.process_time() - cpu
                finished = await live.wait()
                assert finished.status == "success", finished.error
                return start_cpu, time.process_time() - cpu, time.perf_counter() - wall
            for _ in range(3):
                await one()
            samples = [await one() for _ in range(runs)]
        finally:
            await manager.close()
    print(json.dumps([statistics.median(s[i] for s in samples) for i in range(3)]))

import statistics
asyncio.run(main(int(sys.argv[1])))
'''


def side(harness: Path, runs: int) -> list[float]:
    path = [str(HERE), str(harness), str(REPO / "extension"), str(REPO)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    done = subprocess.run([sys.executable, "-c", CHILD, str(runs)], env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    if done.returncode != 0:
        raise SystemExit(f"run on {harness} failed: {done.stderr.strip()[-800:]}")
    return json.loads(done.stdout.splitlines()[-1])


def extract(rev: str, into: Path) -> Path:
    """``rev``'s ``harness/`` and ``skills/`` under ``into``: the harness finds its public skills next to
    itself (``skills/public``), so without them the base side would run with no skills at all (no
    skills view, no skills in the prompt) and look cheaper than it is."""
    archive = into / "base.tar"
    with archive.open("wb") as out:
        subprocess.run(["git", "archive", rev, "harness", "skills"], cwd=REPO, stdout=out, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into / "harness"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    with tempfile.TemporaryDirectory() as tmp:
        sides = {f"base `{args.base}`": extract(args.base, Path(tmp)), "this checkout": REPO / "harness"}
        samples: dict[str, list[list[float]]] = {name: [] for name in sides}
        for r in range(args.rounds):
            for name, harness in list(sides.items())[:: 1 if r % 2 == 0 else -1]:
                samples[name].append(side(harness, args.runs))
    after = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average {before} before, {after} after; {args.rounds} rounds × {args.runs} runs, interleaved\n")
    print("| side | `start()` CPU | whole 1-step run CPU | whole run wall |")
    print("|---|---|---|---|")
    for name, rows in samples.items():
        med = [statistics.median(row[i] for row in rows) * 1000 for i in range(3)]
        print(f"| {name} | {med[0]:.1f} ms | {med[1]:.1f} ms | {med[2]:.1f} ms |")


if __name__ == "__main__":
    main()
