"""The sandbox environment allowlist and the limit settings, without starting anything."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from deerflow.config.schema import SandboxConfig
from deerflow.sandbox.docker.spec import ContainerPython, container_env
from deerflow.sandbox.execution.env import check_environment, sandbox_env
from deerflow.sandbox.execution.limits import ProcessLimits, parse_size

SERVER = {
    "DATABASE_URL": "postgres://u:secretpw@h/db",
    "SENTRY_DSN": "https://key@sentry.example/1",
    "DEERFLOW_HOME": "/root/.deerflow",
    "PYTHONPATH": "/work/checkout",
    "LANG": "de_DE.UTF-8",
    "LC_TIME": "en_GB.UTF-8",
    "TZ": "Europe/Berlin",
    "PATH": "/root/.local/bin:/usr/bin",
    "HOME": "/root",
}


def test_only_locale_and_time_zone_come_from_the_server() -> None:
    env = sandbox_env(path="/usr/bin", home="/tmp", host=SERVER, extra={"PIP_INDEX_URL": "https://mirror"})
    assert env == {
        "PATH": "/usr/bin", "HOME": "/tmp", "TERM": "dumb", "LANG": "de_DE.UTF-8",
        "LC_TIME": "en_GB.UTF-8", "TZ": "Europe/Berlin", "PIP_INDEX_URL": "https://mirror",
    }  # fmt: skip


def test_the_provider_wins_over_the_operator_and_path_and_home_are_fixed() -> None:
    env = sandbox_env(
        path="/p", home="/h", host={}, extra={"USER": "operator"}, fixed={"USER": "sandbox", "PATH": "/x"}
    )
    assert (env["USER"], env["PATH"], env["HOME"], env["LANG"]) == ("sandbox", "/p", "/h", "C.UTF-8")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"PATH": "/evil"}, "PATH is set by the sandbox"),
        ({"LD_PRELOAD": "/x.so"}, "LD_PRELOAD is set by the sandbox"),
        ({"HTTPS_PROXY": "http://elsewhere"}, "HTTPS_PROXY is set by the sandbox"),
        ({"A B": "x"}, "not a valid variable name"),
        ({"A": "x\0y"}, "NUL byte"),
    ],
)
def test_operator_environment_is_checked(extra: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_environment(extra)
    with pytest.raises(ValidationError, match=message):
        SandboxConfig(environment=extra)


def test_a_container_environment_reads_nothing_of_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SERVER.items():
        monkeypatch.setenv(name, value)
    env = container_env(ContainerPython.of_server(), network="allowlist", extra={"MY_FLAG": "1"})
    for value in SERVER.values():
        assert value not in env.values()
    assert env["MY_FLAG"] == "1" and env["HTTPS_PROXY"].startswith("http://127.0.0.1")


@pytest.mark.parametrize(("text", "size"), [("512m", 512 << 20), ("2g", 2 << 30), ("1024", 1024), ("64KB", 64 << 10)])
def test_memory_sizes(text: str, size: int) -> None:
    assert parse_size(text) == size


def test_a_bad_memory_size_is_a_config_error() -> None:
    with pytest.raises(ValidationError, match="not a memory size"):
        SandboxConfig(memory_limit="lots")


def test_rlimits_leave_memory_to_the_cgroup_when_there_is_one() -> None:
    limits = ProcessLimits(pids=64, memory="1g", cpu_seconds=30)
    assert limits.rlimit_args(memory_in_cgroup=True) == ["--rlimit", "nproc=64", "--rlimit", "cpu=30"]
    assert limits.rlimit_args(memory_in_cgroup=False)[-1] == f"as={1 << 30}"
    assert ProcessLimits(pids=None).rlimit_args(memory_in_cgroup=False) == []
