"""Stopping the server cleanly, whatever stops it.

jupyter_server cleans up (extensions, kernels) only when it stops through
``ServerApp.stop``: SIGTERM does that, and so does SIGINT *with a terminal*
(after its confirmation prompt).  Without a terminal (a server JupyterHub
spawned, a service, a test), SIGINT is Python's default: a KeyboardInterrupt
ends the event loop and nothing is cleaned up — runs stay "running", kernels
and sandboxes outlive the server.  JupyterHub, which stops servers with
SIGINT, therefore waits and kills.

Two measures, installed when the extension starts:

* SIGINT without a terminal gets the handler SIGTERM has (what JupyterHub
  configures for the servers it spawns): a clean stop;
* a last resort for a loop that ended any other way (a KeyboardInterrupt, an
  exception): the server's cleanup runs on its stopped loop just before
  ``jupyter server`` closes that loop, or else at interpreter exit *before*
  Python waits for non-daemon threads.  With the storage threads daemonic,
  nothing can then keep the process alive.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import signal
import threading
from collections.abc import Awaitable, Callable
from typing import Any

logger = logging.getLogger(__name__)

STOP_REASON = "server stopped"
CLEANUP_DEADLINE_S = 15.0  # the last-resort cleanup gives up after this (the process still exits)


def route_sigint_to_stop(serverapp: Any) -> bool:
    """Make SIGINT stop the server cleanly when it has no terminal; True when installed.

    With a terminal, jupyter_server's own handler (a confirmation prompt) is kept.
    """
    if threading.current_thread() is not threading.main_thread():
        return False
    stop = getattr(serverapp, "_signal_stop", None)
    if stop is None or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return False
    signal.signal(signal.SIGINT, stop)
    return True


class LastResortCleanup:
    """Runs ``cleanup`` on the server's loop at exit if the server did not stop cleanly.

    Args:
        loop: The server's event loop (stopped by then, not closed).
        cleanup: The server's own cleanup (``ServerApp._cleanup``: extensions, kernels).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, cleanup: Callable[[], Awaitable[None]]) -> None:
        self.loop = loop
        self.cleanup = cleanup
        self.done = False  # set when the extension stopped normally

    def install(self) -> None:
        close = self.loop.close

        def close_after_cleanup() -> None:  # jupyter_core closes the loop once start() returns
            self.run()
            close()

        self.loop.close = close_after_cleanup
        register = getattr(threading, "_register_atexit", None)  # before non-daemon threads are joined
        try:
            if register is not None:
                register(self.run)
                return
        except RuntimeError:  # interpreter already shutting down
            return
        atexit.register(self.run)

    async def _cleanup_within_deadline(self) -> None:
        async with asyncio.timeout(CLEANUP_DEADLINE_S):
            await self.cleanup()

    def run(self) -> None:
        if self.done or self.loop.is_closed() or self.loop.is_running():
            return
        self.done = True
        logger.warning("DeerFlow: the server's loop ended without a clean stop; cleaning up now")
        try:
            self.loop.run_until_complete(self._cleanup_within_deadline())
        except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001  (exiting anyway: say what was left)
            logger.error("DeerFlow: cleanup at exit failed (%s: %s)", type(exc).__name__, exc)
