"""From fetched bytes to readable text, by content type.

* **HTML** → markdown.  Hidden markup is dropped first, on the parsed tree,
  because it is the usual carrier of prompt injection (text a reader never
  sees): ``hidden``/``aria-hidden`` elements, inline styles that hide
  (``display:none``, ``visibility:hidden``, ``opacity:0``, ``font-size:0``),
  classes and ids a page's own ``<style>`` hides with simple selectors,
  common "hidden" utility classes, scripts, templates, comments.  The
  remaining page goes through trafilatura (main-content extraction to
  markdown, dropping navigation and boilerplate); short pages, and pages
  where trafilatura keeps too little of the visible text (app shells), are
  rendered whole by markdownify.  Links are made absolute either way, so the
  model can fetch them.
* **PDF** → text per page with pypdf.
* **text/*, JSON, XML** → decoded text.
* anything else → refused with the type, so the model does not get bytes.

The extraction libraries are the ``web`` extra; a missing one is a clear
message naming it.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import re
from dataclasses import dataclass
from typing import Any

from deerflow.errors import ToolFailure

INSTALL_HINT = "the 'web' extra (pip install '.[web]' in a clone)"
MAX_PDF_PAGES = 200
SHORT_PAGE_CHARS = 1_500
"""Below this much visible text the whole page is the content: render it all, keeping its structure."""
# Pages are hostile, so these patterns stay linear in the text: no repeat that can rescan the rest
# of the text from every one of many starting points (``height:0;[^"]*overflow`` from each of 40k
# ``height:0;``, or a selector from each character of a brace-less stylesheet: minutes per page).
_HIDING_STYLE = re.compile(
    r"display\s*:\s*none|visibility\s*:\s*(hidden|collapse)|opacity\s*:\s*0(\.0+)?\s*(;|$|!)|"
    r"font-size\s*:\s*0(px|em|rem|pt|%)?\s*(;|$|!)|"
    r"clip-path\s*:\s*inset\(\s*50%|left\s*:\s*-\d{4,}px|text-indent\s*:\s*-\d{4,}px", re.IGNORECASE)
_ZERO_HEIGHT = re.compile(r"(max-)?height\s*:\s*0(px)?\s*;", re.IGNORECASE)
_OVERFLOW_HIDDEN = re.compile(r"overflow\s*:\s*hidden", re.IGNORECASE)
_HIDDEN_CLASSES = frozenset({"hidden", "d-none", "display-none", "invisible", "is-hidden", "visually-hidden",
                             "sr-only", "screen-reader-text", "hide"})
_DROP_TAGS = ("script", "template", "noscript", "iframe", "object", "embed", "svg", "canvas", "link", "meta")
_STYLE_RULE = re.compile(r"(?:^|(?<=[{}]))([^{}]+)\{([^{}]*)\}")  # a selector starts after a brace
_SIMPLE_SELECTOR = re.compile(r"^\s*[a-z0-9]*([.#])([A-Za-z_][\w-]*)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Extracted:
    """Readable text from a document.

    Attributes:
        text: Markdown or plain text.
        title: The document title, when it has one.
        hidden_removed: Hidden elements dropped from HTML before extraction.
        kind: ``html``, ``pdf`` or ``text``.
    """

    text: str
    title: str | None = None
    hidden_removed: int = 0
    kind: str = "text"


def _require(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError:
        raise ToolFailure(f"reading this content needs the {module!r} package, which is not installed; "
                          f"ask the operator to install {INSTALL_HINT}", code="missing_dependency") from None


def extract(data: bytes, *, content_type: str, charset: str | None, url: str) -> Extracted:
    """Readable text of ``data`` according to its content type.

    Raises:
        ToolFailure: binary content, or a missing extraction library.
    """
    mime = content_type.split(";")[0].strip().lower()
    if mime in ("text/html", "application/xhtml+xml") or (not mime and data.lstrip()[:15].lower()
                                                          .startswith((b"<!doctype html", b"<html"))):
        return html_to_markdown(decode(data, charset), url=url)
    if mime == "application/pdf" or data.startswith(b"%PDF-"):
        return pdf_to_text(data)
    if mime.startswith("text/") or mime in ("application/json", "application/xml", "application/ld+json") \
            or mime.endswith(("+json", "+xml")):
        return Extracted(decode(data, charset), kind="text")
    raise ToolFailure(f"the URL returned {mime or 'unknown'} content ({len(data)} bytes), which is not text, "
                      "HTML or PDF. Use the browser tools (browser_screenshot) to look at it instead.",
                      code="unsupported_content")


def decode(data: bytes, charset: str | None) -> str:
    """Bytes to text with the declared charset, else UTF-8, replacing what does not decode."""
    try:
        return data.decode(charset or "utf-8", errors="replace")
    except LookupError:
        return data.decode("utf-8", errors="replace")


def html_to_markdown(html: str, *, url: str) -> Extracted:
    """Markdown of the visible content of an HTML page."""
    lxml_html = _require("lxml.html")
    if not html.strip():
        return Extracted("", kind="html")
    root = lxml_html.fromstring(html)
    title = (root.findtext(".//title") or "").strip() or None
    hidden = strip_hidden(root)
    with contextlib.suppress(ValueError):  # a URL lxml cannot join with: links stay relative
        root.make_links_absolute(url)
    clean = lxml_html.tostring(root, encoding="unicode")
    body = root.find("body")
    visible = " ".join((body if body is not None else root).text_content().split())
    text = _trafilatura(clean, url=url) if len(visible) > SHORT_PAGE_CHARS else None
    if text is None or len(text) < 0.4 * len(visible):
        markdownify = _require("markdownify").markdownify
        text = markdownify(lxml_html.tostring(body if body is not None else root, encoding="unicode"),
                           heading_style="ATX", strip=["img"])
    return Extracted(_tidy(text), title=title, hidden_removed=hidden, kind="html")


def _trafilatura(html: str, *, url: str) -> str | None:
    trafilatura = _require("trafilatura")
    return trafilatura.extract(html, url=url, output_format="markdown", include_links=True,
                               include_tables=True, include_formatting=True, include_comments=False,
                               favor_recall=True, with_metadata=False)


def strip_hidden(root: Any) -> int:
    """Remove hidden elements and non-content markup from an lxml tree; count hidden ones."""
    for comment in root.xpath("//comment()"):
        _drop(comment)
    for element in root.xpath("|".join(f"//{tag}" for tag in _DROP_TAGS)):
        _drop(element)
    hidden_classes, hidden_ids = _stylesheet_hidden(root)
    for style in root.xpath("//style"):
        _drop(style)
    count = 0
    for element in list(root.iter()):
        if not isinstance(element.tag, str) or element.getparent() is None:
            continue
        if _is_hidden(element, hidden_classes, hidden_ids):
            _drop(element)
            count += 1
    return count


def _is_hidden(element: Any, hidden_classes: set[str], hidden_ids: set[str]) -> bool:
    attrs = element.attrib
    if "hidden" in attrs or attrs.get("aria-hidden", "").lower() == "true":
        return True
    if element.tag == "input" and attrs.get("type", "").lower() == "hidden":
        return True
    if _hides(attrs.get("style", "")):
        return True
    classes = set(attrs.get("class", "").split())
    return bool(classes & (_HIDDEN_CLASSES | hidden_classes)) or attrs.get("id", "") in hidden_ids


def _stylesheet_hidden(root: Any) -> tuple[set[str], set[str]]:
    """Classes and ids that the page's own ``<style>`` blocks hide with simple selectors."""
    classes: set[str] = set()
    ids: set[str] = set()
    for style in root.xpath("//style"):
        for selectors, body in _STYLE_RULE.findall(style.text or ""):
            if not _hides(body):
                continue
            for selector in selectors.split(","):
                match = _SIMPLE_SELECTOR.match(selector)
                if match:
                    (classes if match.group(1) == "." else ids).add(match.group(2))
    return classes, ids


