"""The committed JupyterLab extension is built from the sources beside it, and the wheel ships all of it.

``labextension/`` holds the TypeScript; ``extension/jupyter-data/labextensions/deerflow-jupyterlab``
the build, committed so that ``pip install``, ``make test`` and CI need no npm.  ``make labext``
rebuilds it and records the SHA-256 of the sources in the built ``package.json``
(``labextension/source_hash.py``); a source changed without a rebuild fails here.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILT = ROOT / "extension" / "jupyter-data" / "labextensions" / "deerflow-jupyterlab"
WHEEL_PREFIX = "share/jupyter/labextensions/deerflow-jupyterlab"


def _source_hash():
    spec = importlib.util.spec_from_file_location("labext_source_hash", ROOT / "labextension" / "source_hash.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_build_is_made_from_the_current_sources():
    source_hash = _source_hash()
    assert source_hash.recorded_digest(BUILT) == source_hash.sources_digest(ROOT / "labextension"), (
        "the built labextension is stale: run `make labext` and commit "
        "extension/jupyter-data/labextensions/deerflow-jupyterlab")


def test_a_changed_source_file_changes_the_digest(tmp_path: Path):
    source_hash = _source_hash()
    copy = tmp_path / "labextension"
    shutil.copytree(ROOT / "labextension", copy, ignore=shutil.ignore_patterns("node_modules", "lib"))
    before = source_hash.sources_digest(copy)
    index = copy / "src" / "index.ts"
    index.write_text(index.read_text() + "\n// an edit\n")
    assert source_hash.sources_digest(copy) != before
    (copy / "src" / "extra.ts").write_text("export {};\n")  # a new file counts too
    assert source_hash.sources_digest(copy) not in (before, source_hash.sources_digest(ROOT / "labextension"))


def test_the_build_is_a_loadable_prebuilt_extension():
    package = json.loads((BUILT / "package.json").read_text())
    assert package["name"] == BUILT.name == json.loads((ROOT / "labextension" / "package.json").read_text())["name"]
    entry = package["jupyterlab"]["_build"]["load"]
    assert (BUILT / entry).is_file(), f"{entry} named by the build is missing"
    # @jupyter/chat comes from jupyterlab-chat at run time (its tokens must be the same objects)
    assert package["jupyterlab"]["sharedPackages"]["@jupyter/chat"]["bundled"] is False


def test_the_wheel_data_files_cover_exactly_the_built_files():
    data_files = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["data-files"]
    shipped: set[str] = set()
    for target, patterns in data_files.items():
        if not target.startswith(WHEEL_PREFIX):
            continue
        for pattern in patterns:
            for path in ROOT.glob(pattern):
                assert path.is_file(), f"{pattern} matches a folder, which setuptools would not copy: {path}"
                shipped.add(f"{target}/{path.name}")
    built = {f"{WHEEL_PREFIX}/{p.relative_to(BUILT).as_posix()}" for p in BUILT.rglob("*") if p.is_file()}
    assert shipped == built
