"""What the agent's code inherits, and how much it may fork: real kernels, real bubblewrap.

* Environment: every provider builds the child's environment from an allowlist;
  a cell or command printing its environment shows no value of the server's
  own (connection URLs, DSNs, tokens, host paths) unless the config names it.
* Limits: a bounded fork bomb inside bwrap stops at ``pids_limit`` while a real
  jupyter server (pytest-jupyter's, in this process, its loop free because the
  command runs off it) keeps answering ``/api/status``; what a cell or command
  forked does not outlive it.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from deerflow.config.paths import ThreadPaths
from deerflow.sandbox.execution.bwrap import BwrapSandboxProvider, find_bwrap
from deerflow.sandbox.execution.env import HOST_PASSTHROUGH
from deerflow.sandbox.execution.limits import ProcessLimits
from deerflow.sandbox.execution.local import LocalSandboxProvider
from deerflow.sandbox.execution.provider import SandboxProvider
from deerflow.sandbox.kernels.kernel_pool import KernelPool

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::UserWarning")]
needs_bwrap = pytest.mark.skipif(find_bwrap() is None, reason="bubblewrap (bwrap) is not installed")

SERVER_SECRETS = {
    "DATABASE_URL": "postgres://u:secretpw@h/db",
    "SENTRY_DSN": "https://abc123def@o1.ingest.sentry.io/42",
    "GITHUB_PAT": "ghp_notarealtokenbutlookslikeone",
    "AUTH_HEADER": "Bearer server-only-bearer",
    "DEERFLOW_CONFIG": "/srv/host-only/config.yaml",
    "DEERFLOW_HOME": "/srv/host-only/deerflow-home",
    "JUPYTER_CONFIG_DIR": "/srv/host-only/jupyter-config",
    "PYTHONPATH": "/srv/host-only/site",
    "MPLBACKEND": "module://host-only-backend",
}
# Names a sandbox may show: the allowlist of deerflow.sandbox.execution.env and the provider's own.
ALLOWED_NAMES = {
    "PATH", "HOME", "TERM", "USER", "LOGNAME", "LD_LIBRARY_PATH", "IPYTHONDIR",
    "PYDEVD_DISABLE_FILE_VALIDATION", "OPERATOR_SETTING", *HOST_PASSTHROUGH,
    # set by the shell or IPython themselves, not inherited
    "PWD", "SHLVL", "_", "OLDPWD", "CLICOLOR", "PAGER", "GIT_PAGER", "FORCE_COLOR",
    "JPY_PARENT_PID", "JPY_SESSION_NAME", "MPLBACKEND", "CLICOLOR_FORCE", "PYDEVD_USE_FRAME_EVAL",
}  # fmt: skip
DUMP_ENV = "import json, os; print('ENV=' + json.dumps(dict(os.environ)))"
FORK_BOMB = (
    "python -c \"import os, time\nn = 0\ntry:\n    for _ in range({count}):\n"
    "        if os.fork() == 0:\n            time.sleep(300)\n            os._exit(0)\n"
    "        n += 1\nexcept OSError as e:\n    print('stopped', n, e.errno)\nelse:\n"
    "    print('forked', n)\n\""
)


@pytest.fixture
def server_secrets(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The server's environment holds secrets and host paths (set before providers are made)."""
    for name, value in SERVER_SECRETS.items():
        monkeypatch.setenv(name, value)
    return SERVER_SECRETS


@pytest.fixture
def paths(tmp_path: Path) -> ThreadPaths:
    return ThreadPaths(tmp_path / "home" / "users" / "u" / "threads" / "t1").ensure()


@pytest.fixture(params=["local", pytest.param("bwrap", marks=needs_bwrap)])
def provider(request: pytest.FixtureRequest, server_secrets: dict[str, str]) -> Iterator[SandboxProvider]:
    extra = {"OPERATOR_SETTING": "named-in-config"}
    sandbox: SandboxProvider
    if request.param == "local":
        sandbox = LocalSandboxProvider(allow_host_bash=True, environment=extra)
    else:
        sandbox = BwrapSandboxProvider(environment=extra)
    yield sandbox
    sandbox.close()  # type: ignore[attr-defined]


