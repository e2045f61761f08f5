"""DeerFlow in one chat: its thread, the run in progress, a pending question.

One :class:`ChatSession` per chat document, owned by the persona instance the
persona manager creates for that chat.  It runs the harness hosted by the
server extension — the same :class:`~deerflow.runs.manager.RunManager` the
HTTP API and the ``%deerflow`` magics use — so a chat's thread, its files and
artifacts are the ones ``deerflow threads`` and ``%deerflow --thread`` see.

* **One thread per chat file.**  The thread id is kept in the chat document's
  metadata (``deerflow_thread_id``), which the ``.chat`` file persists, and is
  derived from the chat's own stable id (``chat-{id}``) on first use — so it
  survives server restarts and is found again even if the metadata was lost.
  The thread belongs to the server's DeerFlow owner.  A stored thread that no
  longer exists is replaced by a new one, and the chat says so.
* **One run at a time.**  :meth:`claim` is taken synchronously when a
  message arrives; a message that finds the session busy is refused with a
  reply (:meth:`refuse_busy`) and never reaches the agent, so two runs never
  interleave in one chat.  The chat's stop button calls :meth:`cancel`.
* **Clarifications.**  When the thread is waiting on a clarification, the next
  message is its answer (:func:`~deerflow_jupyter.chat.clarify.answer`); an
  incomplete form answer gets a follow-up question and starts nothing.
* **Attachments** become thread uploads before the run starts (the harness
  announces them to the agent); a refused upload stops the message with a
  reply instead of running without the file.  Attachments and presented
  files are read off the event loop with a deadline
  (:func:`~deerflow.persistence.offloop.off_loop`): a hung disk stops the
  message with the same one-line reply, or captions the artifact "could not
  be read".
* **Slash commands** are not interpreted here (the text reaches the harness as
  typed, where ``/skill-name`` activates a skill), except the chat's own:
  ``/memory`` (:mod:`~deerflow_jupyter.chat.memory_command`) and ``/help``,
  answered without a run, and ``/new``, which starts a fresh thread for this
  chat (the old one is kept; ``/new TEXT`` then sends TEXT in the new thread).
  :func:`slash_commands` lists them with the enabled skills, for the chat
  input's ``/`` completion.
* **A welcome** (:data:`WELCOME`) is posted in a chat that has no message yet.
* **Other conversations** the message references (``thread:ID``, another
  chat's file name; :mod:`~deerflow_jupyter.chat.references`) are granted to
  this run's ``read_conversation``, and to nothing else.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import uuid
from collections.abc import Callable
from contextlib import suppress
from functools import partial
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from deerflow.agents.clarification_reply import pending_request
from deerflow.errors import UserError
from deerflow.persistence.offloop import DiskUnavailable, off_loop
from deerflow.run_options import RunOptions
from deerflow.runs.manager import RunManager, RunRequest
from deerflow.runs.thread_files import UploadRejected, open_off_loop
from deerflow.runtime import events as ev
from deerflow.runtime.events import SHORT_ID_CHARS
from deerflow.runtime.live import LiveRun
from deerflow.sandbox.files.virtual_paths import OUTPUTS
from deerflow.threadfs import SafeDir, UnsafePath
from deerflow_jupyter.chat.artifacts import ArtifactView, artifact_view
from deerflow_jupyter.chat.clarify import FormProgress, answer, md_escape
from deerflow_jupyter.chat.memory_command import is_memory_command, memory_line, memory_reply
from deerflow_jupyter.chat.references import referenced_threads
from deerflow_jupyter.chat.render import RunRenderer
from deerflow_jupyter.chat.surface import ChatSurface, IncomingMessage, ServerLink

THREAD_KEY = "deerflow_thread_id"
# A quoted block, so the run's text that follows in the chat does not read as part of this note.
BUSY_REPLY = ("> ⏳ I'm still working on your previous message, so this one was **not** sent to the agent. "
              "Wait for the run to finish (or press stop), then send it again.")

log = logging.getLogger(__name__)

CHAT_COMMANDS: tuple[tuple[str, str], ...] = (
    ("/new", "start a fresh DeerFlow thread for this chat (the old one is kept)"),
    ("/memory", "list what DeerFlow remembers about you; /memory add TEXT, forget ID, clear, export"),
    ("/help", "what DeerFlow can do here, and these commands"),
)
_NEW = re.compile(r"^\s*/new(?:\s+(?P<rest>.*))?$", re.DOTALL)
_HELP = re.compile(r"^\s*/help\s*$")


def _commands_markdown() -> str:
    return "\n".join(f"- `{name}` — {md_escape(text)}" for name, text in CHAT_COMMANDS)


WELCOME = (
    "👋 **DeerFlow** is an agent with its own sandbox: it researches the web, writes and runs Python, "
    "reads the files you attach (📎) and the notebook you have open (or the one you attach), and presents "
    "reports, tables and charts here. Every chat keeps "
    "one DeerFlow thread, the same one `%deerflow --thread` and `deerflow threads` see.\n\n"
    "**Commands** (type `/` for the list):\n"
    f"{_commands_markdown()}\n"
    "- `/skill-name …` — run with one of your enabled skills\n\n"
    "_Ask a question to start; the stop button cancels a run. When DeerFlow asks you something, "
    "your next message is the answer._"
)


def slash_commands(skills: list[tuple[str, str]] | None = None) -> list[tuple[str, str]]:
    """The chat's own commands, then ``/skill`` for each enabled skill (name, description)."""
    own = {name for name, _ in CHAT_COMMANDS}
    extra = [(f"/{name}", text) for name, text in skills or [] if f"/{name}" not in own]
    return [*CHAT_COMMANDS, *extra]


