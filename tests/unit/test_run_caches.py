"""What a run reuses from the runs before it: built tools, parsed ``SKILL.md`` files.

Structure, not timing: a second run gets the *same* tool objects (their pydantic
schemas derived once), and a skill's manifest is parsed again exactly when its
file changed, never served stale through a link.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from deerflow.config.loader import load_config
from deerflow.models.factory import create_chat_model
from deerflow.sandbox.factory import make_provider
from deerflow.skills.catalog import load_skill
from deerflow.tools.assembly import ToolCache
from deerflow.tools.builtins import builtin_groups

SKILL = "---\nname: {name}\ndescription: {description}\n---\n\nBody.\n"


@pytest.fixture
def loaded(tmp_path: Path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text("sandbox:\n  use: local\n")
    return load_config(cfg, env={})


def test_builtin_tools_are_built_once_per_cache(loaded) -> None:
    """Every function-built group (notebook, exec, web) is shared by later runs; a new cache rebuilds."""
    model = create_chat_model(loaded.config, None, config_file=str(loaded.path))
    sandbox = make_provider(loaded.config.sandbox)
    cache = ToolCache()
    first = builtin_groups(loaded.config, model, sandbox=sandbox, cache=cache)
    second = builtin_groups(loaded.config, model, sandbox=sandbox, cache=cache)
    for group in ("notebook", "exec", "web"):
        assert first[group], group
        assert [id(t) for t in first[group]] == [id(t) for t in second[group]], group
        assert first[group] is not second[group]  # a new list per run: a run may filter its own
    fresh = builtin_groups(loaded.config, model, sandbox=sandbox, cache=ToolCache())
    assert {id(t) for t in fresh["notebook"]}.isdisjoint(id(t) for t in first["notebook"])


def write_skill(directory: Path, description: str) -> None:
    directory.mkdir(exist_ok=True)
    (directory / "SKILL.md").write_text(SKILL.format(name=directory.name, description=description))


def test_skill_manifest_is_reparsed_exactly_when_it_changes(tmp_path: Path) -> None:
    write_skill(tmp_path / "alpha", "First.")
    one, two = load_skill(tmp_path / "alpha", "custom"), load_skill(tmp_path / "alpha", "custom")
    assert one.manifest is two.manifest  # unchanged file: the parse is reused
    write_skill(tmp_path / "alpha", "Second, longer.")
    assert load_skill(tmp_path / "alpha", "custom").manifest.description == "Second, longer."


def test_linked_manifest_is_never_served_from_the_cache(tmp_path: Path) -> None:
    """The cache keys on the file's own ``lstat``: a linked SKILL.md is parsed on every read (the loader's
    rules for links stay as they are), so nothing reached through a link is ever served from the cache."""
    (tmp_path / "beta").mkdir()
    target = tmp_path / "elsewhere.md"
    target.write_text(SKILL.format(name="beta", description="Before."))
    os.symlink(target, tmp_path / "beta" / "SKILL.md")
    first, again = load_skill(tmp_path / "beta", "custom"), load_skill(tmp_path / "beta", "custom")
    assert first.manifest == again.manifest and first.manifest is not again.manifest  # parsed twice
    target.write_text(SKILL.format(name="beta", description="After."))
    assert load_skill(tmp_path / "beta", "custom").manifest.description == "After."
