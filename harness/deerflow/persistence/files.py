"""Small files written whole: atomically replaced, and JSON objects read with clear errors.

Config-like files (``extensions_config.json``, a custom agent's ``SOUL.md`` and
``config.yaml``, per-user credentials, read marks) are rewritten as a whole:
:func:`atomic_write_text` writes a private temporary file beside the target and
renames it over it, so a reader sees the old file or the new one, never half of
one, and a failed write leaves nothing behind.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from deerflow.errors import ConfigError


def atomic_write_text(target: Path, text: str, *, mode: int | None = None, durable: bool = False) -> None:
    """Replace ``target`` with ``text`` (parents created).

    Args:
        mode: Permission bits of the new file (default: mkstemp's 0o600).
        durable: fsync before the rename (survives a power cut, costs a disk flush).
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            if durable:
                out.flush()
                os.fsync(out.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_json_object(path: Path) -> dict[str, Any]:
    """The JSON object in ``path`` (``{}`` when the file is absent or blank).

    Raises:
        ConfigError: unreadable, malformed, or not an object (naming the file).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"cannot read the file ({exc.strerror})", file=str(path)) from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"malformed JSON at line {exc.lineno}: {exc.msg}", file=str(path)) from None
    if not isinstance(data, dict):
        raise ConfigError("the top level must be a JSON object", file=str(path))
    return data


__all__ = ["atomic_write_text", "read_json_object"]
