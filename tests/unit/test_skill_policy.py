"""Skill activation and the allowed-tools policy, on the real lead agent with a scripted model."""

from __future__ import annotations

import asyncio

import pytest

from deerflow.config.schema import AppConfig, SkillsConfig
from deerflow.errors import UserError
from deerflow.sandbox.execution.local import LocalSandboxProvider
from fixtures.skill_runs import SkillHarness, system_text, write_skill


@pytest.fixture
def harness(tmp_path) -> SkillHarness:
    public = tmp_path / "public"
    write_skill(public, "analyst", description="Analyse data with Python.", allowed=["read_file", "python"],
                body="Step 1: load the data with python.\nAlways cite the file.")
    write_skill(public, "writer", description="Write reports to outputs.", allowed=["write_file", "read_file"])
    write_skill(public, "free", description="Unscoped helper.")
    return SkillHarness(home=tmp_path / "home", public=public,
                        sandbox=LocalSandboxProvider(allow_host_bash=True))


BASH_AND_WRITE = [
    {"tool_calls": [
        {"name": "bash", "args": {"command": "echo hi > /mnt/user-data/outputs/x.txt"}},
        {"name": "write_file", "args": {"path": "/mnt/user-data/outputs/y.md", "content": "y"}},
        {"name": "read_file", "args": {"path": "/mnt/skills/analyst/SKILL.md"}},
    ]},
    "done",
]


async def test_slash_skill_hides_and_refuses_tools_outside_allowed_tools(harness):
    run = await harness.run(BASH_AND_WRITE, "/analyst look at the sales")
    first = run.model.calls[0]
    assert "bash" not in first.tools and "write_file" not in first.tools and "str_replace" not in first.tools
    assert {"read_file", "python", "present_files"} <= set(first.tools)
    refused = {e.name: e for e in run.results() if e.code == "skill_tool_not_allowed"}
    assert set(refused) == {"bash", "write_file"}
    assert "does not allow the tool 'bash'" in refused["bash"].text
    outputs = run.context.paths.outputs
    assert not (outputs / "x.txt").exists() and not (outputs / "y.md").exists()
    assert run.results("read_file")[0].status == "success"
    assert run.status == "success"


async def test_slash_skill_instructions_reach_the_model_and_are_recorded(harness):
    run = await harness.run(BASH_AND_WRITE, "/analyst look at the sales")
    prompt = system_text(run.model.calls[0])
    assert '<active_skill name="analyst" activated_by="user">' in prompt
    assert "Step 1: load the data with python." in prompt
    assert "Tools are limited by the active skill to: read_file, python" in prompt
    assert run.values["skill_context"] == [
        {"name": "analyst", "path": "/mnt/skills/analyst/SKILL.md", "description": "Analyse data with Python."}]


async def test_without_activation_every_tool_is_offered_and_runs(harness):
    run = await harness.run([{"tool_calls": [{"name": "write_file", "args": {
        "path": "/mnt/user-data/outputs/y.md", "content": "y"}}]}, "done"], "write something")
    assert {"bash", "write_file"} <= set(run.model.calls[0].tools)
    assert run.results("write_file")[0].status == "success"
    assert "<active_skill" not in system_text(run.model.calls[0])


async def test_reading_a_skill_md_activates_its_policy_from_then_on(harness):
    script = [
        {"tool_calls": [{"name": "read_file", "args": {"path": "/mnt/skills/analyst/SKILL.md"}}]},
        {"tool_calls": [{"name": "write_file", "args": {"path": "/mnt/user-data/outputs/y.md", "content": "y"}}]},
        "done",
    ]
    run = await harness.run(script, "analyse my data")
    assert "write_file" in run.model.calls[0].tools  # not active before the read
    assert "write_file" not in run.model.calls[1].tools  # active after it
    assert run.results("write_file")[0].code == "skill_tool_not_allowed"
    assert [r["name"] for r in run.values["skill_context"]] == ["analyst"]
    assert "Active skills (you read their instructions this turn): analyst" in system_text(run.model.calls[1])


