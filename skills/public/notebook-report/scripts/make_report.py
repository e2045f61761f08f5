"""Build a clean report notebook and HTML page from a DeerFlow thread's agent.ipynb.

Usage (in the python tool):
    %run make_report.py --notebook agent.ipynb --summary summary.md --outputs OUTDIR --out OUTDIR/report

Keeps code cells that ran without error (empty cells, failed cells and calls
of this script are dropped), renumbers them, puts the summary first and the
PNG charts of the outputs folder last, and writes ``<out>.ipynb`` and
``<out>.html`` (nbconvert when installed, else a plain built-in renderer).
"""

from __future__ import annotations

import argparse
import base64
import html
from pathlib import Path

import nbformat
from nbformat.v4 import new_markdown_cell, new_notebook


def clean_cells(nb: nbformat.NotebookNode) -> tuple[list[nbformat.NotebookNode], dict[str, int]]:
    """The cells worth reading, renumbered, and how many of each kind were dropped."""
    kept, dropped = [], {"empty": 0, "failed": 0, "tooling": 0}
    for cell in nb.cells:
        source = cell.get("source", "")
        if not source.strip():
            dropped["empty"] += 1
        elif cell.cell_type == "code" and any(o.get("output_type") == "error" for o in cell.get("outputs", [])):
            dropped["failed"] += 1
        elif "make_report.py" in source:
            dropped["tooling"] += 1
        else:
            kept.append(cell)
    count = 0
    for cell in kept:
        if cell.cell_type == "code":
            count += 1
            cell.execution_count = count
            for output in cell.get("outputs", []):
                if output.get("output_type") == "execute_result":
                    output["execution_count"] = count
    return kept, dropped


def figure_cells(outputs: Path) -> list[nbformat.NotebookNode]:
    """One markdown cell per PNG in ``outputs`` (embedded as an attachment)."""
    cells = []
    for png in sorted(outputs.glob("*.png")):
        data = base64.b64encode(png.read_bytes()).decode("ascii")
        cell = new_markdown_cell(f"**{png.name}**\n\n![{png.stem}](attachment:{png.name})")
        cell["attachments"] = {png.name: {"image/png": data}}
        cells.append(cell)
    return cells


def build_report(nb: nbformat.NotebookNode, summary: str, figures: list) -> tuple[nbformat.NotebookNode, dict]:
    cells, dropped = clean_cells(nb)
    report = new_notebook(metadata=nb.get("metadata", {}))
    report.cells = [new_markdown_cell(summary.strip() or "# Report")]
    if cells:
        report.cells += [new_markdown_cell("## How it was done\n\nThe analysis cells, as they ran."), *cells]
    if figures:
        report.cells += [new_markdown_cell("## Figures"), *figures]
    return report, {"kept": len(cells), **dropped, "figures": len(figures)}


def to_html(report: nbformat.NotebookNode, title: str) -> str:
    try:
        from nbconvert import HTMLExporter

        body, _ = HTMLExporter(template_name="lab").from_notebook_node(report)
        return body
    except ImportError:
        return plain_html(report, title)


def plain_html(report: nbformat.NotebookNode, title: str) -> str:
    """A dependency-free rendering: markdown as preformatted text, code and text outputs, images."""
    parts = [f"<!doctype html><meta charset='utf-8'><title>{html.escape(title)}</title>"]
    for cell in report.cells:
        if cell.cell_type == "markdown":
            parts.append(f"<pre class='md'>{html.escape(cell.source)}</pre>")
            for name, data in (cell.get("attachments") or {}).items():
                parts.append(f"<img alt='{html.escape(name)}' src='data:image/png;base64,{data['image/png']}'>")
            continue
        parts.append(f"<pre class='code'>{html.escape(cell.source)}</pre>")
        for output in cell.get("outputs", []):
            text = output.get("text") or (output.get("data") or {}).get("text/plain", "")
            if text:
                parts.append(f"<pre class='out'>{html.escape(''.join(text))}</pre>")
            png = (output.get("data") or {}).get("image/png")
            if png:
                parts.append(f"<img src='data:image/png;base64,{png}'>")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notebook", required=True)
    parser.add_argument("--summary", required=True)
    parser.add_argument("--outputs", required=True)
    parser.add_argument("--out", required=True, help="output path without extension")
    args = parser.parse_args(argv)
    nb = nbformat.read(args.notebook, as_version=4)
    summary = Path(args.summary).read_text(encoding="utf-8")
    report, counts = build_report(nb, summary, figure_cells(Path(args.outputs)))
    out = Path(args.out)
    nbformat.write(report, str(out.with_suffix(".ipynb")))
    title = next((line.lstrip("# ").strip() for line in summary.splitlines() if line.startswith("#")), "Report")
    out.with_suffix(".html").write_text(to_html(report, title), encoding="utf-8")
    print(f"wrote {out.with_suffix('.ipynb').name} and {out.with_suffix('.html').name}: kept {counts['kept']} "
          f"cells; dropped {counts['failed']} failed, {counts['empty']} empty, {counts['tooling']} tooling; "
          f"{counts['figures']} figure(s)")
    return counts


if __name__ == "__main__":
    main()
