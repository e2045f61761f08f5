"""Delegation end to end: a scripted lead and scripted children through the embedded client.

One scripted model plays the lead (``turns``) and every child (``conversations``, chosen by
the child's task message); it logs what each call was shown, so the tests can check what a
child was offered and told.  Everything else is real: the run manager, the subagent
controller thread, the tools, the sandbox, the SQLite checkpoints.
"""

from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from deerflow import DeerFlowClient
from deerflow.runtime import events as ev
from fixtures.logging_model import read_log

OUT = "/mnt/user-data/outputs"


def make_client(tmp_path: Path, script: str, extra: str = "", subagents: str = "enabled: true"
                ) -> tuple[DeerFlowClient, Path]:
    """A client whose only model plays ``script`` (lead turns + child conversations) and logs its calls.

    ``subagents`` is the body of the ``subagents:`` section, ``extra`` any other sections.
    """
    log = tmp_path / "model-calls.jsonl"
    config = tmp_path / "config.yaml"
    config.write_text(
        "models:\n  - name: scripted\n    use: fixtures.logging_model:LoggingScriptedModel\n"
        f"    log: {log}\n    script: |\n{textwrap.indent(textwrap.dedent(script).strip(), ' ' * 6)}\n"
        f"subagents:\n{textwrap.indent(textwrap.dedent(subagents).strip(), '  ')}\n" + textwrap.dedent(extra))
    return DeerFlowClient(config_path=config, home=tmp_path / "home"), log


def subagent_events(result: Any) -> list[ev.Subagent]:
    return [e for e in result.events if isinstance(e, ev.Subagent)]


def task_results(result: Any) -> list[ev.ToolResult]:
    return [e for e in result.events if isinstance(e, ev.ToolResult) and e.name == "task"]


def child_calls(log: Path, marker: str) -> list[dict[str, Any]]:
    """The logged model calls of the child whose task message contains ``marker``."""
    return [c for c in read_log(log) if c["messages"] and any(
        m["type"] == "human" and marker in m["text"] for m in c["messages"][:2])]


def task_call(prompt: str, **args: Any) -> str:
    extra = "".join(f", {k}: {v!r}" for k, v in args.items())
    return f"{{name: task, args: {{prompt: {prompt!r}, subagent_type: general-purpose{extra}}}}}"


def test_one_response_runs_at_most_max_concurrent_tasks_and_refuses_the_rest(deerflow_home, tmp_path):
    script = f"""
        turns:
          - tool_calls: [{task_call("CHILD-1 go")}, {task_call("CHILD-2 go")}, {task_call("CHILD-3 go")}]
          - "All delegated."
        conversations:
          - {{match: CHILD, turns: ["done"]}}
    """
    client, log = make_client(tmp_path, script)
    with client:
        result = client.chat("go", max_concurrent_subagents=2)
        ledger = client.thread(result.thread_id).values["delegations"]
    assert result.status == "success"
    assert [e.status for e in subagent_events(result)].count("completed") == 2
    statuses = [e.status for e in task_results(result)]
    assert statuses.count("success") == 2 and statuses.count("error") == 1
    refused = next(e for e in task_results(result) if e.status == "error")
    assert "at most 2 task calls" in refused.text and refused.code == "subagent_concurrency_limit"
    assert len(ledger) == 2 and {d["run_id"] for d in ledger} == {result.run_id}
    assert not child_calls(log, "CHILD-3")  # the refused one never started
    assert any(n.kind == "subagent_limit" for n in result.notices)


def test_the_total_cap_counts_this_runs_ledger_across_responses(deerflow_home, tmp_path):
    script = f"""
        turns:
          - tool_calls: [{task_call("CHILD-A")}]
          - tool_calls: [{task_call("CHILD-B")}]
          - tool_calls: [{task_call("CHILD-C")}]
          - "First run done."
          - tool_calls: [{task_call("CHILD-D")}]
          - "Second run done."
        conversations:
          - {{match: CHILD, turns: ["done"]}}
    """
    client, log = make_client(tmp_path, script)
    with client:
        first = client.chat("go", max_total_subagents=2)
        second = client.chat("again", first.thread_id, max_total_subagents=2)
        ledger = client.thread(first.thread_id).values["delegations"]
    refusals = [e for e in task_results(first) if e.status == "error"]
    assert len(refusals) == 1 and "used all 2 subagent delegations" in refusals[0].text
    assert not child_calls(log, "CHILD-C")
    assert [e.status for e in task_results(second)] == ["success"]  # a new run has its own budget
    assert [d["run_id"] for d in ledger] == [first.run_id, first.run_id, second.run_id]


