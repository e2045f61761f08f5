"""From an MCP ``CallToolResult`` to what the model and the user see.

* text blocks become the tool message text;
* ``structured_content`` rides along (as JSON text when the server sent no
  text, and always in the ToolMessage ``artifact``);
* images (and other binary blocks) are decoded, size-capped and saved under
  the thread's ``outputs/mcp/<server>/``; the text gets a note with the virtual
  path and the images are presented like any deliverable (``artifact`` events);
* an ``is_error`` result carries the server's own message.

Everything is bounded: a server cannot flood the thread with megabytes of
base64 or thousands of blocks.
"""

from __future__ import annotations

import base64
import binascii
import json
import mimetypes
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deerflow.config.paths import ThreadPaths
from deerflow.sandbox.files.virtual_paths import OUTPUTS
from deerflow.threadfs import SafeDir, UnsafePath

if TYPE_CHECKING:  # a result exists only once a session (and so the MCP SDK) has loaded
    import mcp_types

MAX_BLOCKS = 50
MAX_BINARY_BYTES = 10 * 1024 * 1024
MAX_STRUCTURED_CHARS = 50_000
_IMAGE_TYPES = {"image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp"}
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass
class McpOutcome:
    """A mapped tool result."""

    text: str
    is_error: bool = False
    structured: Any = None
    files: list[str] = field(default_factory=list)
    images: list[str] = field(default_factory=list)

    def artifact(self, server: str, tool: str) -> dict[str, Any]:
        data: dict[str, Any] = {"mcp_server": server, "mcp_tool": tool}
        if self.structured is not None:
            data["structured_content"] = self.structured
        if self.files:
            data["files"] = list(self.files)
        return data


@dataclass
class _Saver:
    paths: ThreadPaths
    server: str
    stem: str
    saved: int = 0

    def save(self, data: bytes, mime: str | None) -> str:
        """Write a binary block under outputs/mcp/<server>/ and return its virtual path."""
        self.saved += 1
        ext = _IMAGE_TYPES.get(mime or "") or mimetypes.guess_extension(mime or "") or ".bin"
        relative = Path("mcp") / _SAFE.sub("_", self.server)[:80] / f"{self.stem}-{self.saved}{ext}"
        # outputs/ is writable by the sandbox: never follow a link planted at mcp/<server>/
        with SafeDir.open(self.paths.outputs, create=True) as root:
            root.write_bytes(relative.as_posix(), data)
        return str(OUTPUTS / relative.as_posix())


def map_result(result: mcp_types.CallToolResult, *, server: str, tool: str, call_id: str,
               paths: ThreadPaths | None) -> McpOutcome:
    """Map a result; binary blocks are saved only when the thread's paths are known."""
    stem = _SAFE.sub("_", f"{tool}-{call_id}")[:80]
    saver = _Saver(paths, server, stem) if paths is not None else None
    outcome = McpOutcome(text="", is_error=bool(result.is_error))
    parts: list[str] = []
    for block in result.content[:MAX_BLOCKS]:
        parts.append(_block_text(block, saver, outcome))
    if len(result.content) > MAX_BLOCKS:
        parts.append(f"[{len(result.content) - MAX_BLOCKS} more content blocks omitted]")
    structured = result.structured_content
    if structured is not None:
        dumped = json.dumps(structured, ensure_ascii=False, default=str)
        outcome.structured = structured if len(dumped) <= MAX_STRUCTURED_CHARS else {"truncated": True}
        if not any(p.strip() for p in parts):
            parts.insert(0, dumped[:MAX_STRUCTURED_CHARS])
    outcome.text = "\n".join(p for p in parts if p) or ("(no content)" if not outcome.is_error
                                                         else "the tool reported an error without a message")
    return outcome


def _block_text(block: Any, saver: _Saver | None, outcome: McpOutcome) -> str:
    import mcp_types

    if isinstance(block, mcp_types.TextContent):
        return block.text
    if isinstance(block, (mcp_types.ImageContent, mcp_types.AudioContent)):
        kind = "image" if isinstance(block, mcp_types.ImageContent) else "audio"
        return _binary(block.data, block.mime_type, kind, saver, outcome)
    if isinstance(block, mcp_types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, mcp_types.TextResourceContents):
            return f"[resource {resource.uri}]\n{resource.text}"
        return _binary(resource.blob, resource.mime_type, f"resource {resource.uri}", saver, outcome)
    if isinstance(block, mcp_types.ResourceLink):
        return f"[resource link: {block.name} {block.uri}]"
    return f"[unsupported content block: {getattr(block, 'type', type(block).__name__)}]"


def _binary(data: str, mime: str | None, kind: str, saver: _Saver | None, outcome: McpOutcome) -> str:
    if saver is None:
        return f"[{kind} ({mime or 'unknown type'}) not saved: no thread workspace]"
    if len(data) > MAX_BINARY_BYTES * 4 // 3 + 4:
        return f"[{kind} ({mime}) dropped: larger than {MAX_BINARY_BYTES // (1024 * 1024)} MB]"
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return f"[{kind} ({mime}) dropped: invalid base64]"
    try:
        path = saver.save(raw, mime)
    except UnsafePath as exc:
        return f"[{kind} ({mime}) not saved: {exc.message}]"
    outcome.files.append(path)
    if kind == "image" and (mime or "") in _IMAGE_TYPES:
        outcome.images.append(path)
    return f"[{kind} saved to {path} ({len(raw):,} bytes, {mime})]"
