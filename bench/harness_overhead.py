"""Harness overhead per run and per agent step: DeerFlow's run manager vs plain ``create_agent``.

Both sides play the same zero-latency scripted conversation (N tool-calling steps,
then a final answer) on the same kind of ``AsyncSqliteSaver``, with the script parsed
before any timer starts.  Per run, the plain side builds ``create_agent`` (no
middleware, one tool) and invokes it on a new thread; the DeerFlow side calls
``RunManager.start()`` on a warm host and waits: every middleware, the thread state and
its reducers, the event projection and the run records.  Variants are interleaved
over rounds (the order alternating) so machine load hits both alike; each run is timed
in CPU time (``process_time``, all threads) and wall time.  The fixed cost above plain is
the difference of the two sides' whole runs at the smallest N (measured, never an
extrapolated intercept), so it includes building the agent.

    .venv/bin/python bench/harness_overhead.py [--steps 1,10,100] [--rounds 7] [--processes 3]
    .venv/bin/python bench/harness_overhead.py --ab REV [--rounds 4]   # REV's harness vs this checkout's

With ``--ab`` the harness of ``REV`` (any git revision, extracted with ``git archive`` as
``bench/start_ab.py`` does) and this checkout's are measured in one run: each round starts one
fresh process per side (the order alternating), and the table gives each side's ratios to
plain ``create_agent`` measured in that same process, so a before/after compares ratios, not
milliseconds taken at different loads.

Each figure pools the samples of several fresh processes (``--processes``, run one after
another): one process's medians can sit on either side of a goal by a sixth or more, the same
code measured minutes apart (thread placement on two cores, memory layout), so one process is
not a measurement; the line under the table gives the spread of the per-process ratios.

Prints the load average, the commit measured and a markdown table (goal: ratio at most
1.5x at N=10, marginal at most 1.2x, fixed cost at most 20 ms CPU above plain).  When deepagents
is installed (the ``bench`` extra: ``pip install -e '.[bench]'``, which ``make bench`` does), it
is a second peer column: ``create_deep_agent`` (its default middleware: a todo list, files in
the state, a general-purpose subagent, summarization, tool-call patching) with the same model,
tool and saver, built and invoked per run like the plain side.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiosqlite
from langchain.agents import create_agent
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

HERE = Path(__file__).resolve().parent
# This checkout's code, not an installed copy; --ab's child processes name another tree.
sys.path[:0] = [str(HERE), os.environ.get("DEERFLOW_BENCH_HARNESS") or str(HERE.parent / "harness")]
import bench_tools  # noqa: E402
from bench_tools import echo  # noqa: E402

from deerflow.config.loader import load_config  # noqa: E402
from deerflow.config.paths import HomePaths  # noqa: E402
from deerflow.models.script_format import load_script  # noqa: E402
from deerflow.models.scripted import ScriptedChatModel  # noqa: E402

try:
    from deerflow.run_options import RunOptions
    from deerflow.runs.manager import RunManager, RunRequest
except ImportError:  # an --ab base from before issue 21: options were a dict, the manager in runtime/
    from deerflow.runtime.manager import RunManager, RunRequest
    RunOptions = dict

Timed = tuple[float, float]  # (cpu s, wall s)
Samples = dict[tuple[str, int], list[Timed]]


def script(steps: int) -> dict:
    turns = [{"tool_calls": [{"name": "echo", "args": {"text": f"{i:05d}" + "x" * 195}}]} for i in range(steps)]
    return {"name": f"bench-{steps}", "turns": [*turns, {"text": "done"}]}


async def timed(work: Callable[[], Awaitable[None]]) -> Timed:
    cpu, wall = time.process_time(), time.perf_counter()
    await work()
    return time.process_time() - cpu, time.perf_counter() - wall


class Plain:
    """``create_agent`` (or another builder of the same signature) + one tool + ``AsyncSqliteSaver``:
    built and invoked per run; with ``stream_modes``, streamed in those modes (what DeerFlow's run
    does to feed its clients) and every part read, instead of ``ainvoke``."""

    def __init__(self, saver: AsyncSqliteSaver, build: Callable[..., Any] = create_agent, name: str = "plain",
                 stream_modes: list[str] | None = None) -> None:
        self.saver, self.build, self.name, self.stream_modes = saver, build, name, stream_modes
        self.runs = 0

    async def run(self, steps: int) -> Timed:
        model = ScriptedChatModel(bench_tools.SCRIPTS[f"bench-{steps}"])  # parsed before the timer
        self.runs += 1
        cfg: Any = {"configurable": {"thread_id": f"{self.name}-{self.runs}"}, "recursion_limit": 10_000}

        async def work() -> None:
            agent = self.build(model, [echo], checkpointer=self.saver)
            request = {"messages": [{"role": "user", "content": "go"}]}
            if self.stream_modes is None:
                await agent.ainvoke(request, cfg)
                return
            async for _part in agent.astream(request, cfg, stream_mode=self.stream_modes):
                pass

        return await timed(work)


STREAMED = "create_agent streamed"
"""The peer that streams in DeerFlow's modes: the same work as DeerFlow's run minus the harness."""


def stream_modes() -> list[str]:
    """The stream modes DeerFlow's run uses (an --ab base from before they were named: the same four)."""
    try:
        from deerflow.runs.execution import STREAM_MODES
    except ImportError:
        return ["values", "messages", "updates", "custom"]
    return list(STREAM_MODES)


