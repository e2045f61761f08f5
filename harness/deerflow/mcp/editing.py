"""Reading and editing ``mcpServers`` for a management surface (the server API).

What leaves is masked (:func:`~deerflow.mcp.secrets.mask_servers`); what
comes back may echo the mask, which keeps the stored secret.  An update is
validated as a whole — every entry, with ``$VAR`` references left as written
since they are resolved where the servers run — and written atomically with
the file's other sections (skills...) untouched.  The next run sees it: the
catalog cache is keyed by the file's content.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deerflow.errors import ConfigError
from deerflow.mcp.config import SERVERS_KEY, read_document, validate_entry, write_document
from deerflow.mcp.secrets import mask_servers, unmask_servers


def masked_config(path: Path) -> dict[str, Any]:
    """``{"path", "mcpServers"}`` with every secret masked.

    Raises:
        ConfigError: the file is not a JSON object, or its ``mcpServers`` is not an object
            (shown as such, never as an empty config an edit would then overwrite).
    """
    servers = read_document(path).get(SERVERS_KEY)
    if servers is not None and not isinstance(servers, dict):
        raise ConfigError(f"'{SERVERS_KEY}' must be an object of server entries", file=str(path), key=SERVERS_KEY)
    return {"path": str(path), SERVERS_KEY: mask_servers(servers or {})}


def update_config(path: Path, servers: Any) -> dict[str, Any]:
    """Replace ``mcpServers`` (masks restored from the stored values) and return the masked result.

    Raises:
        ConfigError: not an object, a masked value with nothing stored, or an invalid
            entry (the message names the file and the key); nothing is written.
    """
    if not isinstance(servers, dict):
        raise ConfigError(f"'{SERVERS_KEY}' must be an object of server entries", file=str(path), key=SERVERS_KEY)
    doc = read_document(path)
    stored = found if isinstance(found := doc.get(SERVERS_KEY), dict) else {}
    restored = unmask_servers(servers, stored, file=str(path))
    for name, entry in restored.items():
        validate_entry(str(name), entry, file=str(path), env=None)
    doc[SERVERS_KEY] = restored
    write_document(path, doc)
    return masked_config(path)