def test_a_child_cannot_delegate_ask_or_present_and_is_not_offered_those_tools(deerflow_home, tmp_path):
    script = f"""
        turns:
          - tool_calls: [{task_call("NESTED try everything")}]
          - "Parent done."
        conversations:
          - match: NESTED
            turns:
              - tool_calls:
                  - {task_call("GRANDCHILD")}
                  - {{name: ask_clarification, args: {{question: "Which format?"}}}}
                  - {{name: present_files, args: {{filepaths: ["{OUT}/x.md"]}}}}
              - "I could not delegate, ask or present."
    """
    client, log = make_client(tmp_path, script)
    with client:
        result = client.chat("go")
        ledger = client.thread(result.thread_id).values["delegations"]
    assert result.status == "success" and result.clarification is None
    assert not any(isinstance(e, ev.Clarification) for e in result.events)
    child = child_calls(log, "NESTED")
    offered = set(child[0]["tools"])
    assert "write_file" in offered and not offered & {"task", "ask_clarification", "present_files"}
    answers = "\n".join(m["text"] for m in child[1]["messages"] if m["type"] == "tool")
    assert "subagents cannot delegate" in answers and "cannot ask the user questions" in answers
    assert "lead agent presents files" in answers
    assert not child_calls(log, "GRANDCHILD")
    assert [r["status"] for r in ledger[0]["receipt_log"]] == ["refused", "refused", "refused"]


