"""Build hook: the wheel carries the files a user needs that live outside the packages.

Public skills (``skills/public``), the example notebooks with their offline config and
scripts (``notebooks/``) and the JupyterLab workspace that opens them are copied into
``deerflow/_data/`` of the built package (:mod:`deerflow.resources` finds them there).
Editable installs copy nothing: :mod:`deerflow.resources` falls back to the repository's
own folders, so ``make demo`` and ``make test`` keep using the checkout as it is.
Everything else is in ``pyproject.toml``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
# source (relative to the repository) -> destination (relative to deerflow/_data)
PACKAGE_DATA = {
    "skills/public": "skills/public",
    "notebooks": "notebooks",
    "extension/jupyter-config/deerflow-workspace.json": "jupyter-config/deerflow-workspace.json",
}
_SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", ".DS_Store")


class BuildPyWithData(build_py):
    """``build_py`` that also copies :data:`PACKAGE_DATA` into ``deerflow/_data``."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / "deerflow" / "_data"
        shutil.rmtree(target, ignore_errors=True)  # a file removed from the source must not linger in build/
        for source, dest in PACKAGE_DATA.items():
            src, dst = ROOT / source, target / dest
            if not src.exists():
                raise FileNotFoundError(f"package data {source} is missing from the source tree")
            dst.parent.mkdir(parents=True, exist_ok=True)
            if src.is_dir():
                shutil.copytree(src, dst, ignore=_SKIP, dirs_exist_ok=True)
            else:
                shutil.copy2(src, dst)


setup(cmdclass={"build_py": BuildPyWithData})
