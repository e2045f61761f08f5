"""Shows images the model asked to see, in its next request only.

``view_image`` records a picture in ``viewed_images`` (path → base64 + MIME
type).  Before the next model call this middleware appends one user-role
message to the *request* holding an image content block per pending picture —
the stored conversation never contains the bytes.  After that call the entries
are kept but their bytes dropped (``base64 == ""``), so the state still says
what was viewed while later requests and checkpoints stay small.  Viewing the
same file again makes it pending again.

Added to the chain only when the run's model supports vision, like the tool.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse
from langchain_core.messages import HumanMessage
from langgraph.types import Command

from deerflow.runtime.notes import NOTE_KEY


def pending_images(viewed: Mapping[str, Mapping[str, str]] | None) -> dict[str, Mapping[str, str]]:
    """Viewed images whose bytes have not been shown to the model yet."""
    return {path: image for path, image in (viewed or {}).items() if image.get("base64")}


def image_message(images: Mapping[str, Mapping[str, str]]) -> HumanMessage:
    """The request-only message carrying the pending images, each labelled with its path."""
    blocks: list[str | dict[str, Any]] = [{
        "type": "text",
        "text": "Here are the images you asked to view with view_image: " + ", ".join(images) + ".",
    }]
    for path, image in images.items():
        blocks.append({"type": "text", "text": f"Image {path}:"})
        blocks.append({"type": "image", "base64": image["base64"], "mime_type": image["mime_type"]})
    return HumanMessage(content=blocks, additional_kwargs={NOTE_KEY: "viewed_images"})


def shown_update(images: Mapping[str, Mapping[str, str]]) -> dict[str, dict[str, str]]:
    """The ``viewed_images`` write that keeps the record of each image but drops its bytes."""
    return {path: {"base64": "", "mime_type": image["mime_type"]} for path, image in images.items()}


class ViewImageMiddleware(AgentMiddleware):
    """Attaches pending viewed images to the next model request, then marks them shown."""

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse | ExtendedModelResponse:
        images = pending_images(request.state.get("viewed_images"))
        if not images:
            return handler(request)
        response = handler(request.override(messages=[*request.messages, image_message(images)]))
        return ExtendedModelResponse(response, Command(update={"viewed_images": shown_update(images)}))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse | ExtendedModelResponse:
        images = pending_images(request.state.get("viewed_images"))
        if not images:
            return await handler(request)
        response = await handler(request.override(messages=[*request.messages, image_message(images)]))
        return ExtendedModelResponse(response, Command(update={"viewed_images": shown_update(images)}))