def deep_agents_builder() -> Callable[..., Any] | None:
    """deepagents' ``create_deep_agent``, or None when it is not installed (no column)."""
    try:
        from deepagents import create_deep_agent
    except ImportError:
        return None
    return create_deep_agent


class DeerFlow:
    """A warm run manager; one ``start()`` + ``wait()`` per run, on a new thread."""

    def __init__(self, manager: RunManager) -> None:
        self.manager = manager

    async def run(self, steps: int) -> Timed:
        runs: list[Any] = []

        async def work() -> None:
            live = await self.manager.start(RunRequest(
                prompt="go", options=RunOptions(recursion_limit=10_000, model_name=f"bench-{steps}")))
            finished = await live.wait()
            assert finished.status == "success", finished.error
            runs.append(live.record)

        measured = await timed(work)
        await self.check_every_call_ran(runs[0].thread_id, runs[0].user_id, steps)  # outside the timer
        return measured

    async def check_every_call_ran(self, thread_id: str, user_id: str, steps: int) -> None:
        """Each step's tool call ran and answered with its own text: the harness refused none of them
        (a guard such as ``loop_detection.max_calls_per_tool`` would make later steps cheaper than the
        plain side's, which runs every call)."""
        values = await self.manager.thread_values(thread_id, user_id)
        echoed = [m for m in values.get("messages", []) if getattr(m, "type", "") == "tool"
                  and isinstance(m.content, str) and m.content[:5].isdigit() and m.content.endswith("x" * 195)]
        assert len(echoed) == steps, f"{len(echoed)} of {steps} tool calls ran"


def write_config(home: Path, sizes: list[int]) -> Path:
    models = "".join(f"  - name: bench-{n}\n    use: bench_tools:PreparsedScriptedModel\n"
                     f"    script_key: bench-{n}\n" for n in sizes)
    cfg = home / "config.yaml"
    cfg.write_text(f"models:\n{models}tools:\n  - name: echo\n    group: bench\n    use: bench_tools:echo\n"
                   # every step's call runs, as on the plain side (the default stops a tool at 50 calls a run)
                   f"loop_detection:\n  max_calls_per_tool: {max(sizes) + 1}\n")
    return cfg


