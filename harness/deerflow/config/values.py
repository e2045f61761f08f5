"""Value checks the config schema runs at load time and the sandbox relies on when it applies them.

They live here, below both, so that :mod:`deerflow.config.schema` can reject a bad
``sandbox.environment`` or size at startup without importing the sandbox (which builds on the
config): :mod:`deerflow.sandbox.execution.env` and :mod:`deerflow.sandbox.execution.limits` import
them from here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

RESERVED_NAMES: frozenset[str] = frozenset({
    "PATH", "HOME", "LD_LIBRARY_PATH", "LD_PRELOAD", "IPYTHONDIR", "PYTHONHOME",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
    "http_proxy", "https_proxy", "no_proxy", "all_proxy",
})  # fmt: skip
"""Names ``sandbox.environment`` may not set: the provider owns them."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SIZE = re.compile(r"\s*(\d+)\s*([kmgt]?)b?\s*", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def check_environment(extra: Mapping[str, str]) -> dict[str, str]:
    """Validate the operator's ``sandbox.environment``.

    Raises:
        ValueError: a name is not a shell variable name, is reserved for the
            provider, or a value holds a NUL byte (one line, naming it).
    """
    for name, value in extra.items():
        if not _NAME.fullmatch(name):
            raise ValueError(f"sandbox.environment: {name!r} is not a valid variable name")
        if name in RESERVED_NAMES:
            raise ValueError(f"sandbox.environment: {name} is set by the sandbox and cannot be overridden")
        if "\0" in value:
            raise ValueError(f"sandbox.environment: the value of {name} contains a NUL byte")
    return dict(extra)


def parse_size(text: str) -> int:
    """Bytes in a Docker-style size (``512m``, ``2g``, ``1048576``).

    Raises:
        ValueError: the text is not a size (one line, quoting it).
    """
    match = _SIZE.fullmatch(text)
    if match is None:
        raise ValueError(f"not a memory size: {text!r} (use e.g. 512m or 2g)")
    return int(match.group(1)) * _UNITS[match.group(2).lower()]
