"""view_image: a vision model sees an image in its next request, and only there."""

from __future__ import annotations

import asyncio
import base64
import struct
import zlib
from pathlib import Path

import pytest

from deerflow.config.paths import HomePaths
from deerflow.models.scripted import ScriptedChatModel
from deerflow.runtime import events as ev
from deerflow.tools.builtins.view_image import check_size, load_image, sniff_image_type
from deerflow.tools.errors import ToolFailure
from fixtures.agent_runs import AgentHarness

CHART = "/mnt/user-data/uploads/chart.png"


def tiny_png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0\xff\0\0"))
            + chunk(b"IEND", b""))


def upload(harness: AgentHarness, name: str, data: bytes) -> Path:
    path = HomePaths(harness.home).thread("local", harness.thread_id).ensure().uploads / name
    path.write_bytes(data)
    return path


def image_blocks(messages: list) -> list[dict]:
    return [b for m in messages if isinstance(m.content, list)
            for b in m.content if isinstance(b, dict) and b.get("type") == "image"]


def view(path: str) -> dict:
    return {"name": "view_image", "args": {"image_path": path}}


def test_the_image_goes_into_the_next_request_only(tmp_path):
    harness = AgentHarness(tmp_path)
    upload(harness, "chart.png", tiny_png())
    model = ScriptedChatModel(script={"turns": [
        {"text": "Let me look.", "tool_calls": [view(CHART)]},
        {"text": "A one-pixel chart. Checking outputs.",
         "tool_calls": [{"name": "ls", "args": {"path": "/mnt/user-data/outputs"}}]},
        "It shows a single red pixel.",
    ]})
    run = asyncio.run(harness.run(model, "What is in my chart?", supports_vision=True))

    assert run.status == "success"
    assert "view_image" in model.calls[0].tools
    assert image_blocks(model.calls[0].messages) == []
    [block] = image_blocks(model.calls[1].messages)
    assert block["mime_type"] == "image/png"
    assert base64.b64decode(block["base64"]) == tiny_png()
    carrier = model.calls[1].messages[-1]
    assert carrier.type == "human" and CHART in carrier.text  # after the tool result, labelled
    assert image_blocks(model.calls[2].messages) == []  # not shown again
    assert image_blocks(run.values["messages"]) == []  # never stored in the history
    assert run.values["viewed_images"] == {CHART: {"base64": "", "mime_type": "image/png"}}
    [result] = [r for r in run.of(ev.ToolResult) if r.name == "view_image"]
    assert result.status == "success" and "attached to your next step" in result.text


def test_a_model_without_vision_gets_no_view_image(tmp_path):
    model = ScriptedChatModel(script=["No images here."])
    asyncio.run(AgentHarness(tmp_path).run(model, "hello"))
    assert "view_image" not in model.calls[0].tools


@pytest.mark.parametrize(
    ("path", "content", "code", "needle"),
    [
        ("/mnt/user-data/uploads/missing.png", None, "not_found", "does not exist"),
        ("/mnt/user-data/uploads/notes.png", b"just text, not a picture", "unsupported_image",
         "not a PNG, JPEG, WebP or GIF image"),
        ("/mnt/user-data/uploads/empty.png", b"", "bad_image", "is empty"),
        ("/etc/passwd", None, "path_outside_mounts", "/etc/passwd"),
    ],
)
def test_bad_images_are_clear_errors_for_the_model(tmp_path, path, content, code, needle):
    harness = AgentHarness(tmp_path)
    if content is not None:
        upload(harness, path.rsplit("/", 1)[-1], content)
    model = ScriptedChatModel(script={"turns": [{"text": "", "tool_calls": [view(path)]}, "Sorry."]})
    run = asyncio.run(harness.run(model, "look", supports_vision=True))
    [result] = run.of(ev.ToolResult)
    assert (result.status, result.code) == ("error", code)
    assert needle in result.text
    assert str(tmp_path) not in result.text  # host paths never reach the model
    assert image_blocks(model.calls[1].messages) == []


def test_formats_are_recognised_by_their_bytes():
    assert sniff_image_type(tiny_png()) == "image/png"
    assert sniff_image_type(b"\xff\xd8\xff\xe0rest") == "image/jpeg"
    assert sniff_image_type(b"GIF89a....") == "image/gif"
    assert sniff_image_type(b"RIFF\0\0\0\0WEBPVP8 ") == "image/webp"
    assert sniff_image_type(b"%PDF-1.7") is None
    assert load_image(tiny_png(), shown_path="/x.png")[0] == "image/png"


def test_oversized_images_are_refused_before_reading():
    check_size(100, shown_path="/x.png", max_bytes=100)
    with pytest.raises(ToolFailure, match="images up to") as caught:
        check_size(101, shown_path="/mnt/user-data/uploads/x.png", max_bytes=100)
    assert caught.value.code == "image_too_large"
