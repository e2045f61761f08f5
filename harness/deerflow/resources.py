"""Where the files that ship with DeerFlow are: public skills, example notebooks, the lab workspace.

An installed wheel carries them in ``deerflow/_data/`` (copied there by ``setup.py`` at
build time); a checkout (the repository, an editable install) has them in the repository's
own folders.  The wheel's copy wins when it exists, so one code path serves both.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
PACKAGED = _PACKAGE / "_data"
"""The packaged copy (present in a built wheel only)."""

REPOSITORY = _PACKAGE.parents[1]
"""The checkout this package lives in (``harness/deerflow`` → the repository root)."""

QUICKSTART = "01_research_quickstart.ipynb"


def public_skills_dir() -> Path:
    """The public skills: ``_data/skills/public`` in a wheel, else the repository's ``skills/public``."""
    return _pick("skills/public", "skills/public")


def notebooks_dir() -> Path:
    """The example notebooks with ``offline-config.yaml`` and ``scripts/``."""
    return _pick("notebooks", "notebooks")


def offline_config() -> Path:
    """The offline example config the notebooks and ``deerflow lab`` use."""
    return notebooks_dir() / "offline-config.yaml"


def lab_workspace() -> Path:
    """The JupyterLab workspace that opens the first two example notebooks."""
    return _pick("jupyter-config/deerflow-workspace.json", "extension/jupyter-config/deerflow-workspace.json")


def _pick(packaged: str, repository: str) -> Path:
    candidate = PACKAGED / packaged
    return candidate if candidate.exists() else REPOSITORY / repository
