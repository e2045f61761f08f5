"""Configuration: the ``config.yaml`` schema, its loader and the home layout."""

from deerflow.config.loader import LoadedConfig, find_config_path, find_extensions_path, load_config
from deerflow.config.paths import HomePaths, ThreadPaths
from deerflow.config.schema import AppConfig, ModelConfig, ToolConfig

__all__ = [
    "AppConfig",
    "HomePaths",
    "LoadedConfig",
    "ModelConfig",
    "ThreadPaths",
    "ToolConfig",
    "find_config_path",
    "find_extensions_path",
    "load_config",
]
