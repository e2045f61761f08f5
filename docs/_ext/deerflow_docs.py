"""Pages generated from the code at build time, so they cannot drift from it.

* ``_generated/http-routes.md``: every route of the server extension (``deerflow_jupyter.handlers.ROUTES``)
  with the HTTP methods its handler defines and the first line of the handler's docstring.
* ``_generated/errors.md``: every one-line user error the code can raise (``UserError`` and its kinds,
  ``ConfigError``, ``StoreUnavailable``...), found by reading the source with :mod:`ast`.
* ``_generated/config.md``: every key of ``config.yaml`` from the pydantic schema (``AppConfig``): type,
  default and description.

The folder is written afresh at ``builder-inited`` and ignored by git; pages pull it in with ``{include}``.
"""

from __future__ import annotations

import ast
import inspect
import re
import shutil
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel

DOCS = Path(__file__).resolve().parents[1]
ROOT = DOCS.parent
OUT = DOCS / "_generated"
SOURCES = ("harness/deerflow", "extension/deerflow_jupyter", "deerflow_kernel")
METHODS = ("get", "post", "put", "patch", "delete")
# The exception classes whose message is the whole of what a user sees (errors.py and its kinds).
USER_ERRORS = {
    "UserError", "ConfigError", "NotFoundError", "BudgetSpent", "Busy", "ThreadBusy", "StorageError",
    "StoreUnavailable", "UsageError", "UploadError", "SkillPackageError", "SkillFormatError",
    "SkillExistsError", "CassetteError", "CredentialError", "NotebookError", "PluginError", "CronError",
    "UnsafeIdError",
}


def _cell(text: str) -> str:
    """Text safe inside one markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ").strip()


def _first_line(doc: str | None) -> str:
    return (inspect.cleandoc(doc or "").split("\n\n")[0]).replace("\n", " ")


def http_routes() -> str:
    """A table of the API: method, path under ``{base_url}deerflow/api``, what it does."""
    from deerflow_jupyter.handlers import ROUTES
    from deerflow_jupyter.handlers.health import HealthHandler

    rows = ["| Methods | Path | What it does |", "| --- | --- | --- |"]
    # app.py adds /health after ROUTES (it must answer when the stores cannot), and the plugins' own routes
    for pattern, handler in [*ROUTES, ("/health", HealthHandler)]:
        methods = [m.upper() for m in METHODS if m in vars(handler) or any(
            m in vars(base) for base in handler.__mro__[1:] if base.__module__.startswith("deerflow_jupyter"))]
        path = re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", pattern)
        what = _first_line(handler.__doc__) or " ".join(
            _first_line(getattr(handler, m).__doc__) for m in METHODS if m in vars(handler))
        rows.append(f"| {' '.join(methods)} | `{path}` | {_cell(what)} |")
    return "\n".join(rows) + "\n"


def _message(node: ast.expr) -> str | None:
    """The text of a message literal; an f-string's fields become ``{...}``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{…}" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _message(node.left), _message(node.right)
        return None if left is None or right is None else left + right
    return None


def user_errors() -> list[tuple[str, str, str]]:
    """``(module, class, message)`` of every ``raise Kind("...")`` of a user-error kind in the source."""
    found = []
    for base in SOURCES:
        for path in sorted((ROOT / base).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)):
                    continue
                func = node.exc.func
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
                if name in USER_ERRORS and node.exc.args and (text := _message(node.exc.args[0])):
                    module = [Path(base).name, *path.relative_to(ROOT / base).with_suffix("").parts]
                    found.append((".".join(m for m in module if m != "__init__"), name, text))
    return found


def errors_page() -> str:
    rows = ["| Where | Kind | Message (`{…}`: filled in) |", "| --- | --- | --- |"]
    seen = set()
    for module, kind, text in user_errors():
        if (module, text) not in seen:
            seen.add((module, text))
            rows.append(f"| `{module}` | `{kind}` | {_cell(text)} |")
    return "\n".join(rows) + "\n"


def _type_name(annotation: Any) -> str:
    if annotation is None or annotation is type(None):
        return "null"
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in typing.get_args(annotation))
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in typing.get_args(annotation))
    if origin is not None:
        args = ", ".join(_type_name(a) for a in typing.get_args(annotation))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    return getattr(annotation, "__name__", str(annotation))


def _section(model: type[BaseModel]) -> type[BaseModel] | None:
    """The model a field holds (itself, or the item of a list / the value of a dict), if any."""
    for candidate in (model, *typing.get_args(model)):
        if inspect.isclass(candidate) and issubclass(candidate, BaseModel):
            return candidate
        for inner in typing.get_args(candidate):
            if inspect.isclass(inner) and issubclass(inner, BaseModel):
                return inner
    return None


def config_keys(model: type[BaseModel], prefix: str = "") -> list[tuple[str, str, str, str]]:
    """``(key, type, default, description)`` for every key of ``model``, nested sections flattened."""
    rows = []
    for name, field in model.model_fields.items():
        key = f"{prefix}{field.alias or name}"
        default = "required" if field.is_required() else repr(field.get_default(call_default_factory=True))
        if len(default) > 60:
            default = default[:57] + "..."
        rows.append((key, _type_name(field.annotation), default, field.description or ""))
        inner = _section(field.annotation)
        if inner is not None and inner is not model:
            sep = "[]." if typing.get_origin(field.annotation) is list else ("{name}." if typing.get_origin(
                field.annotation) is dict else ".")
            rows += config_keys(inner, f"{key}{sep}")
    return rows


def config_page() -> str:
    from deerflow.config.schema import AppConfig

    rows = ["| Key | Type | Default | Description |", "| --- | --- | --- | --- |"]
    for key, kind, default, description in config_keys(AppConfig):
        rows.append(f"| `{key}` | {_cell(kind)} | `{_cell(default)}` | {_cell(description)} |")
    return "\n".join(rows) + "\n"


def generate(app: Any = None) -> None:
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir()
    (OUT / "http-routes.md").write_text(http_routes(), encoding="utf-8")
    (OUT / "errors.md").write_text(errors_page(), encoding="utf-8")
    (OUT / "config.md").write_text(config_page(), encoding="utf-8")


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", generate)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
