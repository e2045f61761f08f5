"""``%deerflow memory`` in a real IPython shell, the harness in-process (local backend)."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

pytestmark = pytest.mark.integration


@pytest.fixture
def shell(deerflow_home, monkeypatch):
    monkeypatch.delenv("DEERFLOW_SERVER_URL", raising=False)
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "deerflow_kernel")
    yield ip
    ip.run_line_magic("unload_ext", "deerflow_kernel")


def test_memory_verbs_in_a_notebook(shell, capsys):
    shell.run_line_magic("deerflow", 'memory add "I study white-tailed deer in Minnesota"')
    fact_id = capsys.readouterr().out.strip()
    facts = shell.run_line_magic("deerflow", "memory")
    assert repr(facts) == f"{fact_id}  [context] I study white-tailed deer in Minnesota"
    assert facts.find("white-tailed")["id"] == fact_id
    shell.run_line_magic("deerflow", "memory export")
    assert '"text": "I study white-tailed deer in Minnesota"' in capsys.readouterr().out
    with pytest.raises(UsageError, match="no memory fact"):
        shell.run_line_magic("deerflow", "memory forget 0000")
    shell.run_line_magic("deerflow", f"memory forget {fact_id}")
    assert "forgot" in capsys.readouterr().out
    assert repr(shell.run_line_magic("deerflow", "memory list")).startswith("no memory yet")
