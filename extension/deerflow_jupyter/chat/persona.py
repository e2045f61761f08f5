"""The adapter: the only module that touches jupyterlab-chat and the jupyter-ai persona manager.

Tested with jupyterlab-chat 0.25 and jupyter-ai-persona-manager 0.3 (pinned in
``pyproject.toml``).  Their API moves between minor versions, so everything
version-specific is here and small:

* :class:`DeerFlowPersona` — the persona class behind the
  ``jupyter_ai.personas`` entry point.  The persona manager creates one per
  chat; it wraps a :class:`~deerflow_jupyter.chat.session.ChatSession` and
  forwards the three things the manager does to a persona: a message
  (:meth:`~DeerFlowPersona.process_message`), the stop button
  (:meth:`~DeerFlowPersona.cancel_response`) and shutdown.
* :class:`ChatDocument` — :class:`~deerflow_jupyter.chat.surface.ChatSurface`
  over the chat model (``YChat`` under real-time collaboration, the WebSocket
  model otherwise; both implement ``BaseChatModel``).
* :func:`server_link` — finds the server extension's harness host in the Jupyter
  server's settings (persona → persona manager → persona-manager extension →
  server; the running server for the manager's parentless one-shot route), so
  the chat and the HTTP API share one run manager.

Discoverability: a new (empty) chat gets the welcome message, and the persona
advertises its slash commands (``/new``, ``/memory``, ``/help`` and each enabled
skill) with ``report_slash_commands`` — the persona manager's own extension
point, whose front end feeds jupyterlab-chat's ``/`` completion for the persona
picked in the input.  jupyterlab-chat 0.25's own mention provider lists the
chat's users but skips bot users, and a persona is one (the ``bot`` flag also
drives the stop button and message deletion, so it is kept): ``@De`` completes
to ``@DeerFlow`` through our JupyterLab extension instead
(``labextension/src/mention.ts``, a provider on the chat's command registry,
which also records the mention on send).  DeerFlow is the default pick of the
persona selector, and ``@DeerFlow`` typed out reaches it too.

The open notebook: the same extension attaches the notebook the user last had
in focus to a message for DeerFlow that has no notebook attached
(``labextension/src/notebookContext.ts``), so it arrives here as an ordinary
notebook attachment (:mod:`~deerflow_jupyter.chat.notebook_context`).

Addressing: the persona manager routes a message to the persona picked in the
chat input (``metadata.to_persona``); DeerFlow is made the default pick by
``extension/jupyter-config``.  A message that says ``@DeerFlow`` while another
persona (or "No one") is picked is routed here too, through the jupyter-ai
router the manager already uses.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jupyter_ai_persona_manager import BasePersona, PersonaDefaults
from jupyter_ai_persona_manager.awareness_models import CommandOption
from jupyterlab_chat.models import BaseChatModel, Message, MimeModel, NewMessage

from deerflow_jupyter.chat.notebook_context import split_notebook_attachment
from deerflow_jupyter.chat.session import ChatSession, slash_commands
from deerflow_jupyter.chat.surface import IncomingMessage, ServerLink

AVATAR = Path(__file__).with_name("deerflow.svg")
PERSONA_NAME = "DeerFlow"


class ChatDocument:
    """A chat model seen through :class:`~deerflow_jupyter.chat.surface.ChatSurface`.

    Args:
        chat: The chat model.
        persona: The persona posting (its user id is the sender of every message).
    """

    def __init__(self, chat: BaseChatModel, persona: BasePersona) -> None:
        self.chat = chat
        self.persona = persona

    @property
    def chat_id(self) -> str:
        return self.chat.get_id()

    @property
    def chat_path(self) -> str:
        try:
            return self.chat.get_path()
        except ValueError:  # a YChat not yet bound to a file
            return ""

    def post(self, markdown: str) -> str:
        return self.chat.add_message(NewMessage(body=markdown, sender=self.persona.id))

    def edit(self, message_id: str, markdown: str) -> None:
        current = self.chat.get_message(message_id)
        if current is None:
            return
        current.body = markdown
        self.chat.update_message(current, append=False, trigger_actions=[])

    def post_mime(self, bundle: Mapping[str, Any], *, fallback: str) -> str:
        model = MimeModel(data=dict(bundle), trusted=False)
        return self.chat.add_message(NewMessage(body=fallback, sender=self.persona.id, mime_model=model))

    def set_status(self, text: str | None) -> None:
        if text is None:
            self.persona.clear_status()
        else:
            self.persona.set_status(text)

    def load_setting(self, key: str) -> Any:
        return self.chat.get_metadata().get(key)

    def store_setting(self, key: str, value: Any) -> None:
        self.chat.set_metadata(key, value)


def _mention(persona_name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w-])@{re.escape(persona_name)}\b:?")


def incoming(message: Message, chat: BaseChatModel, *, persona_name: str = PERSONA_NAME) -> IncomingMessage:
    """A chat message as DeerFlow's input.

    A leading ``@DeerFlow`` is dropped (the rest, slash commands included, is kept as typed);
    attachments become paths relative to the server root.
    """
    text = message.body.strip()
    while (found := _mention(persona_name).match(text)) is not None:
        text = text[found.end():].lstrip()
    known = chat.get_attachments()
    paths, notebook = split_notebook_attachment(known[a] for a in message.attachments or [] if a in known)
    return IncomingMessage(text=text, attachments=paths, message_id=message.id, notebook=notebook)


def server_link(persona: BasePersona) -> ServerLink:
    """The server's DeerFlow host and owner, for the chat this persona serves.

    Raises:
        LookupError: the DeerFlow server extension is not enabled on this server.
    """
    manager = persona.parent
    settings = _server_settings(manager)
    host = settings.get("deerflow_host")
    if host is None:
        raise LookupError("the deerflow_jupyter server extension is not enabled on this Jupyter server")
    return ServerLink(manager=host.manager, user_id=settings["deerflow_owner"],
                      base_url=getattr(manager, "base_url", "/"), root_dir=Path(manager.root_dir))


def _server_settings(persona_manager: Any) -> Mapping[str, Any]:
    """The Jupyter server's settings, where the DeerFlow extension keeps its host.

    A chat's persona manager is a child of the persona-manager extension, which knows the
    server.  The manager's one-shot route (``POST /api/ai/message/NAME``) builds a manager
    with no parent, though: then the settings are the running server's (``ServerApp`` is a
    singleton in a Jupyter server process).
    """
    extension = getattr(persona_manager, "parent", None)
    serverapp = getattr(extension, "serverapp", None) or _running_server()
    web_app = getattr(serverapp, "web_app", None)
    return getattr(web_app, "settings", None) or {}


def _running_server() -> Any:
    """This process's Jupyter server, if one was started (else None)."""
    from jupyter_server.serverapp import ServerApp

    return ServerApp.instance() if ServerApp.initialized() else None


