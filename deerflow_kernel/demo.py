"""``make demo`` / ``deerflow demo``: run an example notebook headless and show what happens.

    python -m deerflow_kernel.demo [NOTEBOOK] [--out DIR]
    deerflow demo [--out DIR]          # the quickstart that ships with the package

Executes the notebook with nbclient in a fresh kernel, printing each cell as
it starts, the agent's events as they happen (the kernel side appends them to
``$DEERFLOW_EVENT_LOG``, which this script follows) and each cell's printed
output.  Everything stays inside ``--out``: ``DEERFLOW_HOME`` is
``DIR/home``, the executed notebook is written to ``DIR/``, the presented
files are copied to ``DIR/artifacts/``.  ``OPENAI_API_KEY`` is removed so the
demo never calls a paid model by accident, and ``DEERFLOW_SERVER_URL`` so it
never talks to a running Jupyter server.  The kernel gets CurveZMQ keys from its
manager (``transport_encryption="auto"``), so its sockets are encrypted and it has no
"running over TCP without encryption" warning to print.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import threading
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from traitlets.config import Config

from deerflow.resources import QUICKSTART, notebooks_dir
from deerflow.runtime.events import parse_event
from deerflow_kernel.session import EVENT_LOG_ENV
from deerflow_kernel.text_view import TextView

# Kernels whose kernelspec declares Curve support (ipykernel's does) get manager-provisioned keys.
KERNEL_CONFIG = {"KernelManager": {"transport_encryption": "auto"}}
OUT_MARKER = ".deerflow-demo"  # in --out: the folder is a demo's, which a later demo may clear
_SCRUBBED = ("OPENAI_API_KEY", "DEERFLOW_SERVER_URL", "DEERFLOW_SERVER_TOKEN", "DEERFLOW_CONFIG")


class EventFollower:
    """Prints the agent's events from the kernel's event log as they are appended."""

    def __init__(self, path: Path, out: Any) -> None:
        self.path, self.renderer = path, TextView(_Indented(out))
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._offset, self._pending = 0, b""
        self._thread = threading.Thread(target=self._follow, name="deerflow-demo-events", daemon=True)

    def __enter__(self) -> EventFollower:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _follow(self) -> None:
        while not self._stop.wait(0.1):
            self.drain()
        self.drain()

    def drain(self) -> None:
        """Print every complete event line appended since the last call."""
        with self._lock:
            if not self.path.exists():
                return
            with self.path.open("rb") as log:
                log.seek(self._offset)
                chunk = log.read()
            self._offset += len(chunk)
            *lines, self._pending = (self._pending + chunk).split(b"\n")
            for line in lines:
                if line.strip():
                    self.renderer.render(parse_event(line))


class _Indented:
    """A stream that indents what the renderer prints, under the cell that caused it."""

    def __init__(self, out: Any) -> None:
        self.out, self._at_start = out, True

    def write(self, text: str) -> None:
        for piece in text.splitlines(keepends=True):
            self.out.write(("    " if self._at_start else "") + piece)
            self._at_start = piece.endswith("\n")

    def flush(self) -> None:
        self.out.flush()


def _cell_start(cell: Any, number: int, total: int) -> None:
    head = (cell.source.strip().splitlines() or [""])[0]
    print(f"\n[cell {number + 1}/{total}] {head}", flush=True)


def _cell_done(cell: Any) -> None:
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            for line in output.get("text", "").rstrip().splitlines():
                print(f"  | {line}")
        elif output.get("output_type") == "execute_result":
            text = output.get("data", {}).get("text/plain", "")
            if text.startswith("<RunResult"):
                print(f"  = {text}")
    sys.stdout.flush()


def run_demo(notebook: Path, out: Path) -> int:
    """Execute ``notebook``; returns the exit status (0 when every cell ran)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / OUT_MARKER).touch()
    for stale in (out / "home", out / "artifacts", out / "events.jsonl", out / notebook.name):
        shutil.rmtree(stale, ignore_errors=True) if stale.is_dir() else stale.unlink(missing_ok=True)
    home, log = (out / "home").resolve(), (out / "events.jsonl").resolve()
    for name in _SCRUBBED:
        os.environ.pop(name, None)
    os.environ.update({"DEERFLOW_HOME": str(home), EVENT_LOG_ENV: str(log)})
    nb = nbformat.read(notebook, as_version=4)
    code_cells = sum(c.cell_type == "code" for c in nb.cells)
    print(f"Running {notebook} headless on the offline model (DEERFLOW_HOME={home})", flush=True)
    counter = iter(range(code_cells))

    def on_start(cell: Any, cell_index: int) -> None:
        if cell.cell_type == "code":
            _cell_start(cell, next(counter), code_cells)

    client = NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(notebook.parent.resolve())}},
        on_cell_start=on_start, config=Config(KERNEL_CONFIG),
    )
    status = 0
    with EventFollower(log, sys.stdout) as follower:
        client.on_cell_executed = lambda cell, cell_index, execute_reply: (follower.drain(), _cell_done(cell))
        try:
            client.execute()
        except CellExecutionError as exc:
            print(f"\nA cell failed:\n{exc}", file=sys.stderr)
            status = 1
    executed = out / notebook.name
    nbformat.write(nb, executed)
    _report(executed, copy_artifacts(home, out / "artifacts"), home)
    return status