@pytest.fixture
def bwrap_capped() -> Iterator[BwrapSandboxProvider]:
    """bwrap with ``pids_limit: 100``; skips where nothing can hold that cap (see limits.py)."""
    sandbox = BwrapSandboxProvider(limits=ProcessLimits(pids=100))
    if sandbox.cgroups is None and os.getuid() == 0:
        sandbox.close()
        pytest.skip("running as root without a writable cgroup: RLIMIT_NPROC exempts uid 0")
    yield sandbox
    sandbox.close()


def _environment(output: str) -> dict[str, str]:
    line = next(line for line in output.splitlines() if line.startswith("ENV="))
    return json.loads(line[4:])


def _assert_allowlisted(env: dict[str, str], secrets: dict[str, str]) -> None:
    shown = json.dumps(env)
    for name, value in secrets.items():
        assert value not in shown, name
    assert set(env) <= ALLOWED_NAMES, set(env) - ALLOWED_NAMES
    assert env["OPERATOR_SETTING"] == "named-in-config"
    assert env["HOME"] != str(Path.home())


def test_a_cell_sees_only_the_allowlisted_environment(
    provider: SandboxProvider, paths: ThreadPaths, server_secrets: dict[str, str]
) -> None:
    with KernelPool(provider, default_timeout=60) as pool:
        result = pool.run_sync(paths, DUMP_ENV)
    env = _environment(result.text)
    _assert_allowlisted(env, server_secrets)
    assert "PYTHONPATH" not in env and "DEERFLOW_HOME" not in env


def test_a_command_sees_only_the_allowlisted_environment(
    provider: SandboxProvider, paths: ThreadPaths, server_secrets: dict[str, str]
) -> None:
    result = provider.execute(paths, f'python -c "{DUMP_ENV}"; cat /proc/self/environ | tr "\\0" "\\n"')
    assert result.exit_code == 0, result.output
    _assert_allowlisted(_environment(result.output), server_secrets)
    for value in server_secrets.values():
        assert value not in result.output