async def test_a_failed_read_or_a_mere_mention_does_not_activate(harness):
    script = [
        {"tool_calls": [{"name": "read_file", "args": {"path": "/mnt/skills/analyst/MISSING.md"}},
                        {"name": "ls", "args": {"path": "/mnt/skills/analyst"}}]},
        {"tool_calls": [{"name": "write_file", "args": {"path": "/mnt/user-data/outputs/y.md", "content": "y"}}]},
        "done",
    ]
    run = await harness.run(script, "mention /mnt/skills/analyst/SKILL.md in passing")
    assert run.results("write_file")[0].status == "success"
    assert not run.values.get("skill_context")


async def test_two_read_skills_combine_as_a_union(harness):
    script = [
        {"tool_calls": [{"name": "read_file", "args": {"path": "/mnt/skills/analyst/SKILL.md"}},
                        {"name": "read_file", "args": {"path": "/mnt/skills/writer/SKILL.md"}}]},
        {"tool_calls": [{"name": "write_file", "args": {"path": "/mnt/user-data/outputs/y.md", "content": "y"}},
                        {"name": "bash", "args": {"command": "true"}}]},
        "done",
    ]
    run = await harness.run(script, "analyse and write")
    tools = set(run.model.calls[1].tools)
    assert {"python", "write_file", "read_file"} <= tools and "bash" not in tools
    assert run.results("write_file")[0].status == "success"
    assert run.results("bash")[0].code == "skill_tool_not_allowed"


async def test_slash_activation_wins_over_a_skill_read_later(harness):
    script = [
        {"tool_calls": [{"name": "read_file", "args": {"path": "/mnt/skills/writer/SKILL.md"}}]},
        {"tool_calls": [{"name": "write_file", "args": {"path": "/mnt/user-data/outputs/y.md", "content": "y"}}]},
        "done",
    ]
    run = await harness.run(script, "/analyst and then write")
    assert run.results("write_file")[0].code == "skill_tool_not_allowed"
    assert [r["name"] for r in run.values["skill_context"]] == ["analyst", "writer"]


async def test_a_skill_without_allowed_tools_restricts_nothing(harness):
    run = await harness.run([{"tool_calls": [{"name": "bash", "args": {"command": "echo ok"}}]}, "done"],
                            "/free go")
    assert "bash" in run.model.calls[0].tools
    assert run.results("bash")[0].status == "success"


async def test_read_file_outside_the_list_may_only_read_skill_files(tmp_path):
    public = tmp_path / "public"
    write_skill(public, "shell-only", allowed=["bash"], files={"notes.md": "skill notes"})
    harness = SkillHarness(home=tmp_path / "home", public=public)
    script = [{"tool_calls": [{"name": "read_file", "args": {"path": "/mnt/skills/shell-only/notes.md"}},
                              {"name": "read_file", "args": {"path": "/mnt/user-data/workspace/a.txt"}}]},
              "done"]
    run = await harness.run(script, "/shell-only go")
    assert "read_file" in run.model.calls[0].tools
    by_call = {e.call_id: e for e in run.results("read_file")}
    skill_read, other = by_call["call_0_0"], by_call["call_0_1"]
    assert skill_read.status == "success" and "skill notes" in skill_read.text
    assert other.code == "skill_tool_not_allowed" and "only read skill files" in other.text


async def test_allowed_tools_absent_from_the_session_are_named_not_fatal(tmp_path):
    public = tmp_path / "public"
    write_skill(public, "researcher", allowed=["translate_text", "mcp_github_*", "write_file"])
    harness = SkillHarness(home=tmp_path / "home", public=public)
    run = await harness.run(["ok"], "/researcher find things")
    assert run.status == "success"
    prompt = system_text(run.model.calls[0])
    assert "Not available in this session: translate_text, mcp_github_*." in prompt
    assert "write_file" in run.model.calls[0].tools


async def test_the_slash_scope_lasts_one_turn(harness):
    await harness.run(["ok"], "/analyst first")
    # the scripted model continues the thread: turn 0 was played by the first run
    run = await harness.run(["(turn 0, played above)", {"tool_calls": [{"name": "write_file", "args": {
        "path": "/mnt/user-data/outputs/y.md", "content": "y"}}]}, "done"], "now write freely")
    assert run.results("write_file")[0].status == "success"