class DeerFlowPersona(BasePersona):
    """DeerFlow, the agent, in Jupyter's chat."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.session = ChatSession(ChatDocument(self.chat, self), server_link(self))
        self._shut_down = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._follow_mentions()
        self._advertise(slash_commands())
        self.session.welcome(has_messages=bool(self.chat.get_messages()))
        self._spawn(self._advertise_skills())

    @property
    def defaults(self) -> PersonaDefaults:
        return PersonaDefaults(
            name=PERSONA_NAME,
            description="The DeerFlow agent: research, code and files in your DeerFlow threads.",
            avatar_path=str(AVATAR),
            system_prompt="(DeerFlow uses its own lead-agent prompt.)",
        )

    async def on_message(self, message: Message) -> None:
        """Refuse a message that arrives while a run is in progress; else handle it."""
        if not self.session.claim():
            self.session.refuse_busy()
            return
        try:
            await super().on_message(message)
        finally:
            self.session.release()

    async def process_message(self, message: Message) -> None:
        # Refresh the advertised skills (one may have been installed or enabled since) beside the run:
        # awaited after it, the session would stay busy meanwhile and refuse the next message.
        self._spawn(self._advertise_skills())
        await self.session.handle(incoming(message, self.chat))

    def _advertise(self, commands: list[tuple[str, str]]) -> None:
        self.report_slash_commands([CommandOption(name=name, description=text) for name, text in commands])

    async def _advertise_skills(self) -> None:
        """Add the enabled skills to the advertised commands (a failure leaves the chat's own)."""
        try:
            self._advertise(slash_commands(await self.session.skill_commands()))
        except Exception:  # completion is a convenience; the chat works without it
            self.log.warning("DeerFlow: could not list the enabled skills for / completion", exc_info=True)

    def _spawn(self, coroutine: Any) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            coroutine.close()
            return
        task = loop.create_task(coroutine)
        self._tasks.add(task)  # keep a reference until it is done
        task.add_done_callback(self._tasks.discard)

    async def cancel_response(self) -> None:
        await self.session.cancel()

    async def shutdown(self) -> None:
        self._shut_down = True
        await super().shutdown()

    def _follow_mentions(self) -> None:
        """Also answer messages that @-mention DeerFlow while the picker names someone else."""
        router = getattr(getattr(self.parent, "parent", None), "router", None)
        if router is None:
            return
        router.observe_chat_msg(self.chat.get_id(), self._on_routed_message)

    def _on_routed_message(self, chat_id: str, message: Message) -> None:
        picked = (message.metadata or {}).get("to_persona")
        # A structured mention (our labextension's completion records one) or "@DeerFlow" typed as
        # text (a lab without that extension, the one-shot route).
        addressed = self.id in (message.mentions or []) or _mention(self.name).search(message.body)
        if self._shut_down or picked == self.id or not addressed:
            return
        self._spawn(self.on_message(message))


__all__ = ["ChatDocument", "DeerFlowPersona", "incoming", "server_link"]
