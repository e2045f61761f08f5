"""Startup plugins: validated sources, snapshots, rollback of a failed load, contained observers."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from deerflow.config.loader import load_config
from deerflow.config.schema import PluginConfig
from deerflow.errors import ConfigError
from deerflow.plugins import PluginSet, load_plugins
from fixtures.plugin_sources import write_plugin


def entry(name: str, **kw) -> PluginConfig:
    return PluginConfig(name=name, **kw)


def test_a_local_plugin_is_snapshotted_and_contributes(tmp_path):
    source = write_plugin(tmp_path / "src", "good")
    plugins = load_plugins([entry("good", path=str(source), options={"log": str(tmp_path / "log")})],
                           home=tmp_path / "home")
    (report,) = plugins.reports
    assert report.status == "loaded" and len(report.digest) == 64
    assert report.contributes == {"tools": ["plugin_echo"], "middlewares": 1, "observers": 1, "routes": ["/status"]}
    assert [t.name for t in plugins.tools()] == ["plugin_echo"]
    first, second = plugins.middlewares(), plugins.middlewares()
    assert first[0] is not second[0]  # a fresh instance per run
    snapshot = tmp_path / "home" / "plugins" / "snapshots" / f"good-{report.digest[:16]}"
    assert (snapshot / "helper.py").read_text() == "VERSION = '1'\n"
    (source / "helper.py").write_text("VERSION = 'tampered'\n")  # edits after startup change nothing running
    assert plugins.tools()[0].invoke({"text": "hi"}) == "plugin 1 says: hi"
    assert sys.modules["deerflow_plugin_good"].__file__.startswith(str(snapshot))


def test_a_failing_plugin_is_rolled_back_and_reported_and_others_still_load(tmp_path):
    broken = write_plugin(tmp_path / "src", "broken")
    good = write_plugin(tmp_path / "src", "good")
    plugins = load_plugins([entry("broken", path=str(broken)),
                            entry("good", path=str(good), options={"log": str(tmp_path / "log")}),
                            entry("off", path=str(good), enabled=False)], home=tmp_path / "home")
    failed, loaded, off = plugins.reports
    assert failed.status == "failed" and failed.error == "RuntimeError: the plugin's database is unreachable"
    assert "deerflow_plugin_broken" not in sys.modules and "deerflow_plugin_broken.half" not in sys.modules
    assert [t.name for t in plugins.tools()] == ["plugin_echo"]  # nothing of the broken one was kept
    assert loaded.status == "loaded" and off.status == "disabled"


@pytest.mark.parametrize(("make", "message"), [
    (lambda root: root / "missing", "does not exist"),
    (lambda root: (root / "pkg").mkdir() or root / "pkg", "has no __init__.py"),
    (lambda root: (root / "notes.txt").write_text("x") and root / "notes.txt", "neither a package"),
])
def test_bad_sources_are_refused(tmp_path, make, message):
    plugins = load_plugins([entry("bad", path=str(make(tmp_path)))], home=tmp_path / "home")
    assert plugins.reports[0].status == "failed" and message in plugins.reports[0].error
    assert plugins.tools() == []


def test_symlinks_and_unknown_entry_points_are_refused(tmp_path):
    source = write_plugin(tmp_path / "src", "good")
    (source / "secrets").symlink_to("/etc")
    plugins = load_plugins([entry("good", path=str(source)), entry("ghost", entry_point="no-such-plugin")],
                           home=tmp_path / "home")
    assert [r.status for r in plugins.reports] == ["failed", "failed"]
    assert "symlink" in plugins.reports[0].error
    assert "no installed package provides entry point 'no-such-plugin'" in plugins.reports[1].error


def test_entry_point_plugins_load_from_installed_distributions(tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "demo_plugin").mkdir(parents=True)
    (site / "demo_plugin" / "__init__.py").write_text(
        "def register(plugin):\n    plugin.add_observer(print)\n")
    dist = site / "demo_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: demo-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[deerflow.plugins]\ndemo = demo_plugin\n")
    monkeypatch.syspath_prepend(str(site))
    plugins = load_plugins([entry("demo", entry_point="demo")], home=tmp_path / "home")
    assert plugins.reports[0].status == "loaded" and plugins.reports[0].contributes["observers"] == 1


def test_middleware_instances_are_refused(tmp_path):
    folder = tmp_path / "inst"
    folder.mkdir()
    (folder / "__init__.py").write_text(
        "from langchain.agents.middleware import AgentMiddleware\n"
        "def register(plugin):\n    plugin.add_middleware(AgentMiddleware())\n")
    plugins = load_plugins([entry("inst", path=str(folder))], home=tmp_path / "home")
    assert plugins.reports[0].status == "failed" and "factory" in plugins.reports[0].error


async def test_a_failing_observer_never_breaks_publishing():
    seen = []

    async def publish(event):
        seen.append(event)

    def bad_observer(event):
        raise ValueError("boom")

    from deerflow.plugins.api import Contributions
    from deerflow.plugins.loader import LoadedPlugin

    plugins = PluginSet([LoadedPlugin("x", Contributions(observers=[bad_observer]))])
    await plugins.observe(publish)("event")
    assert seen == ["event"]


def test_plugin_config_needs_exactly_one_source(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text("plugins:\n  - name: both\n    path: ./x\n    entry_point: y\n")
    with pytest.raises(ConfigError, match="exactly one of entry_point or path"):
        load_config(cfg)


def test_plugin_paths_are_relative_to_the_config_file(tmp_path):
    write_plugin(tmp_path / "conf" / "plugins", "good")
    cfg = tmp_path / "conf" / "config.yaml"
    cfg.write_text(f"plugins:\n  - name: good\n    path: plugins/good\n    options: {{log: {tmp_path / 'log'}}}\n")
    loaded = load_config(cfg)
    plugins = load_plugins(loaded.config.plugins, home=tmp_path / "home", base_dir=Path(loaded.path).parent)
    assert plugins.reports[0].status == "loaded"
