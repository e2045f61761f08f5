"""Resolving ``module:attr`` strings from config, with install hints.

Config names classes and tools as ``package.module:Attribute``.  When the
import fails because an optional package is missing, the error says which
package to install instead of showing an ImportError traceback.
"""

from __future__ import annotations

import importlib
from typing import Any

from deerflow.errors import ConfigError

# Top-level module -> the pip requirement that provides it.
_INSTALL_HINTS = {
    "langchain_openai": "langchain-openai",
    "langchain_anthropic": "langchain-anthropic",
    "langchain_google_genai": "langchain-google-genai",
    "langchain_ollama": "langchain-ollama",
    "langchain_deepseek": "langchain-deepseek",
    "langchain_mistralai": "langchain-mistralai",
    "playwright": "'.[browser]' (the browser extra, in a clone)",
    "docker": "'.[docker]' (the docker extra, in a clone)",
    "mcp": "mcp",
}


def resolve_variable(path: str, *, key: str | None = None, file: str | None = None) -> Any:
    """Import ``module:attr`` (``attr`` may be dotted) and return the attribute.

    Raises:
        ConfigError: naming the key, with an install hint for missing packages.
    """
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f"{path!r} must look like 'package.module:Attribute'", file=file, key=key)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = (exc.name or module_name).split(".")[0]
        hint = _INSTALL_HINTS.get(missing)
        advice = f"; install it with: pip install {hint}" if hint else ""
        raise ConfigError(f"cannot import {module_name!r}: module {exc.name!r} is not installed{advice}", file=file, key=key) from None
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(f"module {module_name!r} has no attribute {attr!r}", file=file, key=key) from None
    return obj
