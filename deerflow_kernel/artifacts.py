"""Artifacts shown inline: what the agent presented, rendered by kind.

Images as images, markdown rendered (inert: raw HTML escaped), CSV as a
table (pandas when installed), HTML in a sandboxed iframe (``srcdoc`` with
``sandbox=""``: no script, no forms, no navigation, no same-origin), text
as a scrollable block; anything else as a name, a size and — with the
server backend — a download link.  Big files are not inlined.

:func:`decode` is shared with :meth:`deerflow_kernel.result.RunResult.load`,
so what you see and what you load are the same thing.
"""

from __future__ import annotations

import io
import json
import mimetypes
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Any

import ipywidgets as widgets

from deerflow.errors import UserError
from deerflow_kernel.markup import esc, human_size, icon, markdown_bundle, sandboxed_iframe

MAX_INLINE_BYTES = 5 * 1024 * 1024
MAX_TEXT_CHARS = 20_000
TABLE_ROWS = 50
IMAGE_TYPES = {".png": "png", ".jpg": "jpeg", ".jpeg": "jpeg", ".gif": "gif", ".webp": "webp", ".svg": "svg+xml"}
TEXT_SUFFIXES = {".md", ".markdown", ".txt", ".csv", ".tsv", ".json", ".html", ".htm", ".py", ".yaml", ".yml",
                 ".svg", ".log", ".xml", ".js", ".css", ".sql", ".r", ".ipynb", ".toml", ".ini", ".tex"}


def suffix(name: str) -> str:
    return PurePosixPath(name).suffix.lower()


def decode(name: str, data: bytes) -> Any:
    """An artifact as a Python value: DataFrame for CSV/TSV/Parquet (pandas), PIL image for
    raster images (Pillow; else bytes), parsed JSON, str for other text, else bytes."""
    ext = suffix(name)
    if ext in {".csv", ".tsv", ".parquet"}:
        frame = _dataframe(ext, data)
        if frame is not None:
            return frame
    if ext in IMAGE_TYPES and ext != ".svg":
        try:
            from PIL import Image
        except ImportError:
            return data
        image = Image.open(io.BytesIO(data))
        image.load()
        return image
    if ext == ".json":
        try:
            return json.loads(data)
        except ValueError:
            return data.decode("utf-8", errors="replace")
    if ext in TEXT_SUFFIXES:
        return data.decode("utf-8", errors="replace")
    return data


def _dataframe(ext: str, data: bytes) -> Any | None:
    try:
        import pandas as pd
    except ImportError:
        return None
    if ext == ".parquet":
        return pd.read_parquet(io.BytesIO(data))
    return pd.read_csv(io.BytesIO(data), sep="\t" if ext == ".tsv" else ",")


def artifact_card(path: str, read: Callable[[], bytes], *, url: str | None = None,
                  hint: str | None = None) -> widgets.VBox:
    """A card for one artifact: a title line and its content (or why it is not shown)."""
    name = PurePosixPath(path).name
    try:
        data = read()
    except (UserError, OSError) as exc:  # a missing or refused artifact must not end the run's view
        return _card(name, path, None, url, widgets.HTML(f"<i>could not load it: {esc(exc)}</i>"))
    body = _body(name, data, hint)
    return _card(name, path, len(data), url, body)


def _card(name: str, path: str, size: int | None, url: str | None, body: widgets.Widget) -> widgets.VBox:
    link = f' · <a href="{esc(url)}" target="_blank" download="{esc(name)}">download</a>' if url else ""
    title = widgets.HTML(f"{icon('file-o')} <b>{esc(name)}</b> <span style='color:#777'>{esc(path)} · "
                         f"{human_size(size)}</span>{link}")
    return widgets.VBox([title, body], layout=widgets.Layout(border="1px solid #ddd", padding="6px", margin="4px 0"))


def _body(name: str, data: bytes, hint: str | None) -> widgets.Widget:
    ext = suffix(name)
    if len(data) > MAX_INLINE_BYTES:
        return widgets.HTML(f"<i>too big to show inline ({human_size(len(data))}).</i>" + _hint(hint))
    if ext in IMAGE_TYPES:
        # A VBox is a flex column that stretches its children: the image keeps its own size (up to the width).
        return widgets.Image(value=data, format=IMAGE_TYPES[ext], layout=widgets.Layout(
            max_width="100%", width="auto", height="auto", align_self="flex-start", object_fit="contain"))
    text = data.decode("utf-8", errors="replace") if ext in TEXT_SUFFIXES else None
    if ext in {".md", ".markdown"} and text is not None:
        out = widgets.Output()
        out.outputs = (markdown_bundle(text[:MAX_TEXT_CHARS]),)
        return out
    if ext in {".html", ".htm"} and text is not None:
        return widgets.HTML(sandboxed_iframe(text))
    if ext in {".csv", ".tsv"}:
        return _table(name, data)
    if text is not None:
        shown = text if len(text) <= MAX_TEXT_CHARS else text[:MAX_TEXT_CHARS] + "\n…"
        return widgets.HTML(f"<pre style='max-height:300px;overflow:auto'>{esc(shown)}</pre>")
    kind = mimetypes.guess_type(name)[0] or "binary"
    return widgets.HTML(f"<i>{esc(kind)} file, not shown inline.</i>" + _hint(hint))


def _table(name: str, data: bytes) -> widgets.Widget:
    try:
        frame = _dataframe(suffix(name), data)
    except ValueError:  # not a well-formed table: show the text
        frame = None
    if frame is None:
        text = data.decode("utf-8", errors="replace")
        return widgets.HTML(f"<pre style='max-height:300px;overflow:auto'>{esc(text[:MAX_TEXT_CHARS])}</pre>")
    shown = frame.head(TABLE_ROWS).to_html(max_cols=30, border=0)  # to_html escapes cell values
    more = f"<div style='color:#777'>first {TABLE_ROWS} of {len(frame):,} rows</div>" if len(frame) > TABLE_ROWS else ""
    return widgets.HTML(f"<div style='max-height:320px;overflow:auto'>{shown}</div>{more}")


def _hint(hint: str | None) -> str:
    return f" <span style='color:#777'>{esc(hint)}</span>" if hint else ""
