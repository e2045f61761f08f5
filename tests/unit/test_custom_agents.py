"""Custom agents on disk: validation before writing, partial updates, per-user stores, bootstrap parsing."""

from __future__ import annotations

from pathlib import Path

import pytest

from deerflow.config.paths import HomePaths
from deerflow.config.schema import AppConfig
from deerflow.custom_agents import (
    AgentChange,
    AgentStore,
    InvalidAgentChange,
    apply_agent_commands,
    build_catalog,
    known_skills,
    resolve_profile,
)
from deerflow.errors import NotFoundError, UserError
from deerflow.run_options import RunOptions

CATALOG = build_catalog(
    AppConfig.model_validate({"models": [{"name": "m1", "use": "x.y:Z"}, {"name": "m2", "use": "x.y:Z"}]}),
    builtin_groups=["builtin", "file:read", "file:write"], skills=frozenset({"charts", "pdf"}))


@pytest.fixture
def store(tmp_path: Path) -> AgentStore:
    return AgentStore.for_user(HomePaths(tmp_path), "alice")


def files_of(store: AgentStore, name: str) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((store.root / name).iterdir())}


def test_setup_writes_soul_and_config_and_rebootstrap_keeps_owner_choices(store):
    store.setup("ada", soul="You are Ada.", description="A terse analyst", skills=None, catalog=CATALOG)
    store.update("ada", AgentChange(display_name="Ada Lovelace", model="m2"), catalog=CATALOG)
    again = store.setup("ada", soul="You are Ada, version two.", description="Still terse", skills=["pdf"],
                        catalog=CATALOG)
    assert again.soul.strip() == "You are Ada, version two."
    assert again.config.display_name == "Ada Lovelace" and again.config.model == "m2"
    assert again.config.description == "Still terse" and again.config.skills == ["pdf"]
    assert set(files_of(store, "ada")) == {"SOUL.md", "config.yaml"}  # no temporary files left


def test_partial_update_changes_only_the_given_fields(store):
    store.setup("ada", soul="You are Ada.", description="A terse analyst", skills=["charts"], catalog=CATALOG)
    updated = store.update("ada", AgentChange(tool_groups=["file:read"]), catalog=CATALOG)
    assert updated.config.tool_groups == ["file:read"]
    assert updated.config.skills == ["charts"] and updated.soul.strip() == "You are Ada."


@pytest.mark.parametrize(("change", "message"), [
    (AgentChange(skills=["charts", "nope"]), "unknown skill 'nope'"),
    (AgentChange(tool_groups=["browser"]), "unknown tool group 'browser'"),
    (AgentChange(model="gpt-9"), "unknown model 'gpt-9'"),
    (AgentChange(soul="   "), "soul is empty"),
    (AgentChange(soul="New soul", skills=["nope"]), "unknown skill"),  # one bad field: nothing written at all
    (AgentChange(), "nothing to change"),
])
def test_invalid_update_changes_nothing(store, change, message):
    store.setup("ada", soul="You are Ada.", description="A terse analyst", skills=None, catalog=CATALOG)
    before = files_of(store, "ada")
    with pytest.raises(InvalidAgentChange, match=message):
        store.update("ada", change, catalog=CATALOG)
    assert files_of(store, "ada") == before


def test_invalid_setup_writes_nothing(store):
    with pytest.raises(InvalidAgentChange, match="unknown skill"):
        store.setup("ada", soul="You are Ada.", description="x", skills=["nope"], catalog=CATALOG)
    assert not store.exists("ada") and store.list_agents() == []


def test_another_users_agent_is_invisible(tmp_path):
    home = HomePaths(tmp_path)
    AgentStore.for_user(home, "alice").setup("ada", soul="You are Ada.", description="x", skills=None,
                                             catalog=CATALOG)
    bob = AgentStore.for_user(home, "bob")
    assert bob.list_agents() == []
    with pytest.raises(NotFoundError, match="unknown agent 'ada'"):
        bob.get("ada")
    with pytest.raises(NotFoundError):
        resolve_profile(RunOptions(agent_name="ada"), bob)
    with pytest.raises(NotFoundError):
        bob.delete("ada")
    assert AgentStore.for_user(home, "alice").exists("ada")


@pytest.mark.parametrize("name", ["../x", "Ada", "a/b", "", "-x", "x" * 65])
def test_bad_agent_names_are_refused(store, name):
    with pytest.raises(UserError, match="invalid agent name"):
        store.setup(name, soul="s", description="d", skills=None, catalog=CATALOG)


def test_agent_commands_become_run_options():
    prompt, options = apply_agent_commands("/bootstrap ada a terse analyst", RunOptions(model_name="m1"))
    assert prompt == "a terse analyst"
    assert options == RunOptions(model_name="m1", agent_name="ada", is_bootstrap=True)
    assert apply_agent_commands("/bootstrapping is a word", RunOptions())[1] == RunOptions()
    with pytest.raises(UserError, match="/bootstrap needs an agent name"):
        apply_agent_commands("/bootstrap", RunOptions())
    assert apply_agent_commands("/agent ada what changed?", RunOptions()) == ("what changed?",
                                                                            RunOptions(agent_name="ada"))
    with pytest.raises(UserError, match="needs a prompt"):
        apply_agent_commands("/agent ada", RunOptions())


def test_profile_of_a_named_agent_carries_soul_model_groups_and_skills(store):
    store.setup("ada", soul="You are Ada.", description="x", skills=["pdf"], catalog=CATALOG)
    store.update("ada", AgentChange(model="m1", tool_groups=["file:read"]), catalog=CATALOG)
    profile = resolve_profile(RunOptions(agent_name="ada"), store)
    assert (profile.soul.strip(), profile.model, profile.tool_groups, profile.skills) == (
        "You are Ada.", "m1", ["file:read"], ["pdf"])
    assert "update_agent" in profile.prompt_sections()[0]
    bootstrap = resolve_profile(RunOptions(agent_name="ada", is_bootstrap=True), store)
    assert bootstrap.soul is None and bootstrap.model is None  # a bootstrap run is not the agent yet
    with pytest.raises(UserError, match="needs agent_name"):
        resolve_profile(RunOptions(is_bootstrap=True), store)


def test_known_skills_come_from_skill_roots_and_the_users_own(tmp_path):
    root = tmp_path / "skills"
    (root / "public" / "charts").mkdir(parents=True)
    (root / "public" / "charts" / "SKILL.md").write_text("---\nname: chart-maker\n---\nbody")
    mine = HomePaths(tmp_path / "home").user_skills("alice") / "notes"
    mine.mkdir(parents=True)
    (mine / "SKILL.md").write_text("no frontmatter")
    config = AppConfig.model_validate({"skills": {"path": str(root)}})
    assert known_skills(config, HomePaths(tmp_path / "home"), "alice") == {"chart-maker", "notes"}
    assert known_skills(config, HomePaths(tmp_path / "home"), "bob") == {"chart-maker"}
