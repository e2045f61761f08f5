"""Attacks planted from inside the sandbox that would make the host do unbounded work (issue #16).

Like ``test_sandbox_attacks.py`` (whose canary and helpers, in ``fixtures/sandbox_attacks.py``,
these share): the real agent in bubblewrap (and Docker where available) on a scripted model
playing a prompt-injected one.  Here the sandboxed code plants something the host would read or
parse past any bound — a pathological traceback, a notebook of 10,001 cells, a 1 GiB sparse
file — and the host must stay within its bound, answer, and leave the canary untouched.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deerflow import DeerFlowClient
from deerflow.config.paths import HomePaths
from deerflow.runtime import events as ev
from fixtures.hang_guard import runs_to_the_end
from fixtures.mcp_servers import call
from fixtures.sandbox_attacks import (  # canary_fixture registers the fixture `canary`
    WS,
    Canary,
    assert_untouched,
    canary_fixture,  # noqa: F401
    config,
    py,
    tool_results,
)

pytestmark = [
    pytest.mark.integration,
]


def test_a_traceback_written_by_the_sandboxed_code_cannot_stall_the_server(tmp_path: Path, deerflow_home: Path,
                                                                           canary: Canary) -> None:
    """The cell's error output is the sandboxed code's to write (IPython's ``_showtraceback``): a
    2 MB frame header once sent the host's traceback summary into a quadratic regex, which holds
    the GIL, so every thread of the server stood still for as long.  The run goes in a child
    interpreter, killed at the hang guard (an in-process guard would wait as long as the regex)."""
    plant = ("get_ipython()._showtraceback(ValueError, ValueError('planted'), "
             "['File a.py:1' + ', in f(' * 300_000 + '\\n--> 1 x()\\n'])")
    path = config(tmp_path, [{"tool_calls": [py(plant)]}, "Done."], canary)
    assert runs_to_the_end(f"""
        from deerflow import DeerFlowClient
        from deerflow.runtime import events as ev
        with DeerFlowClient(config_path={str(path)!r}) as client:
            result = client.chat("fail loudly")
        assert result.status == "success", result.error
        (answer,) = [e for e in result.events if isinstance(e, ev.ToolResult) and e.name == "python"]
        assert "ValueError: planted" in answer.text and "File a.py:1, in f(" in answer.text, answer.text[:500]
    """)


def test_an_agent_notebook_rewritten_by_the_sandbox_is_not_parsed_past_its_bound(tmp_path: Path, deerflow_home: Path,
                                                                                 canary: Canary) -> None:
    """Every python call re-reads agent.ipynb when the sandboxed code changed it, on the kernel pool's
    loop while nbformat holds the GIL per cell: a file of tiny cells past the log's bound is moved
    aside unparsed (a new log starts), so no cell can make the next one stall the server."""
    crowd = ("import json\ncells = [{'cell_type': 'markdown', 'id': f'c{i}', 'metadata': {}, 'source': 'x'} "
             "for i in range(10_001)]\njson.dump({'cells': cells, 'metadata': {}, 'nbformat': 4, 'nbformat_minor': 5}, "
             "open('agent.ipynb', 'w'))\nprint('crowded')")
    turns = [{"tool_calls": [py(crowd)]}, {"tool_calls": [py("6 * 7")]}, "Done."]
    before = canary.snapshot()
    with DeerFlowClient(config_path=config(tmp_path, turns, canary)) as client:
        result = client.chat("compute")
        workspace = HomePaths(deerflow_home).thread("local", result.thread_id).workspace
    assert result.status == "success", result.error
    assert [e.status for e in tool_results(result, "python")] == ["success"] * 2
    assert (workspace / "agent.corrupt-1.ipynb").stat().st_size > 10_000
    # the crowding cell is logged right after it ran, in the new log that replaced the crowded file
    assert ["".join(c["source"]) for c in json.loads((workspace / "agent.ipynb").read_text())["cells"]] == [crowd, "6 * 7"]
    assert_untouched(canary, before, result)


def test_file_tools_refuse_a_huge_sparse_file_without_reading_it(tmp_path: Path, deerflow_home: Path,
                                                                 canary: Canary) -> None:
    """A sparse file costs the sandbox no disk and no time; the file tools read at most their bound
    of it into the host (the old code read it whole: 1 TiB ran the server out of memory).  1 GiB
    here keeps the old code's failure survivable."""
    plant = ("with open('huge.txt', 'wb') as out:\n    out.write(b'a' * 10_000)\n    out.truncate(1 << 30)\n"
             "print('planted')")
    huge = f"{WS}/huge.txt"
    turns = [{"tool_calls": [py(plant)]},
             {"tool_calls": [call("read_file", path=huge, start_line=1, end_line=1)]},
             {"tool_calls": [call("write_file", path=huge, content="x", append=True)]},
             {"tool_calls": [call("str_replace", path=huge, old_str="a", new_str="b")]},
             "Done."]
    before = canary.snapshot()
    with DeerFlowClient(config_path=config(tmp_path, turns, canary)) as client:
        result = client.chat("read the big file")
        workspace = HomePaths(deerflow_home).thread("local", result.thread_id).workspace
    assert result.status == "success", result.error
    answers = [e for e in result.events if isinstance(e, ev.ToolResult) and e.name != "python"]
    assert [a.name for a in answers] == ["read_file", "write_file", "str_replace"]
    for answer in answers:
        assert answer.status == "error" and "larger than" in answer.text and "python or bash" in answer.text, answer.text
    assert (workspace / "huge.txt").stat().st_size == 1 << 30
    assert_untouched(canary, before, result)
