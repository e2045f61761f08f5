"""What ``pip install`` gets, checked on the source tree (the built wheel: test_wheel_install.py).

The package data setup.py copies is in the sdist too, the license is an SPDX string (no
setuptools deprecation banner), the install enables the server extension, and the README's list
of tools a skill's ``allowed-tools`` cannot take away is the code's.
"""

from __future__ import annotations

import ast
import json
import re
import tomllib
from pathlib import Path

from deerflow.skills.activation import FRAMEWORK_TOOLS

ROOT = Path(__file__).resolve().parents[2]


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _package_data() -> dict[str, str]:
    """setup.py's PACKAGE_DATA, read without running setup()."""
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "PACKAGE_DATA" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError("setup.py has no PACKAGE_DATA")


def test_the_license_is_an_spdx_string():
    project, build = _pyproject()["project"], _pyproject()["build-system"]
    assert project["license"] == "MIT"  # not {text = ...}: deprecated, a banner on every install
    assert not [c for c in project.get("classifiers", []) if c.startswith("License ::")]
    assert any(re.fullmatch(r"setuptools>=(\d+)", r) and int(r.split(">=")[1]) >= 77 for r in build["requires"])


def test_the_wheel_carries_the_skills_notebooks_and_workspace():
    data = _package_data()
    assert {"skills/public", "notebooks", "extension/jupyter-config/deerflow-workspace.json"} <= set(data)
    for source in data:
        assert (ROOT / source).exists(), source
    manifest = (ROOT / "MANIFEST.in").read_text(encoding="utf-8").split()
    for source in data:  # an sdist built into a wheel has them too
        assert source in manifest, f"MANIFEST.in lacks {source}"
    public = {p.parent.name for p in (ROOT / "skills" / "public").glob("*/SKILL.md")}
    assert public == {"data-analysis", "deep-research", "notebook-report", "skill-creator"}


def test_the_install_enables_the_server_extension():
    files = _pyproject()["tool"]["setuptools"]["data-files"]["etc/jupyter/jupyter_server_config.d"]
    enabling = json.loads((ROOT / files[0]).read_text(encoding="utf-8"))
    assert enabling["ServerApp"]["jpserver_extensions"] == {"deerflow_jupyter": True}
    assert _pyproject()["project"]["entry-points"]["jupyter_ai.personas"]["deerflow"] == \
        "deerflow_jupyter.chat.persona:DeerFlowPersona"
    assert _pyproject()["project"]["scripts"]["deerflow"] == "deerflow.cli:main"


def test_the_readme_names_the_tools_a_skill_cannot_turn_off():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    paragraph = readme.split("tools are always on, whatever a skill", 1)[1].split("stays allowed", 1)[0]
    named = set(re.findall(r"`([a-z_]+)`", paragraph)) - {"read_file"}
    assert named == set(FRAMEWORK_TOOLS)
    assert f"{len(FRAMEWORK_TOOLS)} framework tools are always on" in readme.replace("Five", "5")
