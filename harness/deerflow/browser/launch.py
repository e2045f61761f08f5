"""Finding and starting the browser: Playwright driving a system Chromium.

No browser is downloaded: the executable is ``browser.executable_path`` or
the first Chromium/Chrome on ``PATH``.  Everything that can make a
configured browser unusable — Playwright missing, no executable, a launch
that fails, an unguarded CDP endpoint without the explicit opt-in — is a
:class:`~deerflow.errors.ConfigError` raised while the host starts, with the
fix in the message.

Launch flags keep the browser quiet and inside the guard: no QUIC (its UDP
would bypass the guarded proxy), no background networking, component
updates or sync, no DNS prefetching, and WebRTC limited to proxied traffic.
"""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path
from types import ModuleType

from deerflow.config.schema import BrowserConfig
from deerflow.errors import ConfigError

INSTALL_HINT = "the 'browser' extra (pip install '.[browser]' in a clone)"
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
LAUNCH_ARGS = (
    "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--dns-prefetch-disable",
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp", "--disable-dev-shm-usage",
)


def import_playwright(*, config_file: str | None = None) -> ModuleType:
    """``playwright.async_api``, or a ConfigError saying what to install."""
    try:
        return importlib.import_module("playwright.async_api")
    except ModuleNotFoundError:
        raise ConfigError(f"browser.enabled is true but Playwright is not installed; install {INSTALL_HINT} "
                          "(a system Chromium is used, no browser download is needed)",
                          file=config_file, key="browser.enabled") from None


def find_executable(config: BrowserConfig, *, config_file: str | None = None) -> str:
    """The Chromium to launch.

    Raises:
        ConfigError: the configured path does not exist, or none is on PATH.
    """
    if config.executable_path:
        path = Path(config.executable_path).expanduser()
        if not path.is_file():
            raise ConfigError(f"browser.executable_path {str(path)!r} does not exist",
                              file=config_file, key="browser.executable_path")
        return str(path)
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    raise ConfigError("browser.enabled is true but no Chromium was found on PATH; install one "
                      "(e.g. apt-get install chromium) or set browser.executable_path",
                      file=config_file, key="browser.executable_path")


def check_cdp(config: BrowserConfig, *, config_file: str | None = None) -> None:
    """Refuse ``cdp_url`` unless the operator accepted that it is unguarded."""
    if config.cdp_url and not config.allow_unguarded_cdp:
        raise ConfigError("browser.cdp_url attaches to an existing browser whose requests the URL guard "
                          "cannot screen; set browser.allow_unguarded_cdp: true only for a trusted local "
                          "browser, or remove cdp_url to let DeerFlow launch a guarded one",
                          file=config_file, key="browser.cdp_url")
