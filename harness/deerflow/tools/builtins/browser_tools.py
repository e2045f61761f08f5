"""The browser tools (group ``browser``, offered when ``browser.enabled``).

``browser_navigate``, ``browser_snapshot``, ``browser_click``, ``browser_type``,
``browser_get_text``, ``browser_back``, ``browser_screenshot``, ``browser_close``.

Each is a thin boundary over the host's
:class:`~deerflow.browser.manager.BrowserSessionManager`
(``runtime.context.services.browser``), keyed by the run's thread and
owned by its user.  Every action answers with a fresh snapshot whose
interactive elements carry ``[ref]`` numbers; the model acts by ref.  Page
text is untrusted: it is neutralized and framed with its URL and time
(:mod:`deerflow.web.untrusted`).  URLs the model gives are checked by the
guard before the browser sees them (a clear refusal instead of a blocked
page); everything the page itself requests is checked by the session's proxy.

Screenshots are written under ``/mnt/user-data/outputs/screenshots/`` and
added to the thread's artifacts, so every UI shows them inline as
``artifact`` events; with a vision model they are also shown to the model.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import re
from collections.abc import Awaitable, Callable, Coroutine
from typing import Annotated, Any, TypeVar
from urllib.parse import urlsplit

from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.types import Command

from deerflow.browser.manager import BrowserSessionManager
from deerflow.browser.session import ActionResult, BrowserSession
from deerflow.errors import ToolFailure
from deerflow.runtime.context import RunContext
from deerflow.runtime.services import services_of
from deerflow.sandbox.files.virtual_paths import OUTPUTS
from deerflow.threadfs import SafeDir, UnsafePath
from deerflow.tools.offload import OFFLOADER
from deerflow.web.fetch import utc_now
from deerflow.web.untrusted import Provenance, wrap_untrusted
from deerflow.web.url_guard import UrlRejected

SCREENSHOT_DIR = "screenshots"
MAX_TEXT_CHARS = 60_000
T = TypeVar("T")

Reply = tuple[str, dict[str, Any]]
UrlArg = Annotated[str, "The http(s) URL to open."]
RefArg = Annotated[int, "The [ref] number of the element, from the latest snapshot."]
TextArg = Annotated[str, "The text to enter (for a select: the option's label)."]
SubmitArg = Annotated[bool, "Press Enter afterwards (submits most forms)."]
OptionalRefArg = Annotated[int | None, "Limit to the element with this [ref]; omit for the whole page."]
MaxCharsArg = Annotated[int, "Most characters to return (default 20000, at most 60000)."]
FullPageArg = Annotated[bool, "Capture the whole scrollable page instead of the visible viewport."]
FilenameArg = Annotated[str | None, "File name for the PNG (e.g. 'pricing.png'); omit for an automatic one."]


def _manager(runtime: ToolRuntime[RunContext]) -> BrowserSessionManager:
    manager = services_of(runtime.context).browser
    if manager is None:
        raise ToolFailure("the browser is not available in this session (browser.enabled is off or the host "
                          "did not start it); use web_fetch to read pages instead.", code="browser_unavailable")
    return manager


async def _act(runtime: ToolRuntime[RunContext], action: Callable[[BrowserSession], Awaitable[T]], *,
               create: bool = True) -> tuple[T, list[str]]:
    ctx = runtime.context
    return await _manager(runtime).act(ctx.thread_id, ctx.user_id, action, create=create)


def _sync(coro_fn: Callable[..., Coroutine[Any, Any, T]]) -> Callable[..., T]:
    """The synchronous twin of a tool coroutine, for ``invoke`` (no running loop in that thread)."""

    @functools.wraps(coro_fn)
    def run(*args: Any, **kwargs: Any) -> T:
        return asyncio.run(coro_fn(*args, **kwargs))

    return run


def render_action(result: ActionResult, notes: list[str], *, unguarded: bool) -> Reply:
    """Model text (action line, notes, framed snapshot) and UI artifact of an action."""
    snap = result.snapshot
    details = [f"{len(snap.refs)} interactive element(s)"]
    if unguarded:
        details.append("UNGUARDED browser (CDP): requests are not screened")
    lines = [result.message, *notes]
    if result.blocked:
        shown = "; ".join(f"{b.url} ({b.reason})" for b in _distinct(result.blocked)[:5])
        lines.append(f"The URL guard blocked {len(result.blocked)} request(s) of this page: {shown}")
    framed = wrap_untrusted(snap.render(), Provenance(source=snap.url, fetched_at=utc_now(), details=details))
    artifact = {"status": "ok", "url": snap.url, "title": snap.title, "refs": len(snap.refs),
                "blocked": [{"url": b.url, "reason": b.reason} for b in result.blocked]}
    return "\n".join(lines) + "\n\n" + framed, artifact


def _distinct(blocked: list[Any]) -> list[Any]:
    seen: dict[tuple[str, str], Any] = {}
    for b in blocked:
        seen.setdefault((urlsplit(b.url).netloc, b.reason), b)
    return list(seen.values())


async def _reply(runtime: ToolRuntime[RunContext], action: Callable[[BrowserSession], Awaitable[ActionResult]],
                 *, create: bool = True) -> Reply:
    result, notes = await _act(runtime, action, create=create)
    return render_action(result, notes, unguarded=not _manager(runtime).guarded)


URL_CHECK_DEADLINE_S = 20.0
"""How long checking a URL (the guard resolves its host: a resolver that never answers blocks
``getaddrinfo``, which has no timeout of its own) may take on the tool offloader."""
SAVE_DEADLINE_S = 30.0
"""How long saving a screenshot (a few MB written into the thread's outputs) may take."""


async def _offloaded(runtime: ToolRuntime[RunContext], fn: Callable[..., T], *args: Any, what: str,
                     deadline: float, **kwargs: Any) -> T:
    """``fn`` on the run's tool offloader under its thread's key (``tool_timeout`` past ``deadline``)."""
    ctx = runtime.context
    offloader = services_of(ctx).offloader or OFFLOADER
    return await offloader.arun(fn, *args, key=str(getattr(ctx, "thread_id", "")), what=what, deadline=deadline,
                                **kwargs)


def _check_url(runtime: ToolRuntime[RunContext], url: str) -> str:
    url = url.strip()
    if "://" not in url and re.match(r"^[\w.-]+\.[a-z]{2,}(/|$)", url, re.IGNORECASE):
        url = "https://" + url  # "example.com/page" means the web page, as in an address bar
    try:
        _manager(runtime).guard.check(url)
    except UrlRejected as exc:
        raise ToolFailure(f"{exc}. The browser only opens public http(s) URLs.", code="url_blocked") from None
    return url


async def abrowser_navigate(url: UrlArg, runtime: ToolRuntime[RunContext]) -> Reply:
    checked = await _offloaded(runtime, _check_url, runtime, url, what="checking the URL",
                               deadline=URL_CHECK_DEADLINE_S)
    return await _reply(runtime, lambda s: s.navigate(checked))


async def abrowser_snapshot(runtime: ToolRuntime[RunContext]) -> Reply:
    async def look(session: BrowserSession) -> ActionResult:
        return ActionResult("Current page:", await session.snapshot())
    return await _reply(runtime, look, create=False)


async def abrowser_click(ref: RefArg, runtime: ToolRuntime[RunContext]) -> Reply:
    return await _reply(runtime, lambda s: s.click(ref), create=False)


async def abrowser_type(ref: RefArg, text: TextArg, runtime: ToolRuntime[RunContext],
                        submit: SubmitArg = False) -> Reply:
    return await _reply(runtime, lambda s: s.type_text(ref, text, submit=submit), create=False)


async def abrowser_back(runtime: ToolRuntime[RunContext]) -> Reply:
    return await _reply(runtime, lambda s: s.back(), create=False)


async def abrowser_get_text(runtime: ToolRuntime[RunContext], ref: OptionalRefArg = None,
                            max_chars: MaxCharsArg = 20_000) -> Reply:
    if not 1 <= max_chars <= MAX_TEXT_CHARS:
        raise ToolFailure(f"max_chars must be between 1 and {MAX_TEXT_CHARS}", code="invalid_argument")
    (url, title, text), _notes = await _act(runtime, lambda s: s.text(ref), create=False)
    details = [f"title {title!r}"] if title else []
    if len(text) > max_chars:
        details.append(f"showing the first {max_chars:,} of {len(text):,} characters")
    framed = wrap_untrusted(text[:max_chars] or "(no visible text)",
                            Provenance(source=url, fetched_at=utc_now(), details=details))
    return framed, {"status": "ok", "url": url, "title": title, "chars": len(text)}


def make_screenshot(*, vision: bool) -> Callable[..., Coroutine[Any, Any, Command]]:
    """``browser_screenshot``; with ``vision`` the picture is also shown to the model in its next step."""

    async def abrowser_screenshot(runtime: ToolRuntime[RunContext], full_page: FullPageArg = False,
                                  ref: OptionalRefArg = None, filename: FilenameArg = None) -> Command:
        async def shoot(session: BrowserSession) -> tuple[bytes, str, str]:
            data = await session.screenshot(full_page=full_page, ref=ref)
            page = await session.current_page()
            return data, page.url, await page.title()

        (data, url, title), notes = await _act(runtime, shoot, create=False)
        virtual = await _offloaded(runtime, save_screenshot, runtime.context, data, filename=filename,
                                   label=title or urlsplit(url).hostname or "page", what="saving the screenshot",
                                   deadline=SAVE_DEADLINE_S)
        text = "\n".join([*notes, f"Saved a screenshot of {url} ({title or 'untitled'}) to {virtual} "
                          f"({len(data) / 1024:.1f} KB); the user sees it inline."])
        message = ToolMessage(content=text, tool_call_id=runtime.tool_call_id, name="browser_screenshot",
                              artifact={"status": "ok", "path": virtual, "url": url, "title": title,
                                        "bytes": len(data)})
        update: dict[str, Any] = {"artifacts": [virtual], "messages": [message]}
        if vision:
            update["viewed_images"] = {virtual: {"base64": base64.b64encode(data).decode("ascii"),
                                                 "mime_type": "image/png"}}
        return Command(update=update)

    return abrowser_screenshot


def save_screenshot(ctx: RunContext, data: bytes, *, filename: str | None, label: str) -> str:
    """Write ``data`` under the thread's outputs; returns the virtual path.

    outputs/ is writable by the agent's code, so the file goes through the
    outputs' SafeDir: a link planted at ``screenshots/`` or at the file's
    name is never followed, and automatic names are claimed with ``O_EXCL``.
    """
    try:
        with SafeDir.open(ctx.paths.outputs, create=True, label=str(OUTPUTS)) as root:
            root.makedirs(SCREENSHOT_DIR)
            if filename:
                name = _requested_name(filename)
                root.write_bytes(f"{SCREENSHOT_DIR}/{name}", data)
            else:
                name = _claim_auto_name(root, data, label)
    except UnsafePath as exc:
        raise ToolFailure(f"The screenshot could not be saved: {exc.message}.", code="not_saved") from None
    return f"{OUTPUTS}/{SCREENSHOT_DIR}/{name}"


async def abrowser_close(runtime: ToolRuntime[RunContext]) -> str:
    ctx = runtime.context
    closed = await _manager(runtime).close_session(ctx.thread_id, ctx.user_id)
    return "Closed this thread's browser session." if closed else "This thread had no open browser session."


def _requested_name(requested: str) -> str:
    """The model's file name made safe (letters, digits, ``-``, ``_``, ``.``), as ``.png``."""
    stem = re.sub(r"[^\w.-]+", "-", requested.strip()).strip(".-")
    stem = re.sub(r"\.png$", "", stem, flags=re.IGNORECASE)[:80]
    if not stem:
        raise ToolFailure("filename has no usable characters; use letters, digits, '-' or '_'.",
                          code="invalid_argument")
    return f"{stem}.png"


def _claim_auto_name(root: SafeDir, data: bytes, label: str) -> str:
    """Write ``data`` to the first free ``<slug>-NNN.png`` (claimed atomically)."""
    slug = re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")[:40] or "page"
    for number in range(1, 10_000):
        name = f"{slug}-{number:03d}.png"
        try:
            root.create_exclusive(f"{SCREENSHOT_DIR}/{name}", data)
        except UnsafePath as exc:
            if exc.code == "exists":
                continue
            raise
        return name
    raise UnsafePath("exists", SCREENSHOT_DIR, "too many screenshots with this name")


DESCRIPTIONS = {
    "browser_navigate": "Open a public http(s) URL in this thread's browser tab and return a snapshot of the "
                        "page: its text, with interactive elements marked [ref]. The tab (cookies, history) "
                        "persists across turns.",
    "browser_snapshot": "Return a fresh snapshot of the current page (text plus [ref] elements). Use it when "
                        "the page may have changed or a ref is stale.",
    "browser_click": "Click the element with the given [ref] from the latest snapshot; returns the new snapshot.",
    "browser_type": "Type text into the input, textarea or select with the given [ref] (replacing what is "
                    "there); submit=true presses Enter. Returns the new snapshot.",
    "browser_get_text": "Return the full visible text of the current page, or of one element by [ref].",
    "browser_back": "Go back to the previous page in this tab's history; returns its snapshot.",
    "browser_screenshot": "Save a PNG screenshot of the current page (viewport, full page, or one [ref] "
                          "element) to /mnt/user-data/outputs/screenshots/; the user sees it inline.",
    "browser_close": "Close this thread's browser session (tab, cookies, history) when you are done browsing.",
}


def browser_tools(*, vision: bool = False) -> list[BaseTool]:
    """The browser tools; ``vision`` also shows screenshots to the model."""
    screenshot = make_screenshot(vision=vision)
    coroutines: dict[str, Callable[..., Coroutine[Any, Any, Any]]] = {
        "browser_navigate": abrowser_navigate, "browser_snapshot": abrowser_snapshot,
        "browser_click": abrowser_click, "browser_type": abrowser_type, "browser_get_text": abrowser_get_text,
        "browser_back": abrowser_back, "browser_screenshot": screenshot, "browser_close": abrowser_close,
    }
    tools: list[BaseTool] = []
    for name, coro in coroutines.items():
        plain = name in ("browser_screenshot", "browser_close")
        tools.append(StructuredTool.from_function(
            func=_sync(coro), coroutine=coro, name=name, description=DESCRIPTIONS[name],
            response_format="content" if plain else "content_and_artifact"))
    return tools
