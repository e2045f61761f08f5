"""The user's notebooks: what reading one as a run's context costs, and what jupyter-collaboration costs.

* ``context 500 cells`` — :func:`deerflow.notebooks.service.notebook_context` over a
  500-cell notebook with large outputs (every cell: 20 source lines and a 40 kB text
  output; every tenth an error with a 60-line traceback; every fifth a 200 kB PNG), as
  a ``%%deerflow`` run at the bottom of it builds it: read through the notebook root,
  bounded to 8k tokens, fenced.  Goal: under 20 ms added to a run (issue 26).
  Shown: the first run in the notebook (a fresh host: the file is parsed), a rerun in the
  unchanged notebook (the host's context cache, keyed on the file's signature: one SafeDir
  stat), the same through jupyter_server's ContentsManager, the rendering alone, and the
  file's size.
* ``--collab``: jupyter server start-up to ready (``/api/status``) with and without the
  jupyter-collaboration extensions (jupyter_server_ydoc + fileid), interleaved, and their
  import time beyond jupyter_server's.  Needs jupyter-collaboration importable
  (``PYTHONPATH=DIR`` of a ``pip install --target DIR`` works).

Run::

    .venv/bin/python bench/notebook_context.py [--n 30] [--output-kb 40] [--png-kb 200] [--collab --rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from timing import summary, timings

from deerflow.notebooks.access import FileNotebookAccess, NotebookAccess
from deerflow.notebooks.contents import ContentsNotebookAccess
from deerflow.notebooks.render import CHARS_PER_TOKEN, bounded_cells
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


def bench_context(n: int, output_kb: int, png_kb: int) -> None:
    from jupyter_server.services.contents.filemanager import AsyncFileContentsManager

    with tempfile.TemporaryDirectory() as tmp:
        nbformat.write(big_notebook(output_kb=output_kb, png_kb=png_kb), Path(tmp) / "big.ipynb")
        size = (Path(tmp) / "big.ipynb").stat().st_size
        loop = asyncio.new_event_loop()

        def build(access: NotebookAccess) -> NotebookContext:
            return loop.run_until_complete(notebook_context(access, "big.ipynb", cell_id="magic"))

        try:
            found = build(FileNotebookAccess(tmp))
            cold = timings(lambda: build(FileNotebookAccess(tmp)), max(3, n // 5))  # a fresh host: parses
            warm_access = FileNotebookAccess(tmp)
            build(warm_access)
            warm = timings(lambda: build(warm_access), n)  # the same file again: the cache
            server_access = ContentsNotebookAccess(AsyncFileContentsManager(root_dir=tmp))
            build(server_access)
            server = timings(lambda: build(server_access), n)
        finally:
            loop.close()
        nb = nbformat.read(Path(tmp) / "big.ipynb", as_version=4)
        render = timings(lambda: bounded_cells(nb.cells[:-1], max_chars=CONTEXT_TOKENS * CHARS_PER_TOKEN), n)
    print(f"notebook: 500 cells, {output_kb} kB text output each, {png_kb} kB PNG every 5th, {size / 1e6:.1f} MB; context: {found.note}, {len(found.text)} chars")
    print(f"context, first run in the notebook (read + parse + bound + fence)  {summary(cold)}")
    print(f"context, rerun, notebook unchanged (signature stat, cached)        {summary(warm)}")
    print(f"context, rerun, through a ContentsManager (stat, cached)           {summary(server)}")
    print(f"render only (bound + fence, no read)                               {summary(render)}")


def startup(extra_args: list[str], workdir: Path) -> float:
    """Seconds from launching ``jupyter server`` to a 200 from /api/status."""
    # tests/ is put on the path by bench_collab
    import httpx

    from fixtures.jupyter_process import running_jupyter

    start = time.perf_counter()
    with running_jupyter(workdir, args=extra_args) as server:
        elapsed = time.perf_counter() - start
        httpx.get(f"{server.url}api/status", headers=server.headers, timeout=30).raise_for_status()
    return elapsed


def bench_collab(rounds: int) -> None:
    if importlib.util.find_spec("jupyter_server_ydoc") is None:
        sys.exit("--collab: jupyter-collaboration is not importable")
    sys.path.insert(0, str(ROOT / "tests"))
    with tempfile.TemporaryDirectory() as tmp:
        collab = [f"--ServerApp.jpserver_extensions={name}=True" for name in ("jupyter_server_fileid",
                                                                               "jupyter_server_ydoc")]
        collab.append(f"--BaseFileIdManager.db_path={Path(tmp) / 'file_id.db'}")
        plain, with_collab = [], []
        for _ in range(rounds):  # interleaved: this kind of machine is often loaded
            plain.append(startup([], Path(tmp)))
            with_collab.append(startup(collab, Path(tmp)))
    print(f"server start, without collaboration  {summary(plain)}")
    print(f"server start, with collaboration     {summary(with_collab)}")
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
    bench_context(args.n, args.output_kb, args.png_kb)
    if args.collab:
        bench_collab(args.rounds)


if __name__ == "__main__":
    main()
