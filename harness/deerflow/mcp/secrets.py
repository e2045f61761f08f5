"""Keeping MCP credentials out of API responses, prompts, events and logs.

Two tools, both deliberately conservative:

* :func:`mask_servers` / :func:`unmask_servers` — the config the API returns has
  every header value, every env value and the OAuth secrets replaced by
  :data:`MASK` (``$VAR`` references stay visible: they name a variable, they are
  not its value).  An update that echoes the mask back keeps the stored secret.
* :class:`Redactor` — knows every secret string in force (config values, user
  credentials, issued tokens) and blanks them out of any text that leaves the
  MCP layer: error messages shown to the model, notices, log lines.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from typing import Any

from deerflow.errors import ConfigError

MASK = "********"
_SECRET_OAUTH_KEYS = ("client_secret", "refresh_token")
_ENV_REF = re.compile(r"^\$(\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)$")


def _secret_slots(entry: dict[str, Any]) -> Iterable[tuple[str, dict[str, Any], str]]:
    """(section, container, key) of an entry's secret-bearing values."""
    for section in ("headers", "env"):
        values = entry.get(section)
        if isinstance(values, dict):
            yield from ((section, values, k) for k in list(values))
    oauth = entry.get("oauth")
    if isinstance(oauth, dict):
        yield from (("oauth", oauth, k) for k in _SECRET_OAUTH_KEYS if k in oauth)


def _is_reference(value: Any) -> bool:
    return isinstance(value, str) and bool(_ENV_REF.match(value))


def mask_servers(servers: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of ``mcpServers`` with secret values replaced by :data:`MASK`."""
    masked = copy.deepcopy(servers)
    for entry in masked.values():
        if isinstance(entry, dict):
            for _, container, key in _secret_slots(entry):
                if container[key] is not None and not _is_reference(container[key]):
                    container[key] = MASK
    return masked


def unmask_servers(new: dict[str, Any], stored: dict[str, Any], *, file: str | None = None) -> dict[str, Any]:
    """``new`` with every :data:`MASK` replaced by the stored secret at the same place.

    Raises:
        ConfigError: a masked value has no stored counterpart (a new secret must be given in full).
    """
    restored = copy.deepcopy(new)
    for name, entry in restored.items():
        if not isinstance(entry, dict):
            continue
        old = found if isinstance(found := stored.get(name), dict) else {}
        for section, container, key in _secret_slots(entry):
            if container[key] != MASK:
                continue
            stored_section = old.get(section)
            previous = stored_section.get(key) if isinstance(stored_section, dict) else None
            if previous is None:
                raise ConfigError(f"'{key}' is masked but no value is stored for it; give the real value",
                                  file=file, key=f"mcpServers.{name}.{section}.{key}")
            container[key] = previous
    return restored


class Redactor:
    """Replaces known secret strings in text with ``***``.

    Secrets shorter than four characters are ignored (they would blank out
    ordinary words); everything else is matched literally, longest first.
    """

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self.add(*secrets)

    def add(self, *secrets: str | None) -> None:
        fresh = {s for s in secrets if s and len(s) >= 4 and s not in self._secrets}
        if not fresh:
            return
        self._secrets |= fresh
        ordered = sorted(self._secrets, key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(s) for s in ordered))

    def __call__(self, text: str) -> str:
        if self._pattern is None or not text:
            return text
        return self._pattern.sub("***", text)

    def deep(self, value: Any) -> Any:
        """``value`` with every string inside it (dict keys and values, list items) redacted."""
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self(value)
        if isinstance(value, dict):
            return {self.deep(k): self.deep(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.deep(v) for v in value]
        return value


def config_secrets(entry: Any) -> list[str]:
    """The secret strings of a validated server config (for a :class:`Redactor`)."""
    found = [*entry.headers.values(), *entry.env.values()]
    if entry.oauth is not None:
        found += [entry.oauth.client_secret, entry.oauth.refresh_token]
    # A header such as "Bearer abc" also leaks as "abc" alone.
    found += [v.split(" ", 1)[1] for v in entry.headers.values() if " " in v]
    return [s for s in found if s]
