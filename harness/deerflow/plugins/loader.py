"""Loading plugins at startup: validate the source, snapshot it, import it, commit or roll back.

For each enabled ``plugins`` entry of ``config.yaml``:

1. **Validate the source.**  An ``entry_point`` must exist in the
   ``deerflow.plugins`` group of an installed distribution.  A ``path`` must be a
   package directory (with ``__init__.py``) or a ``.py`` file, without symlinks,
   within size limits.
2. **Snapshot a local source** into ``$DEERFLOW_HOME/plugins/snapshots/<name>-<sha>``
   and import from there, so the code that runs is the code that was checked
   (edits to the original after startup change nothing until the next start) and
   its digest is reported.
3. **Import and register** in a transaction: the contributions are committed
   only if ``register`` returns; on any failure the modules the plugin imported
   are removed from ``sys.modules``, nothing it registered is kept, and the
   failure is reported.  One broken plugin never stops the host or the others.

None of this sandboxes a plugin: once imported it runs with the host's
privileges.  Only the operator decides what is imported.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import shutil
import sys
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Any

from deerflow.config.schema import PluginConfig
from deerflow.plugins.api import Contributions, PluginError, PluginRegistrar

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "deerflow.plugins"
MAX_FILES = 500
MAX_BYTES = 10 * 1024 * 1024
_IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".git", ".mypy_cache", ".pytest_cache")


@dataclass
class PluginReport:
    """The outcome of loading one plugin (``loaded``, ``failed`` or ``disabled``)."""

    name: str
    status: str
    source: str
    error: str | None = None
    digest: str | None = None
    contributes: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class LoadedPlugin:
    name: str
    contributions: Contributions


def load_one(entry: PluginConfig, *, snapshots: Path, base_dir: Path | None) -> tuple[LoadedPlugin | None, PluginReport]:
    """Load one plugin; never raises for the plugin's own failures (they are in the report)."""
    source = f"entry_point:{entry.entry_point}" if entry.entry_point else f"path:{entry.path}"
    if not entry.enabled:
        return None, PluginReport(entry.name, "disabled", source)
    before = set(sys.modules)
    digest = None
    try:
        if entry.entry_point:
            register = _entry_point_register(entry.entry_point)
        else:
            snapshot, digest = snapshot_source(_resolve(entry.path or "", base_dir), snapshots, entry.name)
            register = _module_register(_import_snapshot(entry.name, snapshot))
        registrar = PluginRegistrar(entry.name, entry.options)
        register(registrar)
        contributions = registrar.commit()
    except Exception as exc:
        for module in set(sys.modules) - before:
            sys.modules.pop(module, None)
        logger.error("plugin %s (%s) failed to load; it is disabled", entry.name, source, exc_info=exc)
        return None, PluginReport(entry.name, "failed", source, f"{type(exc).__name__}: {exc}", digest)
    report = PluginReport(entry.name, "loaded", source, digest=digest, contributes=contributions.summary())
    logger.warning("plugin %s loaded from %s; it runs with this process's privileges", entry.name, source)
    return LoadedPlugin(entry.name, contributions), report


def snapshot_source(source: Path, snapshots: Path, name: str) -> tuple[Path, str]:
    """Copy a validated local source into the snapshot area; returns (snapshot, sha256).

    Raises:
        PluginError: missing source, not a package or ``.py`` file, symlinks, too large.
    """
    files = _source_files(source)
    digest = hashlib.sha256()
    for rel, path in files:
        digest.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    sha = digest.hexdigest()
    target = snapshots / f"{name}-{sha[:16]}"
    if not target.exists():
        staging = snapshots / f".{name}-{sha[:16]}.tmp"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        for rel, path in files:
            (staging / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, staging / rel)
        staging.rename(target)
    return target, sha


def _source_files(source: Path) -> list[tuple[str, Path]]:
    if source.is_symlink() or not source.exists():
        raise PluginError(f"plugin source {source} does not exist or is a symlink")
    if source.is_file():
        if source.suffix != ".py":
            raise PluginError(f"plugin source {source} is neither a package directory nor a .py file")
        return [("__init__.py", source)]
    if not (source / "__init__.py").is_file():
        raise PluginError(f"plugin directory {source} is not a package: it has no __init__.py")
    files: list[tuple[str, Path]] = []
    total = 0
    for path in sorted(source.rglob("*")):
        rel = path.relative_to(source)
        if any(part in {"__pycache__", ".git"} for part in rel.parts) or path.suffix == ".pyc":
            continue
        if path.is_symlink():
            raise PluginError(f"plugin source contains a symlink: {rel}")
        if path.is_file():
            total += path.stat().st_size
            files.append((rel.as_posix(), path))
    if len(files) > MAX_FILES or total > MAX_BYTES:
        raise PluginError(f"plugin source is too large ({len(files)} files, {total} bytes; "
                          f"limits {MAX_FILES} files, {MAX_BYTES} bytes)")
    return files


def _resolve(path: str, base_dir: Path | None) -> Path:
    candidate = Path(path).expanduser()
    return candidate if candidate.is_absolute() or base_dir is None else base_dir / candidate


def _import_snapshot(name: str, snapshot: Path) -> ModuleType:
    module_name = f"deerflow_plugin_{name}"
    spec = importlib.util.spec_from_file_location(module_name, snapshot / "__init__.py",
                                                  submodule_search_locations=[str(snapshot)])
    if spec is None or spec.loader is None:
        raise PluginError(f"cannot import plugin {name} from its snapshot")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def _entry_point_register(name: str) -> Any:
    found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
    if not found:
        raise PluginError(f"no installed package provides entry point {name!r} in group {ENTRY_POINT_GROUP!r}")
    obj = found[0].load()
    return _module_register(obj) if isinstance(obj, ModuleType) else obj


def _module_register(module: ModuleType) -> Any:
    register = getattr(module, "register", None)
    if not callable(register):
        raise PluginError(f"plugin module {module.__name__} has no register(plugin) function")
    return register


__all__ = ["ENTRY_POINT_GROUP", "LoadedPlugin", "PluginReport", "load_one", "snapshot_source"]