async def measure(sizes: list[int], rounds: int) -> Samples:
    """Samples per (side, steps), variants interleaved over rounds."""
    for n in sizes:
        bench_tools.SCRIPTS[f"bench-{n}"] = load_script(script(n))
    samples: dict[tuple[str, int], list[Timed]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        conn = await aiosqlite.connect(str(home / "plain.db"))
        saver = AsyncSqliteSaver(conn)
        await saver.setup()
        manager = await RunManager.open(loaded=load_config(write_config(home, sizes), env={}),
                                        home=HomePaths(home / "home"))
        try:
            sides: dict[str, Plain | DeerFlow] = {"create_agent": Plain(saver),
                                                  STREAMED: Plain(saver, name="streamed", stream_modes=stream_modes())}
            if (deep := deep_agents_builder()) is not None:
                sides["deepagents"] = Plain(saver, deep, "deep")
            sides["DeerFlow"] = DeerFlow(manager)
            for side in sides.values():  # warm-up: first-use imports and caches, untimed
                await side.run(min(sizes))
            for r in range(rounds):
                order = list(sides.items()) if r % 2 == 0 else list(reversed(sides.items()))
                for n in sizes:
                    for name, side in order:
                        samples.setdefault((name, n), []).append(await side.run(n))
        finally:
            await manager.close()
            await conn.close()
    return samples


def child(sizes: list[int], rounds: int, output: str, *, what: str, harness: str | None = None) -> Any:
    """Run this script in a fresh process (``output``: ``--samples`` or ``--json``), with ``harness``'s
    code when given; what it printed last, parsed."""
    env = {**os.environ, "DEERFLOW_BENCH_HARNESS": harness} if harness else None
    done = subprocess.run([sys.executable, __file__, "--steps", ",".join(map(str, sizes)), "--rounds", str(rounds),
                           output], env=env, capture_output=True, text=True, timeout=3600, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{what} failed: {done.stderr.strip()[-800:]}")
    return json.loads(done.stdout.splitlines()[-1])


def measure_in_processes(sizes: list[int], rounds: int, processes: int) -> tuple[Samples, list[dict[str, float]]]:
    """:func:`measure` in ``processes`` fresh processes, one after another: the pooled samples,
    and each process's own ratios (:func:`ratios`) to show how far one process alone can stray."""
    pooled: Samples = {}
    each: list[dict[str, float]] = []
    for _ in range(processes):
        got: Samples = {(side, int(n)): [(cpu, wall) for cpu, wall in values]
                        for side, n, values in child(sizes, rounds, "--samples", what="a measuring process")}
        for key, values in got.items():
            pooled.setdefault(key, []).extend(values)
        each.append(ratios(got, sizes))
    return pooled, each


def spread(each: list[dict[str, float]], sizes: list[int]) -> str:
    """One line: the per-process range of the goal ratios (the table's medians pool all processes)."""
    def span(key: str, fmt: str) -> str:
        values = sorted(e[key] for e in each)
        return fmt.format(values[0]) + (" – " + fmt.format(values[-1]) if len(values) > 1 else "")

    parts = [f"DeerFlow ÷ create_agent at N={n} {span(f'N={n}', '{:.2f}×')}" for n in sizes if n == 10]
    parts.append(f"fixed cost above plain {span('fixed_ms', '+{:.1f}')} ms")
    return (f"Pooled over {len(each)} processes; one process alone gave " + ", ".join(parts) + ".")


def commit() -> str:
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True,
                             check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=HERE,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return sha + ("+changes" if dirty else "")


def table(samples: dict[tuple[str, int], list[Timed]], sizes: list[int]) -> list[str]:
    """The markdown table of the medians: whole runs, per step, marginal step, fixed cost above plain.

    The fixed cost is measured, not extrapolated: a whole run at the smallest N on each
    side, DeerFlow minus plain (an intercept through noisy medians can come out negative).
    """
    med = {key: (statistics.median(s[0] for s in v) * 1000, statistics.median(s[1] for s in v) * 1000)
           for key, v in samples.items()}
    lo, hi = min(sizes), max(sizes)
    peers = [p for p in ("create_agent", STREAMED, "deepagents") if (p, lo) in med]
    lines = ["| measure (ms, CPU / wall) | " + " | ".join(peers) + " | DeerFlow | "
             + "".join(f"DeerFlow ÷ {p} (CPU) | " for p in peers) + "goal |",
             "|---|" + "---|" * (len(peers) * 2 + 2)]

    def row(label: str, figures: dict[str, tuple[float, float]], goal: str, fmt: str = "{:.1f}") -> str:
        cells = [f"{fmt.format(figures[s][0])} / {fmt.format(figures[s][1])}" for s in [*peers, "DeerFlow"]]
        ratios = [f"{figures['DeerFlow'][0] / figures[p][0]:.2f}×" for p in peers]
        return f"| {label} | " + " | ".join(cells + ratios) + f" | {goal} |"

    for n in sizes:
        lines.append(row(f"whole run, N={n}", {s: med[(s, n)] for s in [*peers, "DeerFlow"]},
                         "≤ 1.5×" if n == 10 else ""))
    if hi > lo:
        marg = {s: ((med[(s, hi)][0] - med[(s, lo)][0]) / (hi - lo), (med[(s, hi)][1] - med[(s, lo)][1]) / (hi - lo))
                for s in [*peers, "DeerFlow"]}
        lines.append(row(f"marginal per extra step (N={lo}→{hi})", marg, "≤ 1.2× (create_agent)", "{:.2f}"))
    (pc, pw), (dc, dw) = med[("create_agent", lo)], med[("DeerFlow", lo)]
    lines.append(f"| fixed cost above plain (whole run at N={lo}, DeerFlow − create_agent) | "
                 + "| " * len(peers) + f"+{dc - pc:.1f} / +{dw - pw:.1f} | " + "| " * len(peers) + "≤ +20 ms CPU |")
    return lines


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def ratios(samples: dict[tuple[str, int], list[Timed]], sizes: list[int]) -> dict[str, float]:
    """One process's CPU figures relative to its own plain side: per N, marginal, fixed cost (ms)."""
    med = {key: statistics.median(s[0] for s in v) * 1000 for key, v in samples.items()}
    lo, hi = min(sizes), max(sizes)
    out = {f"N={n}": med[("DeerFlow", n)] / med[("create_agent", n)] for n in sizes}
    if hi > lo:
        out["marginal"] = ((med[("DeerFlow", hi)] - med[("DeerFlow", lo)])
                           / (med[("create_agent", hi)] - med[("create_agent", lo)]))
    out["fixed_ms"] = med[("DeerFlow", lo)] - med[("create_agent", lo)]
    return out


def ab(base: str, sizes: list[int], rounds: int) -> None:
    """``--ab``: ``base``'s harness and this checkout's, one fresh process per side per round."""
    from start_ab import extract

    with tempfile.TemporaryDirectory() as tmp:
        sides = {f"before `{base}`": str(extract(base, Path(tmp))), f"after `{commit()}`": str(HERE.parent / "harness")}
        rows: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
        before = load()
        for r in range(rounds):
            for name, harness in list(sides.items())[:: 1 if r % 2 == 0 else -1]:
                rows[name].append(child(sizes, 3, "--json", what=name, harness=harness))
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {before} before, {load()} after; "
          f"{rounds} rounds × 3 interleaved, one process per side per round\n")
    keys = list(next(iter(rows.values()))[0])
    print("| side | " + " | ".join(k if k != "fixed_ms" else "fixed cost above plain (ms CPU)" for k in keys) + " |")
    print("|---|" + "---|" * len(keys))
    for name, got in rows.items():
        cells = [statistics.median(g[k] for g in got) for k in keys]
        print(f"| {name} | " + " | ".join(f"+{c:.1f}" if k == "fixed_ms" else f"{c:.2f}×"
                                          for k, c in zip(keys, cells, strict=True)) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="1,10,100")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--processes", type=int, default=3, help="fresh processes whose samples are pooled")
    parser.add_argument("--ab", metavar="REV", help="compare REV's harness with this checkout's, in one run")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # --ab's child processes
    parser.add_argument("--samples", action="store_true", help=argparse.SUPPRESS)  # --processes' children
    args = parser.parse_args()
    sizes = sorted({int(s) for s in args.steps.split(",")})
    if args.ab:
        ab(args.ab, sizes, args.rounds)
        return
    if args.json:
        print(json.dumps(ratios(asyncio.run(measure(sizes, args.rounds)), sizes)))
        return
    if args.samples:
        print(json.dumps([[side, n, values] for (side, n), values in asyncio.run(measure(sizes, args.rounds)).items()]))
        return
    before = load()
    samples, each = measure_in_processes(sizes, args.rounds, args.processes)
    print(f"commit {commit()}, {time.strftime('%Y-%m-%d')}, load average {before} before, {load()} after, "
          f"{args.processes} processes × {args.rounds} rounds interleaved\n")
    print("\n".join([*table(samples, sizes), "", spread(each, sizes)]))


if __name__ == "__main__":
    main()
