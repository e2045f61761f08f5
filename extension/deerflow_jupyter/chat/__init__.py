"""DeerFlow in JupyterLab's chat panel: a persona for jupyterlab-chat.

jupyterlab-chat draws the chat and the jupyter-ai persona manager routes
messages to personas found through the ``jupyter_ai.personas`` entry point,
which names :class:`deerflow_jupyter.chat.persona.DeerFlowPersona`.  Our
JupyterLab extension (``labextension/``) only adds to the chat input, through
jupyterlab-chat's command registry: ``@DeerFlow`` completion, and the open
notebook attached to a message for DeerFlow.

Layout (only ``persona`` imports the chat packages, whose API moves between
minor versions):

* ``surface`` — the seam: :class:`ChatSurface` (one chat) and :class:`ServerLink`
  (the server's run manager and owner);
* ``session`` — one chat's thread, its run in progress, a pending question;
* ``render`` — a run's events as a few chat messages (coalesced streaming,
  compact tool lines, artifacts, the closing summary);
* ``artifacts`` — presented files as captions and MIME bundles;
* ``clarify`` — clarification questions as text, answers parsed from messages;
* ``persona`` — the adapter to jupyterlab-chat and the persona manager.
"""

from __future__ import annotations

from deerflow_jupyter.chat.session import ChatSession
from deerflow_jupyter.chat.surface import ChatSurface, IncomingMessage, ServerLink

__all__ = ["ChatSession", "ChatSurface", "IncomingMessage", "ServerLink"]
