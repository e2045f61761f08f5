"""Turning a cell into a prompt: ``{var}`` interpolation and ``--with`` attachments.

Interpolation fills ``{name}``, ``{name.attr}``, ``{name[0]}``, with an
optional ``!r`` conversion and ``:spec``, from the user namespace, using
:class:`string.Formatter` on each placeholder *separately*.  Prompts are full
of braces that are not placeholders (JSON, code, LaTeX), so anything that
does not name a variable — or fails to format — is left exactly as written,
and a malformed brace elsewhere never breaks the rest.  ``{{name}}`` is the
escape for a literal ``{name}``.

:func:`check_placeholders` runs first: a ``{name}`` whose name the notebook
does not define is almost always a typo (``{sties}`` for ``{sites}``), so it is
an error before anything is sent, naming close matches and the escape.
Braces that cannot be placeholders (``\frac{a}{b}``, ``x^{n}``, code in
backticks) are not checked.

An attachment turns a notebook variable into an upload named after it: a
pandas DataFrame (CSV, or Parquet when pyarrow is installed; ``VAR:csv``
forces CSV), a path (``str`` or ``Path``) to a file, bytes, or JSON-able
data.  The prompt then names the file so the agent knows where to look.
"""

from __future__ import annotations

import difflib
import importlib.util
import io
import json
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deerflow.errors import UserError

_FIELD = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*|\[[^\[\]{}]*\])*(?:![rsa])?(?::[^{}]*)?"
_PLACEHOLDER = re.compile(rf"\{{\{{({_FIELD})\}}\}}|\{{({_FIELD})\}}")
_FORMATS = ("csv", "parquet", "json")
_SIGNATURES = ((b"\x89PNG\r\n\x1a\n", ".png"), (b"\xff\xd8\xff", ".jpg"), (b"GIF8", ".gif"), (b"%PDF", ".pdf"),
               (b"PK\x03\x04", ".zip"))


def interpolate(text: str, namespace: Mapping[str, Any]) -> str:
    """Fill ``{var}`` placeholders from ``namespace``; leave everything else as written."""
    formatter = string.Formatter()

    def fill(match: re.Match[str]) -> str:
        if match.group(1) is not None:  # {{name}}: a literal {name}
            return "{" + match.group(1) + "}"
        field = match.group(2)
        try:
            return formatter.vformat("{" + field + "}", (), _Namespace(namespace))
        except (KeyError, AttributeError, IndexError, TypeError, ValueError):
            return match.group(0)

    return _PLACEHOLDER.sub(fill, text)


_CODE = re.compile(r"```.*?(?:```|\Z)|~~~.*?(?:~~~|\Z)|`[^`\n]*`", re.S)
_NOT_AFTER = set("\\}^_$") | set(string.ascii_letters + string.digits)


def check_placeholders(text: str, namespace: Mapping[str, Any]) -> None:
    """Raise when a ``{name}`` names nothing the notebook defines.

    Raises:
        UserError: one line with the names, close matches, and the ``{{name}}`` escape.
    """
    prose = _CODE.sub(lambda m: " " * len(m.group(0)), text)
    missing: list[str] = []
    for match in _PLACEHOLDER.finditer(prose):
        if match.group(2) is None or (match.start() > 0 and prose[match.start() - 1] in _NOT_AFTER):
            continue
        head = re.match(r"[A-Za-z_]\w*", match.group(2))
        assert head is not None, "_FIELD starts with a name"
        name = head.group(0)
        if name not in namespace and name not in missing:
            missing.append(name)
    if not missing:
        return
    known = [n for n in namespace if not n.startswith("_")]
    hints = []
    for name in missing:
        close = difflib.get_close_matches(name, known, n=1)
        hints.append(f"{{{name}}}" + (f" (did you mean {{{close[0]}}}?)" if close else ""))
    raise UserError(f"the prompt uses {', '.join(hints)}, not defined in the notebook; define "
                    f"{'it' if len(missing) == 1 else 'them'} first, or write {{{{{missing[0]}}}}} for literal braces")


class _Namespace(dict):
    """A read-only view of the user namespace for ``str.format`` (unknown names raise KeyError)."""

    def __init__(self, source: Mapping[str, Any]) -> None:
        super().__init__()
        self._source = source

    def __getitem__(self, key: str) -> Any:
        return self._source[key]