def test_acceptance_is_checked_by_the_harness_not_taken_from_the_report(deerflow_home, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    ws = "/mnt/user-data/workspace"
    script = f"""
        turns:
          - tool_calls:
              - {task_call("LIAR write the summary", acceptance_criteria=[f"file:{OUT}/summary.md non-empty"])}
              - {task_call("TESTER write tests", acceptance_criteria=["tests_passed:pytest -q -p no:cacheprovider test_ok.py",
                            "tests_passed:pytest -q -p no:cacheprovider test_bad.py", "The tests are meaningful"])}
          - "Checked."
        conversations:
          - match: LIAR
            turns: ["Wrote {OUT}/summary.md with the full summary [r1]. Tests pass [r9]."]
          - match: TESTER
            turns:
              - tool_calls:
                  - {{name: write_file, args: {{path: {ws}/test_ok.py, content: "def test_ok():\\n    assert True\\n"}}}}
                  - {{name: write_file, args: {{path: {ws}/test_bad.py, content: "def test_bad():\\n    assert False\\n"}}}}
              - "Wrote both test files [r1] [r2]."
    """
    client, _ = make_client(tmp_path, script, "sandbox:\n  allow_host_bash: true\n")
    with client:
        result = client.chat("go")
        ledger = {d["label"].split()[0]: d for d in client.thread(result.thread_id).values["delegations"]}
    liar, tester = ledger["LIAR"], ledger["TESTER"]
    assert liar["status"] == "completed"  # it finished on its own...
    assert liar["acceptance"]["overall"] == "UNMET"  # ...but the file it claims does not exist
    assert liar["citations"]["unknown"] == ["r1", "r9"] and liar["citations"]["verdict"] == "unknown_citations"
    assert [c["verdict"] for c in tester["acceptance"]["criteria"]] == ["MET", "UNMET", "UNVERIFIED"]
    assert tester["acceptance"]["overall"] == "UNMET" and tester["citations"]["verdict"] == "consistent"
    text = next(e.text for e in task_results(result) if "LIAR" in e.text)
    assert "SELF-REPORT" in text and "FLAGGED" in text and "r9" in text
    assert f"file:{OUT}/summary.md non-empty: UNMET" in text


def test_file_written_compares_with_the_state_before_the_child_started(deerflow_home, tmp_path):
    """The targets' state is taken (off the loop) before the child starts: a file that existed and
    was left alone is UNMET, one the child wrote is MET."""
    script = f"""
        turns:
          - tool_calls:
              - {task_call("WRITER write new.md", acceptance_criteria=[f"file_written:{OUT}/old.md",
                                                                        f"file_written:{OUT}/new.md"])}
          - "Checked."
        conversations:
          - match: WRITER
            turns:
              - tool_calls:
                  - {{name: write_file, args: {{path: {OUT}/new.md, content: "new"}}}}
              - "Wrote it."
    """
    client, _ = make_client(tmp_path, script)
    with client:
        thread_id = client.create_thread()
        outputs = tmp_path / "home" / "users" / "local" / "threads" / thread_id / "user-data" / "outputs"
        outputs.mkdir(parents=True, exist_ok=True)
        (outputs / "old.md").write_text("before")
        client.chat("go", thread_id)
        (writer,) = client.thread(thread_id).values["delegations"]
    assert [(c["verdict"], c["reason"]) for c in writer["acceptance"]["criteria"]] == [
        ("UNMET", "the file existed before and was not changed"), ("MET", "created during the task")]


def test_a_child_that_never_ends_is_cancelled_at_its_limit_with_its_receipts(deerflow_home, tmp_path):
    script = f"""
        turns:
          - tool_calls: [{{name: task, args: {{prompt: "SLOW work forever", subagent_type: slowpoke}}}}]
          - "The subagent timed out."
        conversations:
          - match: SLOW
            turns:
              - tool_calls: [{{name: write_file, args: {{path: {OUT}/partial.md, content: "started"}}}}]
              - tool_calls: [{{name: wait, args: {{seconds: 600}}}}]
              - "never reached"
    """
    subagents = """
        enabled: true
        poll_interval: 0.1
        types:
          slowpoke: {description: "Slow worker", prompt: "Work slowly.", timeout_seconds: 1.5}
    """
    tools = 'tools:\n  - {name: wait, group: slow, use: "fixtures.slow_tools:wait"}\n'
    client, _ = make_client(tmp_path, script, tools, subagents)
    with client:
        result = client.chat("go")
        (entry,) = client.thread(result.thread_id).values["delegations"]
    assert result.status == "success"
    assert entry["status"] == "timed_out" and entry["stop_reason"] == "time_limit"
    assert [(r["id"], r["tool"], r["status"]) for r in entry["receipt_log"]] == [
        ("r1", "write_file", "ok"), ("r2", "wait", "interrupted")]
    assert subagent_events(result)[-1].status == "timed_out"
    (text,) = [e.text for e in task_results(result)]
    assert "TIMED_OUT" in text and "r1 write_file ok" in text and "r2 wait interrupted" in text


def test_child_loop_detection_reaches_the_parents_events_before_the_task_returns(deerflow_home, tmp_path):
    ls = "{name: ls, args: {path: /mnt/user-data/workspace}}"
    script = f"""
        turns:
          - tool_calls: [{task_call("LOOPER list again and again")}]
          - "It looped."
        conversations:
          - match: LOOPER
            turns:
              - tool_calls: [{ls}]
              - tool_calls: [{ls}]
              - tool_calls: [{ls}]
              - "unreachable"
    """
    client, _ = make_client(tmp_path, script, "loop_detection:\n  warn_after: 2\n  stop_after: 3\n")
    with client:
        result = client.chat("go")
        (entry,) = client.thread(result.thread_id).values["delegations"]
    loops = [n for n in result.notices if n.kind == "loop_detected"]
    assert result.status == "success"  # a subagent's loop stops the subagent, not the lead's run
    assert {n.data.get("action") for n in loops} == {"warned", "stopped"}
    assert all(n.data["task_id"] == entry["id"] for n in loops)
    terminal = next(e for e in subagent_events(result) if e.status == "failed")
    assert all(n.seq < terminal.seq for n in loops)  # journaled before the task returned
    assert any(e.status == "running" and e.detail.get("event") == "tool_finished" for e in subagent_events(result))
    assert entry["stop_reason"] == "loop_detected"
    assert next(e.status for e in subagent_events(result)) == "started"


def test_without_receipts_there_are_no_citations_and_no_citation_verdict(deerflow_home, tmp_path):
    script = f"""
        turns:
          - tool_calls: [{task_call("PLAIN write it")}]
          - "ok"
        conversations:
          - match: PLAIN
            turns:
              - tool_calls: [{{name: write_file, args: {{path: {OUT}/p.md, content: "p"}}}}]
              - "Wrote it."
    """
    client, log = make_client(tmp_path, script, subagents="enabled: true\nreceipts_enabled: false")
    with client:
        result = client.chat("go")
        (entry,) = client.thread(result.thread_id).values["delegations"]
    (text,) = [e.text for e in task_results(result)]
    assert "no [rN] citations and there is no citation verdict" in text
    assert entry["citations"] is None
    child = child_calls(log, "PLAIN")
    tool_answer = next(m["text"] for m in child[1]["messages"] if m["type"] == "tool")
    assert not tool_answer.startswith("[r1]")


def test_cancelling_the_parent_run_cancels_its_running_subagent(deerflow_home, tmp_path):
    script = """
        turns:
          - tool_calls: [{name: task, args: {prompt: "SLOW forever", subagent_type: general-purpose}}]
          - "unreachable"
        conversations:
          - match: SLOW
            turns:
              - tool_calls: [{name: wait, args: {seconds: 600}}]
              - "unreachable"
    """
    tools = 'tools:\n  - {name: wait, group: slow, use: "fixtures.slow_tools:wait"}\n'
    client, log = make_client(tmp_path, script, tools, "enabled: true\npoll_interval: 0.1")
    with client:
        events = []
        for event in client.stream("go"):
            events.append(event)
            if isinstance(event, ev.Subagent) and event.detail.get("event") == "tool_started":
                assert client.cancel(event.run_id)
        controller = client._call(client._async.manager()).services.subagents.controller
        deadline = time.monotonic() + 30
        while controller.active and time.monotonic() < deadline:
            time.sleep(0.05)
        assert controller.active == 0  # the child did not outlive its parent
    assert events[-1].type == "run_finished" and events[-1].status == "cancelled"
    assert len(child_calls(log, "SLOW")) == 1  # it never got to answer again


def test_a_child_uses_the_runs_mcp_tools_and_its_type_allowlist_narrows_them(deerflow_home, tmp_path):
    from fixtures.mcp_servers import stdio_entry, write_extensions

    write_extensions(tmp_path / "extensions_config.json", {"test": stdio_entry()})
    script = f"""
        turns:
          - tool_calls: [{task_call("MCP-CHILD echo")}, {task_call("NARROW-CHILD echo", subagent_type="reader")}]
          - "Both reported."
        conversations:
          - match: MCP-CHILD
            turns:
              - tool_calls: [{{name: test_echo, args: {{text: "hello from the child"}}}}]
              - "Echoed [r1]."
          - match: NARROW-CHILD
            turns:
              - tool_calls: [{{name: test_echo, args: {{text: "not allowed"}}}}]
              - "Could not echo."
    """
    extra = "tool_search:\n  enabled: true\n"
    types = "enabled: true\ntypes:\n  reader:\n    description: reads files\n    prompt: You read files.\n    tools: [read_file, ls]"
    client, log = make_client(tmp_path, script, extra=extra, subagents=types)
    with client:
        result = client.chat("go")
        ledger = client.thread(result.thread_id).values["delegations"]
    assert result.status == "success"
    offered = set(child_calls(log, "MCP-CHILD")[0]["tools"])
    assert "test_echo" in offered and "tool_search" not in offered  # full schemas, no deferred catalog
    echo = next(m["text"] for m in child_calls(log, "MCP-CHILD")[1]["messages"] if m["type"] == "tool")
    assert echo == "[r1] echo: hello from the child"  # the real MCP server answered, under receipt r1
    mcp_entry = next(d for d in ledger if "MCP-CHILD" in str(d))
    assert [(r["tool"], r["status"]) for r in mcp_entry["receipt_log"]] == [("test_echo", "ok")]
    assert "test_echo" not in set(child_calls(log, "NARROW-CHILD")[0]["tools"])


def test_delegating_makes_no_folder_on_an_event_loop(deerflow_home, tmp_path, monkeypatch):
    """The thread's folders are made while the run is prepared, off the loop; a subagent's
    preparation (on the lead's loop) does not make them again there."""
    from fixtures.hung_disk import folders_made

    on_loop = folders_made(monkeypatch)
    script = f"""
        turns:
          - tool_calls: [{task_call("CHILD-1 go")}]
          - "Delegated."
        conversations:
          - {{match: CHILD, turns: ["done"]}}
    """
    client, _ = make_client(tmp_path, script)
    with client:
        result = client.chat("go")
    assert result.status == "success" and [e.status for e in subagent_events(result)][-1] == "completed"
    assert on_loop and not any(on_loop)