def copy_artifacts(home: Path, target: Path) -> list[Path]:
    """Copy every thread's outputs under ``target`` (per-thread folders when there are several)."""
    outputs = sorted(home.glob("users/*/threads/*/user-data/outputs"))
    copied = []
    for folder in outputs:
        dest = target if len(outputs) == 1 else target / folder.parents[1].name
        for item in sorted(p for p in folder.rglob("*") if p.is_file()):
            to = dest / item.relative_to(folder)
            to.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(item, to)
            copied.append(to)
    return copied


def _report(executed: Path, artifacts: list[Path], home: Path) -> None:
    print("\nDone.")
    print(f"  executed notebook: {executed.resolve()}")
    print(f"  artifacts:         {(executed.parent / 'artifacts').resolve()}")
    for path in artifacts:
        print(f"    {path.name}  ({path.stat().st_size:,} bytes)")
    print(f"  DeerFlow home:     {home}  (threads, workspaces, run history)")
    print("  open the notebooks in JupyterLab (deerflow lab, or make lab in a checkout) to see the live"
          " views and the form.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deerflow_kernel.demo", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("notebook", nargs="?", type=Path, default=None,
                        help="the notebook to run (default: the quickstart that ships with DeerFlow)")
    parser.add_argument("--out", type=Path, default=Path("demo-output"), help="where results go (default: demo-output)")
    args = parser.parse_args(argv)
    return demo(args.notebook, args.out)


def demo(notebook: Path | None, out: Path) -> int:
    """Run ``notebook`` (default: the packaged quickstart) into ``out``; 2 when it does not exist."""
    notebook = notebook or notebooks_dir() / QUICKSTART
    if not notebook.is_file():
        print(f"demo: no notebook at {notebook}", file=sys.stderr)
        return 2
    refused = foreign_out(out, notebook)
    if refused:
        print(f"demo: {refused}", file=sys.stderr)
        return 2
    return run_demo(notebook, out)


def foreign_out(out: Path, notebook: Path) -> str | None:
    """Why ``out`` must not be used (None when it is new, empty or an earlier demo's).

    The demo clears its own ``home/``, ``artifacts/``, ``events.jsonl`` and notebook in ``out``
    before it runs: in a folder of the user's (``--out .``, ``--out ~``) those are theirs.
    An earlier demo's folder carries :data:`OUT_MARKER`, or (before the marker) holds nothing
    but what a demo writes.
    """
    if not out.exists():
        return None
    if not out.is_dir():
        return f"--out {out} is not a folder"
    try:
        names = {entry.name for entry in out.iterdir()}
    except OSError as exc:
        return f"cannot read --out {out}: {exc.strerror or exc}"
    ours = {OUT_MARKER, "home", "artifacts", "events.jsonl", ".ipynb_checkpoints", notebook.name}
    if not names or OUT_MARKER in names or (names <= ours and "events.jsonl" in names):
        return None
    return f"--out {out} holds files that are not an earlier demo's: give a new or empty folder"


if __name__ == "__main__":
    sys.exit(main())
