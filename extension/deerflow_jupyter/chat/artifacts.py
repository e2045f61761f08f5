"""Presented files as chat messages.

Each artifact gets a caption — its name, size and a download link to the
authenticated artifact endpoint (``{base_url}deerflow/api/threads/{id}/artifacts/{name}``,
which serves active content as a download) — and, when it can be shown
safely inline, a MIME bundle the chat renders with JupyterLab's own renderers:

* raster images (PNG, JPEG, GIF, WebP; browser screenshots are PNGs) as
  ``image/*`` base64 data, up to :data:`MAX_INLINE_IMAGE_BYTES`;
* markdown as ``text/markdown`` (JupyterLab sanitizes untrusted markdown),
  up to :data:`MAX_INLINE_MARKDOWN_CHARS`;
* CSV/TSV as a markdown table of its first :data:`MAX_TABLE_ROWS` rows and
  :data:`MAX_TABLE_COLUMNS` columns (cells cut at :data:`MAX_CELL_CHARS`,
  escaped: a cell is data, not markup), saying how much is left out and
  linking the whole file;
* everything else (HTML, SVG, PDF, archives…) as the link only: SVG and
  HTML can carry script, and the endpoint already knows how to serve them.

The session posts each artifact as its own message between horizontal rules,
so a presented report never runs into the agent's text around it.

Inline data is stored in the ``.chat`` file, hence the size caps.
"""

from __future__ import annotations

import base64
import csv
import io
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from deerflow.errors import ToolFailure, UserError
from deerflow_jupyter.chat.clarify import md_escape

IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
               ".webp": "image/webp"}
MARKDOWN_SUFFIXES = frozenset({".md", ".markdown"})
MAX_INLINE_IMAGE_BYTES = 4 * 1024 * 1024
MAX_INLINE_MARKDOWN_CHARS = 100_000
TABLE_SUFFIXES = {".csv": ",", ".tsv": "\t"}
MAX_TABLE_ROWS = 20
MAX_TABLE_COLUMNS = 8
MAX_CELL_CHARS = 40
MAX_TABLE_SCAN_BYTES = 1024 * 1024  # rows are counted up to here; a bigger file says "at least"


@dataclass(frozen=True)
class ArtifactView:
    """How one artifact appears in the chat.

    Attributes:
        caption: A markdown line naming the file, with its size and download link.
        bundle: The MIME bundle to show after the caption, or None (the caption is all).
        fallback: Plain body of the rich message, for clients without the renderer.
    """

    caption: str
    bundle: dict[str, Any] | None = None
    fallback: str = ""


def human_size(size: int | None) -> str:
    if size is None:
        return "size unknown"
    value = float(size)
    for unit in ("B", "KB", "MB"):
        if value < 1024:
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"


def artifact_view(path: str, *, url: str, read: Callable[[], bytes]) -> ArtifactView:
    """The caption and inline content of the artifact at virtual ``path``.

    Args:
        path: The artifact's virtual path (``/mnt/user-data/outputs/chart.png``).
        url: Its download URL.
        read: Returns its bytes; ``OSError``, the harness's ``ToolFailure`` or a ``UserError``
            (``ArtifactNotFound``, ``ArtifactTooLarge``) mean it cannot be read, which the caption
            then says.
    """
    name = PurePosixPath(path).name
    link = f"[{md_escape(name)}]({url})"
    try:
        data = read()
    except (OSError, ToolFailure, UserError) as exc:
        return ArtifactView(f"📎 {link} — could not be read: {md_escape(exc)}")
    caption = f"📎 **{link}** · {human_size(len(data))}"
    suffix = PurePosixPath(name).suffix.lower()
    if suffix in IMAGE_TYPES and len(data) <= MAX_INLINE_IMAGE_BYTES:
        encoded = base64.b64encode(data).decode("ascii")
        return ArtifactView(caption, {IMAGE_TYPES[suffix]: encoded}, fallback=f"🖼 {name}")
    if suffix in TABLE_SUFFIXES:
        table = csv_table(data, delimiter=TABLE_SUFFIXES[suffix], url=url)
        if table:
            return ArtifactView(caption, {"text/markdown": table}, fallback=table)
    if suffix in MARKDOWN_SUFFIXES:
        text = data.decode("utf-8", errors="replace")
        if len(text) <= MAX_INLINE_MARKDOWN_CHARS:
            return ArtifactView(caption, {"text/markdown": text}, fallback=text)
    if suffix in IMAGE_TYPES or suffix in MARKDOWN_SUFFIXES:
        caption += " · too large to show here, open it with the link"
    return ArtifactView(caption)


def _cell(value: str) -> str:
    text = " ".join(value.split())
    text = text if len(text) <= MAX_CELL_CHARS else text[:MAX_CELL_CHARS - 1] + "…"
    return md_escape(text).replace("_", "\\_") or " "


def csv_table(data: bytes, *, delimiter: str = ",", url: str = "") -> str:
    """The first rows and columns of a CSV as a markdown table ("" when it has no rows).

    The first row is the header.  Bounded whatever the file: at most
    :data:`MAX_TABLE_SCAN_BYTES` are parsed, and a note says what is not shown.
    """
    scanned = data[:MAX_TABLE_SCAN_BYTES]
    text = scanned.decode("utf-8-sig", errors="replace")
    try:
        rows = [r for r in csv.reader(io.StringIO(text, newline=""), delimiter=delimiter) if r]
    except csv.Error:
        return ""
    if not rows:
        return ""
    header, body = rows[0], rows[1:]
    width = max(len(r) for r in rows)
    shown_cols = min(width, MAX_TABLE_COLUMNS)

    def line(row: list[str]) -> str:
        cells = [_cell(c) for c in itertools.islice(itertools.chain(row, itertools.repeat("")), shown_cols)]
        return "| " + " | ".join(cells) + " |"

    lines = [line(header), "|" + " --- |" * shown_cols, *(line(r) for r in body[:MAX_TABLE_ROWS])]
    total = f"at least {len(body)}" if len(data) > len(scanned) else str(len(body))
    left_out = []
    if len(body) > MAX_TABLE_ROWS or len(data) > len(scanned):
        left_out.append(f"first {min(len(body), MAX_TABLE_ROWS)} of {total} rows")
    if width > shown_cols:
        left_out.append(f"first {shown_cols} of {width} columns")
    if left_out:
        whole = f"[the whole file]({url})" if url else "the whole file"
        lines.append(f"\n_Showing the {' and '.join(left_out)}; open {whole} for the rest._")
    return "\n".join(lines)


__all__ = ["ArtifactView", "artifact_view", "csv_table", "human_size"]
