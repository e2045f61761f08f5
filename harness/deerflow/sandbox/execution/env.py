"""The environment of everything the agent executes: built from an allowlist.

The server's environment holds credentials (model keys, ``DATABASE_URL`` with
its password, ``SENTRY_DSN``, tokens) and host paths (``DEERFLOW_CONFIG``,
``DEERFLOW_HOME``, ``JUPYTER_*``, ``PYTHONPATH``, CA bundle paths).  Filtering
it by name cannot work: a connection URL does not say "secret" in its name.
So no provider passes the server's environment on; each builds the child's
environment from scratch with :func:`sandbox_env`.  The agent's code sees:

* ``PATH`` — the sandbox interpreter's ``bin`` and the system directories;
* ``HOME`` — a directory inside the sandbox or the thread (``/tmp`` in
  bwrap and docker; a private per-launch directory for the local provider);
* ``LANG`` (``C.UTF-8`` unless the server sets one), ``LANGUAGE``, ``LC_*``
  and ``TZ`` copied from the server — locale and time zone, never secrets
  (not for docker: an image need not have the server's locales);
* ``TERM=dumb``, and for the sandbox user ``USER``/``LOGNAME``;
* what the provider itself needs: ``LD_LIBRARY_PATH`` of a relocated
  interpreter, ``IPYTHONDIR`` (a private profile: no host startup scripts),
  ``PYDEVD_DISABLE_FILE_VALIDATION`` (silences a debugger warning of
  ipykernel), the ``HTTP(S)_PROXY`` variables of ``allowlist`` mode;
* whatever the operator lists in ``sandbox.environment`` (name → value; a
  value is passed as written, so do not put credentials there).

That is all an IPython kernel needs to start (ipykernel reads no other
variable; ``jupyter_core`` and matplotlib fall back to ``HOME``).

:func:`scrub_env` (drop secret-looking *names*) remains for processes that
must inherit the server's environment by design, such as MCP servers.
"""

from __future__ import annotations

from collections.abc import Mapping

from deerflow.config.values import RESERVED_NAMES, check_environment

SECRET_NAME_MARKERS: tuple[str, ...] = ("KEY", "TOKEN", "SECRET", "PASS", "CREDENTIAL")
"""Substrings (case-insensitive) that mark a variable name as secret-bearing."""

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
"""The system part of every sandbox ``PATH``."""

HOST_PASSTHROUGH: tuple[str, ...] = ("LANG", "LANGUAGE", "TZ")
"""Server variables copied as they are (plus every ``LC_*``): locale and time zone."""

def is_secret_name(name: str) -> bool:
    """Whether a variable called ``name`` may carry a credential."""
    upper = name.upper()
    return any(marker in upper for marker in SECRET_NAME_MARKERS)


def scrub_env(env: Mapping[str, str]) -> dict[str, str]:
    """Return a copy of ``env`` without secret-bearing variable names.

    Only for children that inherit the server's environment by design (MCP
    servers); sandboxes use :func:`sandbox_env` instead.
    """
    return {name: value for name, value in env.items() if not is_secret_name(name)}


def locale_env(host: Mapping[str, str]) -> dict[str, str]:
    """The server's locale and time zone variables (``LANG`` defaults to ``C.UTF-8``)."""
    env = {"LANG": "C.UTF-8"}
    for name, value in host.items():
        if (name in HOST_PASSTHROUGH or name.startswith("LC_")) and value and "\0" not in value:
            env[name] = value
    return env


def sandbox_env(
    *,
    path: str,
    home: str,
    host: Mapping[str, str],
    extra: Mapping[str, str] | None = None,
    fixed: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The complete environment of a sandboxed command or kernel.

    Args:
        path: ``PATH`` inside.
        home: ``HOME`` inside.
        host: The server's environment; only locale variables are read from it.
        extra: The operator's ``sandbox.environment`` (validated).
        fixed: What the provider needs (interpreter, proxy); wins over ``extra``.
    """
    env = {"PATH": path, "HOME": home, "TERM": "dumb", **locale_env(host)}
    env.update(extra or {})
    env.update(fixed or {})
    env["PATH"], env["HOME"] = path, home
    return env


__all__ = [
    "HOST_PASSTHROUGH", "RESERVED_NAMES", "SECRET_NAME_MARKERS", "SYSTEM_PATH",
    "check_environment", "is_secret_name", "locale_env", "sandbox_env", "scrub_env",
]
