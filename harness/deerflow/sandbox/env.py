"""Environment scrubbing for everything the agent executes.

The server process usually holds model API keys and other credentials in its
environment.  Child processes inherit the environment by default, so a single
``env`` in bash or ``os.environ`` in Python would hand them to the model.
Every provider therefore builds the child environment through
:func:`scrub_env`, which drops any variable whose *name* looks like it holds a
secret.  Matching is on names only and deliberately broad (``KEYBOARD`` is
dropped too): a missing harmless variable is cheap, a leaked key is not.
"""

from __future__ import annotations

from collections.abc import Mapping

SECRET_NAME_MARKERS: tuple[str, ...] = ("KEY", "TOKEN", "SECRET", "PASS", "CREDENTIAL")
"""Substrings (case-insensitive) that mark a variable name as secret-bearing."""


def is_secret_name(name: str) -> bool:
    """Whether a variable called ``name`` may carry a credential."""
    upper = name.upper()
    return any(marker in upper for marker in SECRET_NAME_MARKERS)


def scrub_env(env: Mapping[str, str]) -> dict[str, str]:
    """Return a copy of ``env`` without secret-bearing variables.

    Args:
        env: The environment to filter (typically ``os.environ``).

    Returns:
        A new dict; ``env`` itself is left untouched.
    """
    return {name: value for name, value in env.items() if not is_secret_name(name)}
