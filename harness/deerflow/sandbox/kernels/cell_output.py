"""Turning a cell's Jupyter outputs into what the model reads.

A model cannot look at a PNG inside a tool message, and a base64 blob would
only burn its context.  So rich outputs become files in the workspace and
the text names their virtual paths:

* ``image/png`` / ``image/jpeg`` / ``image/svg+xml`` → ``figures/cell-N-K.ext``;
* ``text/html`` with no meaningful plain-text form → ``html/cell-N-K.html``
  (a DataFrame has a real ``text/plain`` repr, so it is shown as text);
* errors become a short summary: the exception line and the last frames,
  one line each, with library paths shortened to their module path.

``N`` is the cell's number in ``agent.ipynb``, which, unlike the kernel's
execution count, survives kernel restarts, so files are never overwritten.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deerflow.sandbox.execution.provider import VIRTUAL_WORKSPACE
from deerflow.threadfs import SafeDir, UnsafePath

if TYPE_CHECKING:  # nbformat is imported on first use (its jsonschema import is slow)
    from nbformat import NotebookNode

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_PLACEHOLDER = re.compile(r"^<[^<>\n]*>$")
_FRAME_FILE = re.compile(r"^File (\S+?):(\d+)")
_LIB_PATH = re.compile(r"^.*/(?:site-packages|dist-packages|lib/python\d+\.\d+)/")
_SIGNATURE = re.compile(r", in [\w.<>]+\(")  # ``, in f(x=1)`` at the end of a frame header
_MAX_FRAMES = 5
_IMAGE_TYPES = {"image/png": "png", "image/jpeg": "jpg", "image/svg+xml": "svg"}

Mask = Callable[[str], str]


@dataclass(frozen=True)
class RenderedCell:
    """The model-facing form of one cell's outputs.

    Attributes:
        text: Streams, results, file notices and the error summary, in order.
        files: Virtual paths of the files written for rich outputs.
        error: ``"Name: value"`` of the exception raised by the cell, if any.
    """

    text: str
    files: tuple[str, ...]
    error: str | None


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def _short_path(path: str) -> str:
    """A library path as its module path; other host paths as a bare name."""
    if path.startswith("/mnt/"):
        return path
    shortened = _LIB_PATH.sub("", path)
    return shortened if shortened != path else Path(path).name


def _frame_line(block: str) -> str | None:
    """``Cell In[3], line 2, in f: return 1/x`` from one traceback frame block."""
    lines = strip_ansi(block).strip("\n").splitlines()
    header = lines[0].strip() if lines else ""
    if not header.startswith(("Cell In[", "File ")):
        return None
    match = _FRAME_FILE.match(header)
    if match:
        header = f"File {_short_path(match.group(1))}:{match.group(2)}{header[match.end() :]}"
    header = _without_arguments(header)
    current = next((ln for ln in lines if ln.lstrip().startswith(("---->", "--->", "-->"))), None)
    if current is None:
        return header
    code = re.sub(r"^\s*-+>\s*\d*\s?", "", current).strip()
    return f"{header}: {code}"


def _without_arguments(header: str) -> str:
    """``File x.py:3, in f`` from ``File x.py:3, in f(a=1, b=[...])``: from the first ``, in NAME(``
    when the header ends with ``)``.  The traceback is the sandboxed code's to write (a custom
    exception handler sends any text), so this is one search, not ``(, in NAME)\\(.*\\)$``, which
    rescanned the rest of the header from every ``, in NAME(`` in it (quadratic, holding the GIL)."""
    if not header.endswith(")"):
        return header
    found = _SIGNATURE.search(header)
    return header[: found.end() - 1] if found else header


def summarize_error(output: dict[str, Any], mask: Mask) -> tuple[str, str]:
    """Return (``"Name: value"``, multi-line summary) for an error output."""
    headline = f"{output['ename']}: {mask(output['evalue'])}"
    blocks = [mask(b) for b in output.get("traceback", [])]
    if output["ename"] in ("SyntaxError", "IndentationError", "TabError") and blocks:
        return headline, f"Error: {headline}\n{strip_ansi(blocks[-1]).rstrip()}"
    frames = [f for b in blocks if (f := _frame_line(b))]
    lines = [f"Error: {headline}"]
    if frames:
        lines.append("Traceback (most recent call last, innermost last):")
        if len(frames) > _MAX_FRAMES:
            lines.append(f"  ... {len(frames) - _MAX_FRAMES} earlier frames ...")
        lines += [f"  {f}" for f in frames[-_MAX_FRAMES:]]
    return headline, "\n".join(lines)


class _FileSink:
    """Writes rich outputs of one cell into the workspace."""

    def __init__(self, workspace: Path, cell_number: int) -> None:
        self.workspace = workspace
        self.cell_number = cell_number
        self.count = 0
        self.files: list[str] = []

    def save(self, folder: str, ext: str, payload: bytes) -> str:
        """Write ``payload`` below the workspace through its SafeDir: the cell may have
        planted a link at this exact name, or made ``folder`` a link; neither is followed."""
        self.count += 1
        relative = f"{folder}/cell-{self.cell_number}-{self.count}.{ext}"
        try:
            with SafeDir.open(self.workspace, create=True) as root:
                root.write_bytes(relative, payload)
        except UnsafePath as exc:
            return f"(not saved: {exc.message})"
        virtual = f"{VIRTUAL_WORKSPACE}/{relative}"
        self.files.append(virtual)
        return virtual


def _as_text(value: str | list[str]) -> str:
    return "".join(value) if isinstance(value, list) else value


def _render_data(data: dict[str, Any], sink: _FileSink) -> list[str]:
    """Text for one display_data / execute_result bundle, saving rich parts."""
    parts: list[str] = []
    for mime, ext in _IMAGE_TYPES.items():
        if mime in data:
            raw = _as_text(data[mime])
            payload = raw.encode() if mime == "image/svg+xml" else base64.b64decode(raw)
            parts.append(f"[image saved to {sink.save('figures', ext, payload)}]")
    plain = _as_text(data.get("text/plain", "")).rstrip("\n")
    meaningful = bool(plain) and not _PLACEHOLDER.match(plain)
    if "text/html" in data and not meaningful:
        path = sink.save("html", "html", _as_text(data["text/html"]).encode())
        parts.append(f"[HTML output saved to {path}]")
    if meaningful and not (parts and plain.startswith("<Figure")):
        parts.insert(0, plain)
    elif not parts and "text/markdown" in data:
        parts.append(_as_text(data["text/markdown"]).rstrip("\n"))
    return parts


def render_outputs(
    outputs: list[NotebookNode], *, workspace: Path, cell_number: int, mask: Mask
) -> RenderedCell:
    """Render a cell's outputs for the model, writing rich outputs to files.

    Args:
        outputs: nbformat outputs of the cell.
        workspace: Host workspace directory (files go below it).
        cell_number: The cell's number in ``agent.ipynb``.
        mask: Hides host paths in text coming from the kernel.
    """
    sink = _FileSink(workspace, cell_number)
    parts: list[str] = []
    error: str | None = None
    for output in outputs:
        kind = output["output_type"]
        if kind == "stream":
            parts.append(mask(strip_ansi(_as_text(output["text"]))).rstrip("\n"))
        elif kind in ("display_data", "execute_result"):
            parts += [mask(p) for p in _render_data(output["data"], sink)]
        elif kind == "error":
            error, summary = summarize_error(output, mask)
            parts.append(summary)
    text = "\n".join(p for p in parts if p)
    return RenderedCell(text=text, files=tuple(sink.files), error=error)


def truncate_middle(text: str, limit: int) -> tuple[str, bool]:
    """Keep the head and tail of ``text`` within ``limit`` characters."""
    if len(text) <= limit:
        return text, False
    half = limit // 2
    omitted = len(text) - 2 * half
    return f"{text[:half]}\n... [{omitted} characters omitted] ...\n{text[-half:]}", True
