"""The user's notebooks: what reading one as a run's context costs, and what jupyter-collaboration costs.

* context (default) — :func:`deerflow.notebooks.service.notebook_context` over a
  500-cell notebook with large outputs (every cell: 20 source lines and a 40 kB text
  output; every tenth an error with a 60-line traceback; every fifth a 200 kB PNG), as
  a ``%%deerflow`` run at the bottom of it builds it: read through the notebook root,
  bounded to 8k tokens, fenced.  Goal: under 20 ms added to a run (issue 26).
  Rows: the first run as it was before the light parse (full JSON parse into nbformat
  nodes), the first run in a version no process has read (read from the file's end:
  :mod:`deerflow.notebooks.tail`), the same with a calling cell not saved yet (the end
  parsed, the rest of the file searched for its id), the first run in a new process whose version a pre-warm or an earlier read
  kept on disk (``$DEERFLOW_HOME/cache/notebooks``), the first run after the notebook was opened or saved (pre-warmed: the
  server's contents events), the same through a ContentsManager, a rerun in the unchanged
  notebook, and the pre-warm itself (off the run path).  ``bench/perf_doc.py --only
  notebook`` writes the table into docs/PERFORMANCE.md.
* ``--collab``: jupyter server start-up to ready (``/api/status``) and the server's RSS
  with and without the jupyter-collaboration server extensions (jupyter_server_ydoc +
  fileid), interleaved, and their import time beyond jupyter_server's.  Run it with a
  Python that has jupyter-collaboration installed (its extensions are switched on and
  off by flags, so both sides run the same packages).

Run::

    .venv/bin/python bench/notebook_context.py [--n 30] [--output-kb 40] [--png-kb 200]
    .venv-collab/bin/python bench/notebook_context.py --collab --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import importlib.util
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from timing import summary, timings

from deerflow.notebooks.access import FileNotebookAccess, NotebookAccess
from deerflow.notebooks.contents import ContentsNotebookAccess
from deerflow.notebooks.service import CONTEXT_TOKENS, NotebookContext, notebook_context

ROOT = Path(__file__).resolve().parents[1]


def big_notebook(cells: int = 500, *, output_kb: int = 40, png_kb: int = 200) -> nbformat.NotebookNode:
    """A long analysis notebook with heavy outputs (see the module docstring)."""
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(png_kb * 1000)).decode()
    nb = nbformat.v4.new_notebook()
    for i in range(cells):
        source = "\n".join(f"frame_{i}['col_{j}'] = frame_{i}['col_{j}'].rolling(7).mean()  # step {j}"
                           for j in range(20))
        cell = nbformat.v4.new_code_cell(source, id=f"c{i}")
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=("row value 12345.678\n" * output_kb * 50))]
        if i % 10 == 0:
            cell.outputs.append(nbformat.v4.new_output(
                "error", ename="KeyError", evalue=f"'col_{i}'",
                traceback=[f"  File \"<cell {i}>\", line {k}, in <module>" for k in range(60)]))
        if i % 5 == 0 and png_kb:
            cell.outputs.append(nbformat.v4.new_output("display_data", data={"image/png": png, "text/plain": "<Figure>"}))
        nb.cells.append(cell)
    nb.cells.append(nbformat.v4.new_code_cell("%%deerflow\nWhy does the cell above fail?", id="magic"))
    return nb


def _median_p95(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered) * 1000, ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))] * 1000


async def settled(access: NotebookAccess) -> None:
    """Wait for what a run left to do in the background (render and keep the rest, or pre-warm)."""
    await asyncio.gather(*(access._keeping or ()))
    await access.warming("big.ipynb")


def measure(n: int = 30, output_kb: int = 40, png_kb: int = 200) -> list[str]:
    """The context figures as a markdown table (``bench/perf_doc.py`` puts it in PERFORMANCE.md)."""
    from jupyter_server.services.contents.filemanager import AsyncFileContentsManager

    from deerflow.notebooks.digest import NotebookDigest, build_context

    with tempfile.TemporaryDirectory() as tmp:
        nbformat.write(big_notebook(output_kb=output_kb, png_kb=png_kb), Path(tmp) / "big.ipynb")
        size = (Path(tmp) / "big.ipynb").stat().st_size
        loop = asyncio.new_event_loop()

        def build(access: NotebookAccess, cell_id: str = "magic") -> NotebookContext:
            return loop.run_until_complete(notebook_context(access, "big.ipynb", cell_id=cell_id))

        def full_parse() -> NotebookContext:  # what the first run did before the light parse
            nb = loop.run_until_complete(FileNotebookAccess(tmp).read("big.ipynb")).nb
            return build_context(NotebookDigest.from_nodes(nb), "big.ipynb", "magic", None, CONTEXT_TOKENS)

        def warmed() -> NotebookAccess:
            access = FileNotebookAccess(tmp)
            loop.run_until_complete(access.prewarm("big.ipynb"))
            return access

        def served() -> NotebookAccess:  # the server's access: opening the notebook pre-warms it
            manager = AsyncFileContentsManager(root_dir=tmp)
            access = ContentsNotebookAccess(manager)
            access.watch()

            async def open_it() -> None:
                await manager.get("big.ipynb", content=False)
                await asyncio.sleep(0)  # the contents event's listener
                await access.warming("big.ipynb")
            loop.run_until_complete(open_it())
            return access

        store = Path(tempfile.mkdtemp(prefix="deerflow-home-")) / "cache" / "notebooks"  # not under the root

        def cold(access: NotebookAccess, cell_id: str = "magic") -> float:
            """The run's part only: the rest of the cells, rendered and kept after it (off the run
            path), are waited for outside the timing."""
            start = time.perf_counter()
            build(access, cell_id)
            elapsed = time.perf_counter() - start
            loop.run_until_complete(settled(access))
            return elapsed

        def new_process() -> NotebookAccess:  # the CLI, a kernel's client, a restarted server: only the store
            access = FileNotebookAccess(tmp)
            access.keep_in(store)
            return access

        try:
            first = FileNotebookAccess(tmp)
            found = build(first)
            loop.run_until_complete(settled(first))
            rounds = max(3, n // 5)
            rows = [
                ("first run, before (full JSON parse + nbformat nodes)", timings(full_parse, rounds)),
                ("first run, a version no process has read yet (read from the file's end)",
                 [cold(FileNotebookAccess(tmp)) for _ in range(max(rounds, n // 2))]),
                ("the same, its calling cell not saved yet (the end parsed, the rest searched for its id)",
                 [cold(FileNotebookAccess(tmp), "not-saved") for _ in range(rounds)]),
            ]
            loop.run_until_complete(new_process().prewarm("big.ipynb"))  # what the server does on open/save
            rows.append(("first run in another process, the version kept on disk by a pre-warm or an "
                         "earlier read ($DEERFLOW_HOME/cache/notebooks)", timings(lambda: build(new_process()), n)))
            prewarm = []
            for _ in range(rounds):  # off the run path: when the server opens or saves the notebook
                start = time.perf_counter()
                access = warmed()
                prewarm.append(time.perf_counter() - start)
            firsts = []
            for _ in range(n):
                access = warmed()
                start = time.perf_counter()
                build(access)
                firsts.append(time.perf_counter() - start)
            rows.append(("first run after the notebook was opened or saved (pre-warmed)", firsts))
            server_firsts = []
            for _ in range(rounds):
                access = served()
                start = time.perf_counter()
                build(access)
                server_firsts.append(time.perf_counter() - start)
            rows.append(("the same through a ContentsManager, warmed by its open event", server_firsts))
            rerun = warmed()
            build(rerun)
            rows.append(("rerun, notebook unchanged (context cache: one stat)", timings(lambda: build(rerun), n)))
            rows.append(("pre-warm itself (off the run path)", prewarm))
        finally:
            loop.close()
            shutil.rmtree(store.parents[1], ignore_errors=True)
    lines = [f"Notebook: 500 cells, {output_kb} kB text output each, a {png_kb} kB PNG every 5th, "
             f"{size / 1e6:.1f} MB on disk; {found.note}, {len(found.text):,} characters.", "",
             "| context of the 500-cell notebook | median | p95 | goal |", "|---|---|---|---|"]
    for label, samples in rows:
        median, p95 = _median_p95(samples)
        goal = "" if label.startswith(("pre-warm", "first run, before")) else \
            ("< 20 ms: met" if median < 20 else "< 20 ms: **not met**")
        lines.append(f"| {label} | {median:,.2f} ms | {p95:,.2f} ms | {goal} |")
    return lines


def startup(extra_args: list[str], workdir: Path) -> tuple[float, float]:
    """Seconds from launching ``jupyter server`` to a 200 from /api/status, and its RSS (MB) after
    a notebook was fetched (what opening it in JupyterLab does first)."""
    # tests/ is put on the path by bench_collab
    import httpx

    from fixtures.jupyter_process import running_jupyter

    start = time.perf_counter()
    with running_jupyter(workdir, args=extra_args) as server:
        elapsed = time.perf_counter() - start
        httpx.get(f"{server.url}api/status", headers=server.headers, timeout=30).raise_for_status()
        httpx.get(f"{server.url}api/contents/work.ipynb", headers=server.headers, timeout=30).raise_for_status()
        rss = rss_mb(server.process.pid)
    return elapsed, rss


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def bench_collab(rounds: int) -> None:
    if importlib.util.find_spec("jupyter_server_ydoc") is None:
        sys.exit("--collab: jupyter-collaboration is not importable")
    sys.path.insert(0, str(ROOT / "tests"))
    with tempfile.TemporaryDirectory() as tmp:
        nbformat.write(big_notebook(cells=20, png_kb=0), Path(tmp) / "work.ipynb")
        names = ("jupyter_server_fileid", "jupyter_server_ydoc")
        without = [f"--ServerApp.jpserver_extensions={name}=False" for name in names]
        collab = [f"--ServerApp.jpserver_extensions={name}=True" for name in names]
        collab.append(f"--BaseFileIdManager.db_path={Path(tmp) / 'file_id.db'}")
        plain, with_collab = [], []
        for _ in range(rounds):  # interleaved: this kind of machine is often loaded
            plain.append(startup(without, Path(tmp)))
            with_collab.append(startup(collab, Path(tmp)))
    for label, samples in (("without collaboration", plain), ("with collaboration", with_collab)):
        print(f"server start, {label:24} {summary([s for s, _ in samples])}; "
              f"RSS median {statistics.median(r for _, r in samples):.1f} MB")
    code = ("import time, jupyter_server.serverapp, pycrdt, jupyter_ydoc; t = time.perf_counter(); "
            "import jupyter_server_ydoc.app, jupyter_server_fileid.extension; print(time.perf_counter() - t)")
    extra = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                  timeout=120).stdout) for _ in range(rounds)]
    print(f"import beyond jupyter_server + pycrdt {summary(extra)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=30)
    parser.add_argument("--output-kb", type=int, default=40)
    parser.add_argument("--png-kb", type=int, default=200)
    parser.add_argument("--collab", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print("\n".join(measure(args.n, args.output_kb, args.png_kb)))
    if args.collab:
        bench_collab(args.rounds)


if __name__ == "__main__":
    main()
