"""The live tests run only when asked for by path: ``pytest tests/live`` (``make test`` never collects them).

A plain ``pytest`` (what ``make test`` runs) collects ``tests/`` as a whole; this directory is left
out of that, whatever the environment holds, so an exported ``OPENAI_API_KEY`` or a forgotten
``DEERFLOW_LIVE_LLAMA_URL`` never turns the offline suite into calls to a real model.  Named on the
command line, the module runs, or skips with the reason when no live server is configured.
"""

from __future__ import annotations

from pathlib import Path

import pytest

LIVE = Path(__file__).resolve().parent


def _asked_for(config: pytest.Config) -> bool:
    """Whether a command-line argument names this directory or something inside it."""
    for arg in config.args:
        target = Path(config.invocation_params.dir, arg.split("::", 1)[0]).resolve()
        if target == LIVE or LIVE in target.parents:
            return True
    return False


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Leave this directory's tests out unless the command line named it."""
    if LIVE in (collection_path.resolve(), *collection_path.resolve().parents) and not _asked_for(config):
        return True
    return None
