"""notebooks/06_subagents.ipynb runs headless on the offline model: one delegation meets its criterion,
the other only claims to."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from fixtures.notebook_text import texts

pytestmark = pytest.mark.integration

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "06_subagents.ipynb"


def test_the_subagents_notebook_shows_one_met_and_one_unmet_delegation(deerflow_home, monkeypatch):
    for name in ("DEERFLOW_SERVER_URL", "DEERFLOW_SERVER_TOKEN", "DEERFLOW_EVENT_LOG"):
        monkeypatch.delenv(name, raising=False)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    assert [o for c in nb.cells for o in c.get("outputs", []) if o.output_type == "error"] == []
    text = texts(nb)
    assert "Write the summary    completed  acceptance=MET    citations=consistent" in text
    assert "Write the glossary   completed  acceptance=UNMET  citations=unknown_citations" in text
    assert "FLAGGED: cites receipts that do not exist: r1" in text
    assert "file:/mnt/user-data/outputs/glossary.md non-empty: UNMET (no such file)" in text
    assert "Every term is defined in plain English: UNVERIFIED" in text
    assert "['/mnt/user-data/outputs/summary.md']" in text and "Herds usually recover" in text
    states = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"].values()
    table = [s["state"].get("value", "") for s in states if "deerflow-subagents" in str(s["state"].get("value", ""))]
    assert table and "Write the glossary" in table[-1] and "UNMET" in table[-1]  # the live subagent table
    outputs = {p.name for p in deerflow_home.glob("users/*/threads/*/user-data/outputs/*") if p.is_file()}
    assert outputs == {"summary.md"}
