"""Presented files as chat messages.

Each artifact gets a caption — its name, size and a download link to the
authenticated artifact endpoint (``{base_url}deerflow/api/threads/{id}/artifacts/{name}``,
which serves active content as a download) — and, when it can be shown
safely inline, a MIME bundle the chat renders with JupyterLab's own renderers:

* raster images (PNG, JPEG, GIF, WebP; browser screenshots are PNGs) as
  ``image/*`` base64 data, up to :data:`MAX_INLINE_IMAGE_BYTES`;
* markdown as ``text/markdown`` (JupyterLab sanitizes untrusted markdown),
  up to :data:`MAX_INLINE_MARKDOWN_CHARS`;
* everything else (CSV, HTML, SVG, PDF, archives…) as the link only: SVG and
  HTML can carry script, and the endpoint already knows how to serve them.

Inline data is stored in the ``.chat`` file, hence the size caps.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from deerflow.errors import ToolFailure
from deerflow_jupyter.chat.clarify import md_escape

IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
               ".webp": "image/webp"}
MARKDOWN_SUFFIXES = frozenset({".md", ".markdown"})
MAX_INLINE_IMAGE_BYTES = 4 * 1024 * 1024
MAX_INLINE_MARKDOWN_CHARS = 100_000


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
        read: Returns its bytes; ``OSError`` or the harness's ``ToolFailure``
            mean it cannot be read, which the caption then says.
    """
    name = PurePosixPath(path).name
    link = f"[{md_escape(name)}]({url})"
    try:
        data = read()
    except (OSError, ToolFailure) as exc:
        return ArtifactView(f"📎 {link} — could not be read: {md_escape(exc)}")
    caption = f"📎 **{link}** · {human_size(len(data))}"
    suffix = PurePosixPath(name).suffix.lower()
    if suffix in IMAGE_TYPES and len(data) <= MAX_INLINE_IMAGE_BYTES:
        encoded = base64.b64encode(data).decode("ascii")
        return ArtifactView(caption, {IMAGE_TYPES[suffix]: encoded}, fallback=f"🖼 {name}")
    if suffix in MARKDOWN_SUFFIXES:
        text = data.decode("utf-8", errors="replace")
        if len(text) <= MAX_INLINE_MARKDOWN_CHARS:
            return ArtifactView(caption, {"text/markdown": text}, fallback=text)
    if suffix in IMAGE_TYPES or suffix in MARKDOWN_SUFFIXES:
        caption += " · too large to show here, open it with the link"
    return ArtifactView(caption)


__all__ = ["ArtifactView", "artifact_view", "human_size"]
