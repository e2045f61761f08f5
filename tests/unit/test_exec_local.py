"""The local provider: host bash refused by default, secrets scrubbed, paths translated and masked."""

from __future__ import annotations

from pathlib import Path

import pytest

from deerflow.config.paths import ThreadPaths
from deerflow.sandbox.execution.env import scrub_env
from deerflow.sandbox.execution.local import LocalSandboxProvider
from deerflow.sandbox.execution.provider import HostBashDisabled
from deerflow.tools.builtins.exec_tools import exec_tools


@pytest.fixture
def paths(tmp_path: Path) -> ThreadPaths:
    return ThreadPaths(tmp_path / "threads" / "t1").ensure()


def test_scrub_env_drops_secret_looking_names_only() -> None:
    env = {
        "OPENAI_API_KEY": "a", "GITHUB_TOKEN": "b", "AWS_SECRET_ACCESS_KEY": "c",
        "DB_PASSWORD": "d", "GOOGLE_APPLICATION_CREDENTIALS": "e", "my_token": "f",
        "PATH": "/usr/bin", "LANG": "C.UTF-8",
    }  # fmt: skip
    assert scrub_env(env) == {"PATH": "/usr/bin", "LANG": "C.UTF-8"}


def test_host_bash_is_refused_by_default_and_nothing_runs(paths: ThreadPaths) -> None:
    provider = LocalSandboxProvider()
    with pytest.raises(HostBashDisabled) as caught:
        provider.execute(paths, "touch ran.txt")
    assert caught.value.code == "host_bash_disabled"
    assert "host" in caught.value.message
    assert not (paths.workspace / "ran.txt").exists()


def test_bash_tool_is_only_offered_when_host_bash_is_allowed() -> None:
    assert [t.name for t in exec_tools(LocalSandboxProvider())] == ["python"]
    assert [t.name for t in exec_tools(LocalSandboxProvider(allow_host_bash=True))] == [
        "bash",
        "python",
    ]


def test_allowed_host_bash_runs_in_the_workspace_without_secrets(
    paths: ThreadPaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_API_KEY", "sk-do-not-leak")
    provider = LocalSandboxProvider(allow_host_bash=True)
    result = provider.execute(paths, "pwd; env; echo made > /mnt/user-data/outputs/out.txt")
    assert result.exit_code == 0
    assert "sk-do-not-leak" not in result.output
    assert "FAKE_API_KEY" not in result.output
    assert result.output.splitlines()[0] == str(paths.workspace)
    assert (paths.outputs / "out.txt").read_text() == "made\n"
    assert provider.mask_out(paths, result.output).splitlines()[0] == "/mnt/user-data/workspace"


def test_masking_hides_host_paths_of_every_mount(paths: ThreadPaths) -> None:
    provider = LocalSandboxProvider()
    text = f"{paths.uploads}/a.csv {paths.workspace}/b.py {paths.outputs}/c.md"
    assert provider.mask_out(paths, text) == (
        "/mnt/user-data/uploads/a.csv /mnt/user-data/workspace/b.py /mnt/user-data/outputs/c.md"
    )
