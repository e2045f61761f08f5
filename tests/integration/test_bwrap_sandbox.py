"""Real bubblewrap: what a sandboxed command can see, write and reach."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from deerflow.config.paths import ThreadPaths
from deerflow.sandbox.execution.bwrap import BwrapSandboxProvider, find_bwrap
from fixtures.web_server import serve, text

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(find_bwrap() is None, reason="bubblewrap (bwrap) is not installed"),
]

FETCH = (
    'python -c "import urllib.request,sys; '
    'print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())" {url}'
)


@pytest.fixture
def paths(tmp_path: Path) -> ThreadPaths:
    return ThreadPaths(tmp_path / "home" / "users" / "u" / "threads" / "t1").ensure()


@pytest.fixture
def provider() -> Iterator[BwrapSandboxProvider]:
    sandbox = BwrapSandboxProvider(network="isolated")
    yield sandbox
    sandbox.close()


@pytest.fixture
def host_server() -> Iterator[str]:
    """An HTTP server on the host's loopback answering ``host-only-page``."""
    with serve({"/": text("host-only-page")}) as web:
        yield web.url("/")


def test_only_system_dirs_and_virtual_mounts_are_visible(
    provider: BwrapSandboxProvider, paths: ThreadPaths, tmp_path: Path
) -> None:
    secret = tmp_path / "host-secret.txt"
    secret.write_text("host secret contents")
    top = set(provider.execute(paths, "ls -A /").output.split())
    assert {"usr", "etc", "mnt", "opt", "tmp", "proc", "dev"} <= top
    assert {"root", "home", "work", "srv", "var", "boot"}.isdisjoint(top)
    assert provider.execute(paths, "ls /mnt/user-data").output.split() == [
        "outputs",
        "uploads",
        "workspace",
    ]
    for hidden in ("/root", str(secret), str(paths.workspace), "/etc/shadow"):
        assert provider.execute(paths, f"test -e {hidden}").exit_code == 1, hidden
    assert "host secret contents" not in provider.execute(paths, f"cat {secret}").output
    assert provider.execute(paths, "pwd").output == "/mnt/user-data/workspace\n"


def test_system_dirs_are_read_only_and_the_user_is_unprivileged(
    provider: BwrapSandboxProvider, paths: ThreadPaths
) -> None:
    result = provider.execute(paths, "touch /usr/evil; touch /etc/evil; id -u")
    assert result.output.count("Read-only file system") == 2
    assert "\n1000\n" in f"\n{result.output}"
    assert not Path("/usr/evil").exists()


def test_files_written_in_the_sandbox_appear_in_the_thread(
    provider: BwrapSandboxProvider, paths: ThreadPaths
) -> None:
    result = provider.execute(
        paths,
        "echo draft > notes.txt && mkdir -p charts && echo final > /mnt/user-data/outputs/report.md",
    )
    assert result.exit_code == 0
    assert (paths.workspace / "notes.txt").read_text() == "draft\n"
    assert (paths.workspace / "charts").is_dir()
    assert (paths.outputs / "report.md").read_text() == "final\n"


def test_uploads_are_readable_but_not_writable(
    provider: BwrapSandboxProvider, paths: ThreadPaths
) -> None:
    (paths.uploads / "data.csv").write_text("a,b\n1,2\n")
    result = provider.execute(
        paths, "cat /mnt/user-data/uploads/data.csv; echo x >> /mnt/user-data/uploads/data.csv"
    )
    assert "a,b" in result.output
    assert "Read-only file system" in result.output
    assert (paths.uploads / "data.csv").read_text() == "a,b\n1,2\n"


def test_isolated_network_cannot_reach_the_host_loopback(
    provider: BwrapSandboxProvider, paths: ThreadPaths, host_server: str
) -> None:
    result = provider.execute(paths, FETCH.format(url=host_server))
    assert result.exit_code != 0
    assert "host-only-page" not in result.output


def test_open_network_can_reach_the_host_loopback(paths: ThreadPaths, host_server: str) -> None:
    open_provider = BwrapSandboxProvider(network="open")
    try:
        result = open_provider.execute(paths, FETCH.format(url=host_server))
    finally:
        open_provider.close()
    assert result.exit_code == 0, result.output
    assert "host-only-page" in result.output


def test_server_secrets_are_not_in_the_sandbox_environment(
    provider: BwrapSandboxProvider, paths: ThreadPaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_API_KEY", "sk-do-not-leak")
    monkeypatch.setenv("HARMLESS_SETTING", "also-not-passed")
    result = provider.execute(paths, "env; cat /proc/1/environ /proc/self/environ | tr '\\0' '\\n'")
    assert "sk-do-not-leak" not in result.output
    assert "FAKE_API_KEY" not in result.output
    assert "also-not-passed" not in result.output


def _host_processes_with(marker: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            continue
        if marker in cmdline and state != "Z":
            found.append(int(proc.name))
    return found


def test_timeout_kills_everything_the_command_started(
    provider: BwrapSandboxProvider, paths: ThreadPaths
) -> None:
    marker = "4242.125"
    result = provider.execute(paths, f"sleep {marker} & sleep {marker}; echo never", timeout=1)
    assert result.timed_out
    assert result.exit_code is None
    assert "never" not in result.output
    deadline = time.monotonic() + 10
    while _host_processes_with(f"sleep {marker}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _host_processes_with(f"sleep {marker}") == []


def test_skills_are_mounted_read_only(paths: ThreadPaths, tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    (skills / "demo").mkdir(parents=True)
    (skills / "demo" / "SKILL.md").write_text("# Demo skill")
    with_skills = BwrapSandboxProvider(skills_dir=skills)
    try:
        result = with_skills.execute(paths, "cat /mnt/skills/demo/SKILL.md; touch /mnt/skills/x")
    finally:
        with_skills.close()
    assert "# Demo skill" in result.output
    assert "Read-only file system" in result.output
    assert not (skills / "x").exists()