@pytest.mark.parametrize(("prompt", "needle"), [
    ("/bootstrap my-agent", "/bootstrap is a reserved command"),
    ("/no-such-skill do it", "/no-such-skill is not an enabled skill (available: /analyst, /free, /writer)"),
])
async def test_reserved_and_unknown_slash_commands_are_refused_with_a_message(harness, prompt, needle):
    with pytest.raises(UserError) as info:
        await harness.run(["never"], prompt)
    assert needle in str(info.value)


async def test_paths_and_plain_text_starting_with_a_slash_are_not_commands(harness):
    run = await harness.run(["ok"], "/mnt/user-data/uploads/a.csv please")
    assert run.status == "success"


async def test_deferred_discovery_sends_only_the_index_until_describe_skill(tmp_path):
    public = tmp_path / "public"
    write_skill(public, "analyst", description="Analyse tabular data with pandas.", allowed=["python"])
    write_skill(public, "writer", description="Write polished reports.")
    harness = SkillHarness(home=tmp_path / "home", public=public,
                           config=AppConfig(skills=SkillsConfig(deferred_discovery=True)))
    script = [{"tool_calls": [{"name": "describe_skill", "args": {"query": "tabular pandas"}}]},
              {"tool_calls": [{"name": "describe_skill", "args": {"query": "select:writer"}}]}, "done"]
    run = await harness.run(script, "help with my table")
    first = system_text(run.model.calls[0])
    assert "<skill_index>analyst, writer</skill_index>" in first
    assert "Analyse tabular data" not in first and "Write polished reports" not in first
    assert "describe_skill" in run.model.calls[0].tools
    by_query, by_name = run.results("describe_skill")
    assert "Analyse tabular data with pandas." in by_query.text and "writer" not in by_query.text
    assert "/mnt/skills/analyst/SKILL.md" in by_query.text
    assert "Write polished reports." in by_name.text and "analyst" not in by_name.text
    # describing is not activating: no tool scope, nothing recorded
    assert "write_file" in run.model.calls[2].tools
    assert not run.values.get("skill_context")


async def test_default_discovery_lists_descriptions_and_no_describe_tool(harness):
    run = await harness.run(["ok"], "hello")
    prompt = system_text(run.model.calls[0])
    assert "<name>analyst</name>\n<description>Analyse data with Python.</description>" in prompt
    assert "<location>/mnt/skills/analyst/SKILL.md</location>" in prompt
    assert "describe_skill" not in run.model.calls[0].tools


async def test_disabled_skills_are_invisible_to_prompt_slash_and_file_tools(harness):
    await asyncio.to_thread(harness.library.set_enabled, "local", "writer", False)
    script = [{"tool_calls": [{"name": "read_file", "args": {"path": "/mnt/skills/writer/SKILL.md"}},
                              {"name": "ls", "args": {"path": "/mnt/skills"}}]}, "done"]
    run = await harness.run(script, "hello")
    assert "writer" not in system_text(run.model.calls[0])
    read, listing = run.results("read_file")[0], run.results("ls")[0]
    assert read.status == "error"
    assert "writer" not in listing.text and "analyst" in listing.text
    with pytest.raises(UserError, match="/writer is not an enabled skill"):
        await harness.run(["never"], "/writer go")


async def test_a_reply_to_a_clarification_continues_the_slash_skills_turn(harness):
    script = [
        {"tool_calls": [{"name": "ask_clarification", "args": {"question": "Which file should I analyse?"}}]},
        {"tool_calls": [{"name": "write_file", "args": {"path": "/mnt/user-data/outputs/y.md", "content": "y"}}]},
        "done",
    ]
    asked = await harness.run(script, "/analyst analyse my data")
    assert asked.status == "interrupted"
    answered = await harness.run(script, "sales.csv, please")
    assert answered.results("write_file")[0].code == "skill_tool_not_allowed"
    assert "Step 1: load the data with python." in system_text(answered.model.calls[0])
