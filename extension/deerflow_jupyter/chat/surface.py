"""The seam between DeerFlow's chat logic and Jupyter's chat packages.

jupyterlab-chat and the jupyter-ai persona manager change their Python API
between minor versions, so exactly one module
(:mod:`deerflow_jupyter.chat.persona`) imports them.  Everything else in this
package talks to the two small shapes defined here:

* :class:`ChatSurface` — what DeerFlow needs from *one chat*: post and edit
  markdown messages, post a MIME bundle, show a status line, and keep a small
  value (the thread id) in the chat document's metadata;
* :class:`ServerLink` — what it needs from *the server*: the harness's run
  manager (the same one the HTTP API and the notebook magics use), the
  DeerFlow user owning the server, the base URL for artifact links and the
  root directory that attachment paths are relative to.

An :class:`IncomingMessage` is a user's chat message reduced to what the
harness consumes: the text (slash commands untouched) and attached files.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from deerflow.runs.manager import RunManager


@dataclass(frozen=True)
class IncomingMessage:
    """A user's chat message as DeerFlow sees it.

    Attributes:
        text: The message body with mentions of DeerFlow itself removed.
        attachments: Attached files, as paths relative to :attr:`ServerLink.root_dir`.
        message_id: The chat message id (for logs).
        notebook: The attached notebook (``path``, ``cell_ids``) given as context; {} without one.
    """

    text: str
    attachments: tuple[str, ...] = ()
    message_id: str = ""
    notebook: dict[str, Any] = field(default_factory=dict)  # an attached notebook: see chat/notebook_context.py


class ChatSurface(Protocol):
    """One chat, as DeerFlow writes to it."""

    @property
    def chat_id(self) -> str:
        """The chat's stable id (kept in the chat file, so it survives restarts)."""
        ...

    @property
    def chat_path(self) -> str:
        """The chat file's path relative to the server root."""
        ...

    def post(self, markdown: str) -> str:
        """Add a markdown message from DeerFlow; return its id."""
        ...

    def edit(self, message_id: str, markdown: str) -> None:
        """Replace the body of a message DeerFlow posted."""
        ...

    def post_mime(self, bundle: Mapping[str, Any], *, fallback: str) -> str:
        """Add a rich message rendered from a MIME bundle (``fallback``: its plain body)."""
        ...

    def set_status(self, text: str | None) -> None:
        """Show DeerFlow's activity in the chat's writing indicator (None: clear it)."""
        ...

    def load_setting(self, key: str) -> Any:
        """A value DeerFlow stored in the chat document's metadata (None when absent)."""
        ...

    def store_setting(self, key: str, value: Any) -> None:
        """Store a small JSON value in the chat document's metadata."""
        ...


@dataclass(frozen=True)
class ServerLink:
    """What a chat session needs from the Jupyter server hosting it.

    Attributes:
        manager: Returns the server's run manager (opened lazily by the host).
        user_id: The DeerFlow user owning the server; every chat thread is theirs.
        base_url: The server's base URL (``/`` or ``/user/name/``), for artifact links.
        root_dir: The server's root directory; attachment paths are relative to it.
    """

    manager: Callable[[], Awaitable[RunManager]]
    user_id: str
    base_url: str = "/"
    root_dir: Path = field(default_factory=Path.cwd)

    def artifact_url(self, thread_id: str, relpath: str) -> str:
        """The authenticated download URL of an output file of ``thread_id``."""
        from urllib.parse import quote

        base = self.base_url if self.base_url.endswith("/") else self.base_url + "/"
        return f"{base}deerflow/api/threads/{quote(thread_id)}/artifacts/{quote(relpath)}"