def derived_thread_id(chat_id: str) -> str:
    """The thread id a chat gets on first use: stable, and a valid DeerFlow id."""
    return "chat-" + re.sub(r"[^A-Za-z0-9_.@-]", "-", chat_id)[:120]


class ChatSession:
    """DeerFlow's state in one chat.

    Args:
        surface: The chat.
        server: The server's harness and owner.
        flush_interval: Seconds between pushes of streamed text (coalescing).
    """

    def __init__(self, surface: ChatSurface, server: ServerLink, *, flush_interval: float = 0.2) -> None:
        self.surface = surface
        self.server = server
        self.flush_interval = flush_interval
        self._busy = False
        self._stop_requested = False
        self._live: LiveRun | None = None
        self._progress: FormProgress | None = None
        self._seen_notices: set[str] = set()  # shown once per chat (see RunRenderer)
        self._watches: set[asyncio.Task[None]] = set()  # a finished run's memory line, still to come

    # -- one message at a time ---------------------------------------------------------------
    @property
    def busy(self) -> bool:
        return self._busy

    def claim(self) -> bool:
        """Take the session for a new message; False when a message is already being handled."""
        if self._busy:
            return False
        self._busy, self._stop_requested = True, False
        return True

    def release(self) -> None:
        self._busy = False

    def refuse_busy(self) -> None:
        """Tell the user their message was not sent because a run is in progress."""
        self.surface.post(BUSY_REPLY)

    async def cancel(self) -> bool:
        """Stop the run in progress (the chat's stop button); False when nothing was running."""
        self._stop_requested = self._busy
        live = self._live
        if live is None or live.done:
            return self._stop_requested
        manager = await self.server.manager()
        return await manager.cancel(live.run_id, self.server.user_id)

    # -- handling a message ------------------------------------------------------------------
    async def handle(self, message: IncomingMessage) -> None:
        """Run the agent on ``message`` (or take it as a clarification answer) and show the run."""
        try:
            manager = await self.server.manager()
            if is_memory_command(message.text):  # /memory: answered here, no run
                self.surface.post(await memory_reply(manager, self.server.user_id, message.text))
                return
            if _HELP.match(message.text):
                self.surface.post(WELCOME)
                return
            if (new := _NEW.match(message.text)) is not None:
                await self.new_thread(manager)
                rest = (new.group("rest") or "").strip()
                if not rest and not message.attachments:
                    return
                message = IncomingMessage(text=rest, attachments=message.attachments, message_id=message.message_id)
            thread_id = await self.thread_id(manager)
            uploaded = await self._upload(manager, thread_id, message.attachments)
            prompt = await self._prompt(manager, thread_id, message.text, uploaded)
            if prompt is None:
                return
            if self._stop_requested:
                self.surface.post("**⏹ Stopped** before the run started.")
                return
            refs = await referenced_threads(manager, self.server.user_id, message.text, current=thread_id)
            # an attached notebook is the run's read-only context (chat/notebook_context.py)
            live = await manager.start(RunRequest(prompt=prompt, thread_id=thread_id, user_id=self.server.user_id,
                                                  options=RunOptions(referenced_threads=refs or None,
                                                                     notebook_context=message.notebook or None)))
        except UserError as exc:
            self.surface.post(f"⚠️ {md_escape(exc)}")
            return
        await self._follow(manager, live, thread_id, uploaded)

    async def thread_id(self, manager: RunManager) -> str:
        """This chat's thread, created on first use (see the module docstring)."""
        user = self.server.user_id
        stored = self.surface.load_setting(THREAD_KEY)
        derived = derived_thread_id(self.surface.chat_id)
        candidates = [stored] if isinstance(stored, str) and stored else []
        found = None
        for tid in [*candidates, derived]:
            if await manager.find_thread(tid, user) is not None:
                found = tid
                break
        if found is None:
            found = (await manager.acreate_thread(user, thread_id=derived, metadata={
                "source": "jupyter-chat", "chat_path": self.surface.chat_path})).thread_id
        if found != stored:
            self.surface.store_setting(THREAD_KEY, found)
            if candidates:
                self.surface.post(f"ℹ️ The DeerFlow thread this chat used (`{md_escape(stored)}`) no longer "
                                  f"exists; continuing in thread `{found}`.")
        return found

    async def new_thread(self, manager: RunManager) -> str:
        """Start a fresh thread for this chat (``/new``); the previous one stays, listed by ``deerflow threads``."""
        previous = self.surface.load_setting(THREAD_KEY)
        thread_id = f"{derived_thread_id(self.surface.chat_id)[:100]}-{uuid.uuid4().hex[:SHORT_ID_CHARS]}"
        await manager.acreate_thread(self.server.user_id, thread_id=thread_id, metadata={
            "source": "jupyter-chat", "chat_path": self.surface.chat_path})
        self.surface.store_setting(THREAD_KEY, thread_id)
        self._progress = None
        kept = f" The previous thread, `{md_escape(previous)}`, is kept." if isinstance(previous, str) and previous else ""
        self.surface.post(f"🆕 **New thread** `{thread_id}`: DeerFlow starts from a clean slate here.{kept}")
        return thread_id

    def welcome(self, has_messages: bool) -> bool:
        """Post :data:`WELCOME` in a chat with no message yet; True when posted."""
        if has_messages:
            return False
        self.surface.post(WELCOME)
        return True

    async def skill_commands(self) -> list[tuple[str, str]]:
        """``(name, description)`` of the owner's enabled skills (read from disk off the event loop)."""

        manager = await self.server.manager()
        library = manager.skills
        if library is None:
            return []
        infos = await off_loop(library.skills, self.server.user_id, what="listing the skills")
        return [(i.name, i.description) for i in infos if i.enabled]

    async def _upload(self, manager: RunManager, thread_id: str, attachments: tuple[str, ...]) -> list[str]:
        """Copy attached files into the thread's uploads (through ``manager.files``); returns their names.

        Raises:
            UserError: an attachment outside the server root, missing, or refused.
        """
        names = []
        for rel in attachments:
            try:
                source = await open_off_loop(partial(_open_attachment, self.server.root_dir, rel), _close,
                                             what=f"opening the attachment {rel}")
            except DiskUnavailable as exc:
                raise UserError(f"{exc}; nothing was sent") from None
            if source is None:
                raise UserError(f"the attachment {rel} is not a file under the Jupyter root; nothing was sent")
            try:
                info = await manager.files.upload(self.server.user_id, thread_id, PurePosixPath(rel).name,
                                                  source)
            except UploadRejected as exc:
                raise UserError(f"the attachment {rel} was refused: {exc.reason}; nothing was sent") from None
            except DiskUnavailable as exc:
                raise UserError(f"{exc}; nothing was sent") from None
            finally:  # off the loop: a close waits for a read still running on an abandoned call
                with suppress(DiskUnavailable):  # then it closes when that read ends; the answer stands
                    await off_loop(source.close, what=f"closing the attachment {rel}")
            names.append(info.name)
        return names

    async def _prompt(self, manager: RunManager, thread_id: str, text: str, uploaded: list[str]) -> str | None:
        """The next run's input, or None when a follow-up question was asked instead."""
        text = text.strip() or ("I attached " + ", ".join(uploaded) + "." if uploaded else "")
        values = await manager.thread_values(thread_id, self.server.user_id)
        request = pending_request(values.get("messages", []))
        if request is None:
            self._progress = None
            return text
        request_id = str(request.get("request_id", ""))
        if self._progress is None or self._progress.request_id != request_id:
            self._progress = FormProgress(request_id)
        outcome = answer(request, text, self._progress)
        if outcome.follow_up is not None:
            self.surface.post(outcome.follow_up)
            return None
        self._progress = None
        return outcome.prompt

    # -- showing the run ---------------------------------------------------------------------
    async def _follow(self, manager: RunManager, live: LiveRun, thread_id: str, uploaded: list[str]) -> None:
        # an artifact's view reads its file: built off the event loop before the renderer shows it
        views: dict[str, ArtifactView] = {}
        renderer = RunRenderer(self.surface, thread_id=thread_id, artifact=views.pop,
                               link=partial(self.server.artifact_url, thread_id), seen_notices=self._seen_notices)
        for name in uploaded:
            renderer.note(f"upload:{name}", f"📎 `{md_escape(name)}` added to the thread's uploads")
        self._live = live
        ticker = asyncio.create_task(self._tick(renderer))
        try:
            async for event in live.stream():
                if isinstance(event, ev.Artifact):
                    views[event.path] = await self._artifact_view(manager, thread_id, event.path)
                renderer.handle(event)
        finally:
            ticker.cancel()
            with suppress(asyncio.CancelledError):
                await ticker
            self._live = None
            renderer.flush()
            self.surface.set_status(None)
        if live.record.status == "success":  # memory learns after the run: its line comes later, if at all
            watch = asyncio.create_task(self._memory_line(manager, live.run_id))
            self._watches.add(watch)
            watch.add_done_callback(self._watches.discard)

    async def _memory_line(self, manager: RunManager, run_id: str) -> None:
        line = await memory_line(manager, self.server.user_id, run_id)
        if line:
            self.surface.post(line)

    async def _tick(self, renderer: RunRenderer) -> None:
        while True:
            await asyncio.sleep(self.flush_interval)
            renderer.flush()

    async def _artifact_view(self, manager: RunManager, thread_id: str, path: str) -> ArtifactView:
        """The artifact's view, built off the event loop; past the deadline its caption says it
        could not be read (the run goes on being shown)."""
        try:
            return await off_loop(self._artifact, manager, thread_id, path, what="reading the artifact")
        except DiskUnavailable as exc:
            problem = exc

        def unreadable() -> bytes:
            raise problem

        return self._artifact(manager, thread_id, path, read=unreadable)

    def _artifact(self, manager: RunManager, thread_id: str, path: str,
                  read: Callable[[], bytes] | None = None) -> ArtifactView:
        relpath = path.removeprefix(f"{OUTPUTS}/")
        return artifact_view(path, url=self.server.artifact_url(thread_id, relpath),
                             read=read or partial(self._read_output, manager, thread_id, path))

    def _read_output(self, manager: RunManager, thread_id: str, path: str) -> bytes:
        return manager.files.read_artifact_blocking(self.server.user_id, thread_id, path).data


def _close(source: BinaryIO | None) -> None:
    if source is not None:
        source.close()


def _open_attachment(root: Path, rel: str) -> BinaryIO | None:
    """The regular file ``rel`` names under the Jupyter root, opened through SafeDir (no link
    followed, no FIFO or device, nothing swapped in between a check and the read: thread folders
    may lie under the root); None for anything else."""
    try:
        with SafeDir.open(root, label="the Jupyter root") as base:
            return os.fdopen(base.open_file(rel), "rb")
    except UnsafePath:
        return None


__all__ = ["BUSY_REPLY", "CHAT_COMMANDS", "THREAD_KEY", "WELCOME", "ChatSession", "derived_thread_id", "slash_commands"]

