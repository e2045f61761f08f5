"""``view_image``: let a vision model look at an image file of the thread.

A tool result can only carry text for most providers, so the tool does not
return the picture: it checks the file and records it in the thread's
``viewed_images`` state (virtual path → base64 + MIME type).  The view-image
middleware then shows it to the model in the next request as an image content
block, once (see :mod:`deerflow.agents.middlewares.view_image`).

Only virtual paths are accepted (any mount the thread can read), only PNG,
JPEG, WebP and GIF, recognised by their bytes rather than trusted from the
extension, and only up to :data:`MAX_IMAGE_BYTES`.  The tool is offered only
when the run's model has ``supports_vision: true``.
"""

from __future__ import annotations

import base64
from typing import Annotated

from langchain.tools import InjectedToolCallId, ToolRuntime
from langchain_core.messages import ToolMessage
from langgraph.types import Command

from deerflow.errors import ToolFailure
from deerflow.runtime.context import RunContext
from deerflow.tools.builtins.file_tools import model_errors, thread_fs
from deerflow.tools.schema import as_tool

MAX_IMAGE_BYTES = 5 * 1024 * 1024
"""Largest image sent to the model; bigger ones cost many tokens and some providers refuse them."""

SUPPORTED = "PNG, JPEG, WebP or GIF"


def sniff_image_type(data: bytes) -> str | None:
    """The MIME type of ``data`` from its magic bytes, None when it is no supported image."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def check_size(size: int, *, shown_path: str, max_bytes: int = MAX_IMAGE_BYTES) -> None:
    """Refuse empty and oversized files before their bytes are read.

    Raises:
        ToolFailure: ``bad_image`` (empty) or ``image_too_large``.
    """
    if size == 0:
        raise ToolFailure(f"{shown_path} is empty.", code="bad_image")
    if size > max_bytes:
        raise ToolFailure(
            f"{shown_path} is {size / 1_048_576:.1f} MB; images up to {max_bytes / 1_048_576:.0f} MB "
            "can be viewed. Make a smaller copy first (for example with PIL in the python tool).",
            code="image_too_large")


def load_image(data: bytes, *, shown_path: str, max_bytes: int = MAX_IMAGE_BYTES) -> tuple[str, str]:
    """Validate image bytes and return ``(mime_type, base64)``.

    Raises:
        ToolFailure: empty, too large, or not a supported image format.
    """
    check_size(len(data), shown_path=shown_path, max_bytes=max_bytes)
    mime = sniff_image_type(data)
    if mime is None:
        raise ToolFailure(
            f"{shown_path} is not a {SUPPORTED} image. Convert it first, or read it as text if it is text.",
            code="unsupported_image")
    return mime, base64.b64encode(data).decode("ascii")


@as_tool("view_image")
def view_image(
    image_path: str,
    runtime: ToolRuntime[RunContext],
    tool_call_id: Annotated[str, InjectedToolCallId],
) -> Command:
    """Look at an image file (PNG, JPEG, WebP or GIF, up to 5 MB).

    The image is shown to you in your next step. Use it for charts you made,
    screenshots and uploaded pictures.

    Args:
        image_path: Virtual path of the image, e.g. /mnt/user-data/outputs/chart.png.
    """
    vfs = thread_fs(runtime)
    with model_errors(vfs):
        located = vfs.locate(image_path, write=False)
        size = vfs.size(image_path)
        if size is None:
            raise ToolFailure(f"{located.virtual} does not exist or is not a regular file.", code="not_found")
        check_size(size, shown_path=located.virtual)
        _, raw = vfs.read_bytes(image_path, max_bytes=MAX_IMAGE_BYTES)
        size = len(raw)
        mime, data = load_image(raw, shown_path=located.virtual)
    text = f"Loaded {located.virtual} ({mime}, {size / 1024:.1f} KB). The image is attached to your next step."
    return Command(update={
        "viewed_images": {located.canonical: {"base64": data, "mime_type": mime}},
        "messages": [ToolMessage(content=text, tool_call_id=tool_call_id, name="view_image")],
    })