@dataclass(frozen=True)
class Attachment:
    """A notebook value ready to upload."""

    variable: str
    name: str
    data: bytes
    description: str


def make_attachment(spec: str, namespace: Mapping[str, Any]) -> Attachment:
    """The upload for ``--with VAR`` (or ``VAR:FORMAT``).

    Raises:
        UserError: unknown variable, unsupported value, or a path that is not a file.
    """
    variable, _, fmt = spec.partition(":")
    if not variable.isidentifier():
        raise UserError(f"--with {spec}: expected a variable name (optionally VAR:csv, VAR:parquet or VAR:json)")
    if fmt and fmt not in _FORMATS:
        raise UserError(f"--with {spec}: unknown format {fmt!r}; use one of {', '.join(_FORMATS)}")
    if variable not in namespace:
        raise UserError(f"--with {variable}: no variable named {variable!r} in the notebook")
    return _encode(variable, namespace[variable], fmt or None)


def _encode(variable: str, value: Any, fmt: str | None) -> Attachment:
    if _is_pandas(value, "DataFrame") or _is_pandas(value, "Series"):
        return _dataframe(variable, value if _is_pandas(value, "DataFrame") else value.to_frame(), fmt)
    if fmt == "json" or (fmt is None and isinstance(value, (dict, list))):
        try:
            data = json.dumps(value, indent=2, ensure_ascii=False, default=str).encode()
        except (TypeError, ValueError) as exc:
            raise UserError(f"--with {variable}: cannot write it as JSON ({exc})") from None
        return Attachment(variable, f"{variable}.json", data, f"JSON, {len(data):,} bytes")
    if fmt is not None:
        raise UserError(f"--with {variable}:{fmt}: formats apply to DataFrames (and json to dicts/lists)")
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        suffix = next((ext for sig, ext in _SIGNATURES if data.startswith(sig)), ".bin")
        return Attachment(variable, f"{variable}{suffix}", data, f"bytes, {len(data):,} bytes")
    if isinstance(value, (str, Path)):
        return _file(variable, Path(value).expanduser())
    raise UserError(f"--with {variable}: cannot attach a {type(value).__name__}; use a pandas DataFrame, "
                    "a file path, bytes, or a dict/list")


def _dataframe(variable: str, frame: Any, fmt: str | None) -> Attachment:
    rows, cols = frame.shape
    shape = f"pandas DataFrame, {rows:,} rows × {cols:,} columns: {', '.join(map(str, frame.columns[:12]))}"
    if fmt == "parquet" or (fmt is None and importlib.util.find_spec("pyarrow") is not None):
        buffer = io.BytesIO()
        try:
            frame.to_parquet(buffer)
        except ImportError as exc:
            raise UserError(f"--with {variable}:parquet needs pyarrow ({exc})") from None
        return Attachment(variable, f"{variable}.parquet", buffer.getvalue(), f"{shape}; Parquet")
    if fmt == "json":
        data = frame.to_json(orient="records", indent=2).encode()
        return Attachment(variable, f"{variable}.json", data, f"{shape}; JSON records")
    index = frame.index.name is not None or not _is_range_index(frame)
    return Attachment(variable, f"{variable}.csv", frame.to_csv(index=index).encode(), f"{shape}; CSV")


def _file(variable: str, path: Path) -> Attachment:
    if not path.is_file():
        raise UserError(f"--with {variable}: {str(path)!r} is not a file (a str value is taken as a path)")
    return Attachment(variable, f"{variable}{path.suffix}", path.read_bytes(),
                      f"the file {path.name}, {path.stat().st_size:,} bytes")


def _is_pandas(value: Any, name: str) -> bool:
    cls = type(value)
    return cls.__name__ == name and cls.__module__.startswith("pandas")


def _is_range_index(frame: Any) -> bool:
    return type(frame.index).__name__ == "RangeIndex"


def attachments_note(uploads: list[tuple[Attachment, str]]) -> str:
    """The paragraph appended to the prompt that tells the agent what was attached and where."""
    if not uploads:
        return ""
    lines = [f"- `{a.variable}` → {path} ({a.description})" for a, path in uploads]
    return "\n\nAttached from the notebook (read them from the uploads folder):\n" + "\n".join(lines)
