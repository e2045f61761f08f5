"""Browser automation: Playwright driving a system Chromium, one guarded session per thread.

:class:`BrowserSessionManager` (one per host, owned by the run manager) runs
Playwright on a private loop thread; each thread's :class:`BrowserSession` has
its own browser context whose traffic goes through a
:class:`~deerflow.browser.proxy.GuardedProxy`.  Playwright itself is imported
only when a browser starts (the ``browser`` extra).
"""

from deerflow.browser.manager import BrowserSessionManager, LiveViewBusy
from deerflow.browser.session import ActionResult, BrowserSession
from deerflow.browser.snapshot import PageSnapshot

__all__ = ["ActionResult", "BrowserSession", "BrowserSessionManager", "LiveViewBusy", "PageSnapshot"]
