"""How a sandbox process is wired to the egress proxy: views, environment, command line.

Shared by the ``bwrap`` and ``docker`` providers so both sandboxes look the
same from inside in ``allowlist`` mode:

* the thread's proxy socket directory is bound read-only at
  :data:`EGRESS_VIEW` (connecting to a socket needs no write access);
* :mod:`deerflow.sandbox.execution.supervisor` is bound read-only at
  :data:`SUPERVISOR_VIEW` and wraps the command, relaying
  ``127.0.0.1:3128`` to the socket;
* the standard proxy variables point there (both spellings: curl reads only
  the lowercase ``http_proxy``), and ``NO_PROXY`` keeps loopback local.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from deerflow.sandbox.execution import supervisor
from deerflow.sandbox.network.egress_proxy import SOCKET_NAME

EGRESS_VIEW = "/run/egress"
SUPERVISOR_VIEW = "/opt/deerflow/supervisor.py"
RELAY_HOST = "127.0.0.1"
RELAY_PORT = 3128
PROXY_URL = f"http://{RELAY_HOST}:{RELAY_PORT}"


def supervisor_source() -> Path:
    """The host file to bind at :data:`SUPERVISOR_VIEW` (stdlib-only, runs in any Python 3.8+)."""
    return Path(supervisor.__file__).resolve()


def proxy_env() -> dict[str, str]:
    """Proxy variables for a sandbox whose only way out is the relay."""
    env: dict[str, str] = {}
    for name in ("http_proxy", "https_proxy"):
        env[name] = env[name.upper()] = PROXY_URL
    env["no_proxy"] = env["NO_PROXY"] = "localhost,127.0.0.1,::1"
    return env


def supervised(
    python: str,
    argv: Sequence[str],
    *,
    relay: bool,
    pidfile: str | None = None,
    watch_stdin: bool = False,
) -> list[str]:
    """``argv`` wrapped by the supervisor (inside-sandbox paths throughout).

    Args:
        python: The interpreter inside the sandbox.
        argv: The command to supervise.
        relay: Start the ``127.0.0.1:3128`` → proxy socket relay.
        pidfile: Where to record the command's process group id.
        watch_stdin: Kill the command's group when stdin reaches end-of-file.
    """
    wrapped = [python, "-I", "-S", SUPERVISOR_VIEW]  # stdlib only: skip site-packages, start fast
    if relay:
        wrapped += ["--relay", f"{RELAY_HOST}:{RELAY_PORT}={EGRESS_VIEW}/{SOCKET_NAME}"]
    if pidfile:
        wrapped += ["--pidfile", pidfile]
    if watch_stdin:
        wrapped.append("--watch-stdin")
    return [*wrapped, "--", *argv]


__all__ = [
    "EGRESS_VIEW", "PROXY_URL", "RELAY_PORT", "SUPERVISOR_VIEW", "proxy_env", "supervised",
    "supervisor_source",
]
