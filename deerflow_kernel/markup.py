"""Small helpers for showing agent-produced text safely.

Everything the agent writes is untrusted (a web page it read may have put
words in its mouth).  ipywidgets' Output area renders its outputs as
*trusted*, so markdown from the agent would otherwise be able to carry raw
HTML (``<img onerror=...>``) into Jupyter's origin.  :func:`inert_markdown`
escapes HTML tags outside code, which keeps every markdown feature and
leaves code samples exactly as written; HTML artifacts go into a sandboxed
iframe instead (:func:`sandboxed_iframe`).
"""

from __future__ import annotations

import html
import re
from typing import Any

_CODE = re.compile(r"(```.*?(?:```|\Z)|~~~.*?(?:~~~|\Z)|`[^`\n]*`)", re.S)
_TAG_START = re.compile(r"<(?=[A-Za-z!/?])")
_SCRIPT_LINK = re.compile(r"(\]\(\s*<?|\]:\s*<?)(?:javascript|vbscript|data):", re.I)


def inert_markdown(text: str) -> str:
    """Markdown with raw HTML neutralised (``<tag`` → ``&lt;tag``) and script links disabled, outside code."""
    parts = _CODE.split(text)
    return "".join(part if i % 2 else _inert(part) for i, part in enumerate(parts))


def _inert(prose: str) -> str:
    return _SCRIPT_LINK.sub(r"\1#blocked:", _TAG_START.sub("&lt;", prose))


def markdown_bundle(text: str) -> dict[str, Any]:
    """An Output-widget display output showing ``text`` as markdown."""
    return {"output_type": "display_data", "metadata": {},
            "data": {"text/markdown": inert_markdown(text), "text/plain": text}}


def sandboxed_iframe(document: str, *, height: int = 360) -> str:
    """An iframe showing ``document`` with every capability off (no script, no forms, no navigation)."""
    return (f'<iframe sandbox="" srcdoc="{html.escape(document, quote=True)}" '
            f'style="width:100%;height:{height}px;border:1px solid #ddd;background:white"></iframe>')


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def icon(name: str, color: str | None = None) -> str:
    """A Font Awesome 4 icon (JupyterLab loads the font for ipywidgets): unlike emoji, it renders without an
    emoji font installed."""
    style = f" style='color:{color}'" if color else ""
    return f"<i class='fa fa-{name}'{style}></i>"


def human_size(size: int | None) -> str:
    if size is None:
        return "?"
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


def first_line(text: str, limit: int = 100) -> str:
    line = (text.strip().splitlines() or [""])[0]
    return line if len(line) <= limit else line[: limit - 1] + "…"


def hidden(widget: Any, hide: bool) -> None:
    """Show or hide a widget without removing it (empty sections take no space)."""
    widget.layout.display = "none" if hide else None


RECEIPT_KINDS = frozenset({"undelivered", "partial"})
"""Notice kinds the delivery receipt already shows (with its files): views do not repeat them as notices."""
