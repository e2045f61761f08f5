"""Starting the web and browser capabilities of a host.

:func:`open_browsing_services` is called once when the run manager opens.
It builds the web service (``services.web``) and, when ``browser.enabled``,
starts the browser session manager (``services.browser``) and registers its
shutdown on the manager's exit stack.  Any problem — an unknown search
provider, Playwright or Chromium missing, a browser that does not start, an
unguarded CDP endpoint without opt-in — is a ``ConfigError`` here, so the CLI
and the server fail at startup with the fix in the message rather than on the
model's first browser call.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

from deerflow.config.schema import AppConfig
from deerflow.errors import UserError
from deerflow.runtime.services import HostServices

if TYPE_CHECKING:
    from deerflow.browser.manager import BrowserSessionManager
    from deerflow.web.service import WebService

async def open_browsing_services(config: AppConfig, stack: AsyncExitStack, *,
                                 config_file: str | None = None) -> tuple[WebService | None, BrowserSessionManager | None]:
    """The ``web`` and ``browser`` services ``config`` asks for (ConfigError when unusable)."""
    web = browser = None
    if config.web.enabled:
        from deerflow.web.service import WebService

        web = WebService.from_config(config.web, config_file=config_file)
    if config.browser.enabled:
        from deerflow.browser.manager import BrowserSessionManager

        browser = BrowserSessionManager(config.browser, config_file=config_file)
        await browser.start()
        stack.push_async_callback(browser.aclose)
    return web, browser


async def live_frames(services: HostServices, thread_id: str, owner: str, *, interval: float = 0.5,
                      max_frames: int | None = None) -> AsyncGenerator[bytes, None]:
    """JPEG frames of ``thread_id``'s browser page for its owner (the client's and server's live view).

    The caller has already checked that ``owner`` owns the thread; the session
    manager checks it owns the session too.  Stops after ``max_frames`` if given.

    Raises:
        UserError: the browser is not enabled on this host.
        ToolFailure: no session, another viewer is watching, or not the owner.
    """
    browser = services.browser
    if browser is None:
        raise UserError("the browser is not enabled: set browser.enabled: true in config.yaml")
    count = 0
    async with contextlib.aclosing(browser.live_frames(thread_id, owner, interval=interval)) as frames:
        async for frame in frames:
            yield frame
            count += 1
            if max_frames is not None and count >= max_frames:
                return