def _host_processes_with(marker: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z":
            found.append(int(proc.name))
    return found


def _gone(marker: str, *, deadline_s: float = 15) -> bool:
    deadline = time.monotonic() + deadline_s
    while _host_processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    return _host_processes_with(marker) == []


@needs_bwrap
async def test_a_fork_bomb_stops_at_the_cap_and_the_server_keeps_answering(
    jp_fetch, bwrap_capped: BwrapSandboxProvider, paths: ThreadPaths
) -> None:
    bomb = asyncio.create_task(bwrap_capped.aexecute(paths, FORK_BOMB.format(count=2000), timeout=120))
    codes: list[int] = []
    while not bomb.done() or not codes:
        # A generous per-request deadline: a hang guard, not a timing claim.
        codes.append((await asyncio.wait_for(jp_fetch("api", "status"), 20)).code)
        await asyncio.sleep(0.02)
    result = await bomb
    assert result.exit_code == 0, result.output
    assert result.output.startswith("stopped "), result.output
    assert int(result.output.split()[1]) < 100
    assert set(codes) == {200}
    assert _gone("time.sleep(300)")


@needs_bwrap
def test_what_a_command_leaves_running_is_killed_when_it_ends(paths: ThreadPaths) -> None:
    marker = "4242.321"
    sandbox = BwrapSandboxProvider()
    try:
        result = sandbox.execute(
            paths, f"for i in 1 2 3 4 5; do setsid sleep {marker} & done; nohup sleep {marker} & echo started"
        )
    finally:
        sandbox.close()
    assert result.output.strip().endswith("started")
    assert _gone(f"sleep {marker}")


@needs_bwrap
def test_a_cells_children_die_with_the_cell_and_the_kernel_survives_a_fork_bomb(
    bwrap_capped: BwrapSandboxProvider, paths: ThreadPaths
) -> None:
    marker = "4242.654"
    spawn = (
        "import subprocess, os\nkept = 'state survives'\n"
        f"procs = [subprocess.Popen(['sleep', '{marker}']) for _ in range(20)]\n"
        f"os.system('setsid nohup sleep {marker} >/dev/null 2>&1 &')\nprint('spawned', len(procs))"
    )
    bomb = (
        "import os, time\nn = 0\ntry:\n    for _ in range(2000):\n        if os.fork() == 0:\n"
        "            time.sleep(300)\n            os._exit(0)\n        n += 1\n"
        "except OSError as e:\n    print('stopped', n)\n"
    )
    with KernelPool(bwrap_capped, default_timeout=120) as pool:
        first = pool.run_sync(paths, spawn)
        assert "spawned 20" in first.text, first.text
        assert _gone(f"sleep {marker}")
        stopped = pool.run_sync(paths, bomb)
        assert stopped.text.startswith("stopped "), stopped.text
        assert int(stopped.text.split()[1]) < 100
        # The forks share the kernel's command line, so count from inside: bwrap's init,
        # the supervisor, the kernel and the `ls` itself are all that is left.
        again = pool.run_sync(
            paths, "import subprocess\nprint(kept, subprocess.run(['true']).returncode)\n"
            "print(subprocess.run('ls /proc | grep -c ^[0-9]', shell=True, capture_output=True, text=True).stdout)"
        )
    assert again.recovery == "none"
    assert "state survives 0" in again.text, again.text
    assert int(again.text.split()[-1]) <= 6, again.text


def test_operator_environment_cannot_override_what_the_sandbox_sets() -> None:
    with pytest.raises(ValueError, match="PATH is set by the sandbox"):
        LocalSandboxProvider(environment={"PATH": "/evil"})
    with pytest.raises(ValueError, match="not a valid variable name"):
        LocalSandboxProvider(environment={"A=B": "x"})


@needs_bwrap
@pytest.mark.parametrize("cgroups", [True, False], ids=["cgroup-if-possible", "rlimits-only"])
def test_memory_and_cpu_time_caps_stop_a_runaway(paths: ThreadPaths, cgroups: bool) -> None:
    sandbox = BwrapSandboxProvider(limits=ProcessLimits(memory="256m", cpu_seconds=2), cgroups=cgroups)
    try:
        memory = sandbox.execute(paths, "python -c \"x = bytearray(600 << 20); print('allocated')\"", timeout=60)
        spin = sandbox.execute(paths, 'python -c "while True: pass"', timeout=60)
    finally:
        sandbox.close()
    assert memory.exit_code not in (0, None), memory.output
    assert "allocated" not in memory.output
    assert not spin.timed_out and spin.exit_code not in (0, None), spin


@pytest.mark.parametrize("kind", ["local", pytest.param("bwrap", marks=needs_bwrap)])
def test_an_interrupted_cells_children_are_killed_too(paths: ThreadPaths, kind: str) -> None:
    marker = f"4242.{9 if kind == 'local' else 8}87"
    sandbox: SandboxProvider = LocalSandboxProvider() if kind == "local" else BwrapSandboxProvider()
    cell = (
        "import subprocess, time\nkept = 'still here'\n"
        f"procs = [subprocess.Popen(['sleep', '{marker}']) for _ in range(5)]\ntime.sleep(300)"
    )
    try:
        with KernelPool(sandbox, default_timeout=60, interrupt_grace=10) as pool:
            stopped = pool.run_sync(paths, cell, timeout=3)
            assert stopped.timed_out and stopped.recovery == "interrupted", stopped
            assert _gone(f"sleep {marker}")
            assert "still here" in pool.run_sync(paths, "print(kept)").text
    finally:
        sandbox.close()  # type: ignore[attr-defined]
