"""Package attributes imported on first use (PEP 562), so importing a package stays cheap.

``deerflow --help`` and ``import deerflow.client`` must not pay for the MCP SDK,
``nbformat`` (whose ``jsonschema`` dependency compiles a URI grammar at import)
or the LangChain tool stack; a package ``__init__`` that re-exports names from
its heavy submodules therefore maps each name to its submodule and imports it
when the name is first read.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` resolving ``name`` from ``package.<exports[name]>`` on first access."""

    def __getattr__(name: str) -> Any:
        submodule = exports.get(name)
        if submodule is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{submodule}"), name)
        setattr(importlib.import_module(package), name, value)  # later reads skip this hook
        return value

    return __getattr__
