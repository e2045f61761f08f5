"""Sphinx configuration of the DeerFlow Notebook documentation (``make docs``).

The example notebooks in ``notebooks/`` are the site's tutorials. They are copied, with the files they
read (``offline-config.yaml``, ``scripts/``, ``browser_site/``), into ``docs/examples/`` (ignored by git:
``notebooks/`` stays their only source) and executed by myst-nb at every build, in the environment the CI
executes them in: a fresh ``DEERFLOW_HOME`` in a temporary folder, the offline scripted models, no API key,
no server. Nothing is fetched: no intersphinx, no link check.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path[:0] = [str(ROOT / "harness"), str(ROOT / "extension"), str(ROOT), str(DOCS / "_ext")]

project = "DeerFlow Notebook"
author = "DeerFlow Notebook contributors"
copyright = "DeerFlow Notebook contributors"
release = version = "0.1.0"

extensions = [
    "myst_nb",
    "deerflow_docs",  # docs/_ext: the route table, the error list and the config keys, from the code
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
]
exclude_patterns = ["_build", "_generated", "examples/browser_site", "examples/scripts", "**.ipynb_checkpoints"]
suppress_warnings = ["myst.header"]  # the included developer documents start at their own heading levels

html_theme = "pydata_sphinx_theme"
html_title = "DeerFlow Notebook"
html_static_path = ["_static"]
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "navbar_align": "left",
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_show_sourcelink = False

myst_enable_extensions = ["colon_fence", "deflist", "fieldlist"]
myst_heading_anchors = 3

# --- The example notebooks, executed at build time ---------------------------------------------------------
EXAMPLES = DOCS / "examples"
NOTEBOOK_FILES = ("offline-config.yaml", "scripts", "browser_site")


def _copy_examples() -> None:
    """Copy notebooks/ into docs/examples/ afresh, so a removed notebook never lingers in the site."""
    shutil.rmtree(EXAMPLES, ignore_errors=True)
    EXAMPLES.mkdir()
    executed = os.environ.get("DEERFLOW_DOCS_NOTEBOOKS")  # the test suite's executed notebooks, if given
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        shutil.copy2(Path(executed) / nb.name if executed else nb, EXAMPLES / nb.name)
    for name in NOTEBOOK_FILES:
        src = ROOT / "notebooks" / name
        if src.is_dir():
            shutil.copytree(src, EXAMPLES / name)
        elif src.exists():
            shutil.copy2(src, EXAMPLES / name)


def _offline_environment() -> None:
    """The environment the tests execute the notebooks in (tests/conftest.py's ``deerflow_home``)."""
    home = Path(tempfile.mkdtemp(prefix="deerflow-docs-home-"))
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    os.environ["DEERFLOW_HOME"] = str(home)
    for name in ("DEERFLOW_CONFIG", "DEERFLOW_EXTENSIONS_CONFIG", "DEERFLOW_SCRIPT", "OPENAI_API_KEY",
                 "OPENAI_BASE_URL", "DEERFLOW_SERVER_URL", "DEERFLOW_SERVER_TOKEN", "DEERFLOW_EVENT_LOG"):
        os.environ.pop(name, None)
    # the kernels find the worktree's packages first, as the tests do
    paths = [str(ROOT / "harness"), str(ROOT / "extension"), str(ROOT)]
    os.environ["PYTHONPATH"] = os.pathsep.join(paths + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])


_copy_examples()
_offline_environment()

nb_execution_mode = os.environ.get("DEERFLOW_DOCS_EXECUTE", "force")  # "cache": reuse docs/_build/.jupyter_cache
nb_execution_cache_path = str(DOCS / "_build" / ".jupyter_cache")
nb_execution_timeout = 300
nb_execution_raise_on_error = True
nb_execution_excludepatterns = []
if not (importlib.util.find_spec("playwright") and any(
        shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome"))):
    # the browser notebook needs a system Chromium and Playwright (.ci/run installs both): shown as saved
    print("docs: no Chromium or Playwright here: examples/05_browser_research is rendered unexecuted")
    nb_execution_excludepatterns.append("*05_browser_research*")
nb_execution_in_temp = False  # each notebook runs in docs/examples/, beside its offline config
nb_execution_show_tb = True
nb_kernel_rgx_aliases = {".*": "python3"}
nb_merge_streams = True

# --- The Python API reference --------------------------------------------------------------------------------
autodoc_default_options = {"members": True, "show-inheritance": False}
autodoc_typehints = "description"
autodoc_member_order = "bysource"
napoleon_google_docstring = True
