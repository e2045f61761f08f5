"""``docs/PERFORMANCE.md`` names the commit each table of figures was measured at.

Figures without a commit go stale silently (the harness got 2x slower per run
while the document kept its old numbers).  Every section holding a table must say
``Measured at commit `<sha>```, and, in a git checkout, that commit must exist, so
a reader can tell how old the figures are and re-measure against them.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "PERFORMANCE.md"
MEASURED = re.compile(r"Measured at commit\s+`([0-9a-f]{7,40})`")


def sections() -> dict[str, str]:
    """Each ``## `` section of the document by title."""
    parts = re.split(r"^## (.+)$", DOC.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_every_table_of_figures_names_its_commit() -> None:
    with_tables = {title: body for title, body in sections().items() if re.search(r"^\|.*\|$", body, re.M)}
    assert with_tables, "the document has no figures"
    missing = [title for title, body in with_tables.items() if not MEASURED.search(body)]
    assert not missing, f"sections without 'Measured at commit `sha`': {missing}"


def test_named_commits_exist() -> None:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    shas = {sha for body in sections().values() for sha in MEASURED.findall(body)}
    unknown = [sha for sha in sorted(shas)
               if subprocess.run(["git", "cat-file", "-e", f"{sha}^{{commit}}"], cwd=REPO,
                                 capture_output=True, timeout=30).returncode != 0]
    assert not unknown, f"PERFORMANCE.md names commits this repository does not have: {unknown}"