def _hides(style: str) -> bool:
    """Whether CSS declarations hide their element: one of :data:`_HIDING_STYLE`, or a zero height
    with ``overflow: hidden`` after it and no quote between (searched once per quote-free stretch:
    the first zero height in a stretch is the one with the most room after it)."""
    if _HIDING_STYLE.search(style):
        return True
    for stretch in style.split('"'):
        height = _ZERO_HEIGHT.search(stretch)
        if height and _OVERFLOW_HIDDEN.search(stretch, height.end()):
            return True
    return False


def _drop(node: Any) -> None:
    """Remove ``node`` but keep its tail text (which belongs to the parent)."""
    parent = node.getparent()
    if parent is None:
        return
    tail = node.tail
    if tail:
        previous = node.getprevious()
        if previous is not None:
            previous.tail = (previous.tail or "") + tail
        else:
            parent.text = (parent.text or "") + tail
    parent.remove(node)


def pdf_to_text(data: bytes) -> Extracted:
    """Text of a PDF, page by page."""
    pypdf = _require("pypdf")
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        pages = []
        for number, page in enumerate(reader.pages[:MAX_PDF_PAGES], start=1):
            pages.append(f"--- page {number} ---\n{(page.extract_text() or '').strip()}")
        title = (reader.metadata.title if reader.metadata else None) or None
    except pypdf.errors.PdfReadError as exc:
        raise ToolFailure(f"the PDF could not be read ({exc}).", code="bad_pdf") from None
    if len(reader.pages) > MAX_PDF_PAGES:
        pages.append(f"[only the first {MAX_PDF_PAGES} of {len(reader.pages)} pages were read]")
    return Extracted("\n\n".join(pages), title=title, kind="pdf")


def _tidy(text: str) -> str:
    return re.sub(r"\n{3,}", "\n\n", text).strip()
