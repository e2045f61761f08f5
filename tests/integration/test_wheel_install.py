"""``pip install`` of the built wheel works as well as the clone.

Builds the wheel from this checkout, installs it (not editable) with all its dependencies into
one fresh venv outside the repository (no system site-packages) and, from an empty directory:
``deerflow demo`` makes the three artifacts, ``deerflow skills list`` lists the four public skills,
``jupyter server extension list`` shows the extension enabled, and a ``jupyter server`` from that
venv serves ``/deerflow/api/`` with DeerFlow as the chat's default persona (the persona manager's
``/api/ai/message/DeerFlow`` route answering).  The build prints no license deprecation.

Installing every dependency takes minutes (PyPI, pip's cache reused), so these tests run only
with ``DEERFLOW_TEST_WHEEL=1``: ``make test-wheel`` (which ``.ci/run`` calls) sets it.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from fixtures.jupyter_process import running_jupyter

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not os.environ.get("DEERFLOW_TEST_WHEEL"),
                       reason="installs the wheel and its dependencies (minutes): make test-wheel"),
]

ROOT = Path(__file__).resolve().parents[2]
BUILD_TIMEOUT = 600
INSTALL_TIMEOUT = 1800  # a hang guard: a cold pip cache downloads a few hundred MB
COMMAND_TIMEOUT = 600
PUBLIC_SKILLS = {"data-analysis", "deep-research", "notebook-report", "skill-creator"}
PERSONA_ID = "jupyter-ai-personas::deerflow_jupyter::DeerFlowPersona"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True)
class Installed:
    venv: Path
    env: dict[str, str]  # for commands of the installed package: nothing of the checkout

    def bin(self, name: str) -> str:
        return str(self.venv / "bin" / name)


def _pip_cache() -> str:
    """The real user's pip cache (the session's HOME is a temporary one, with an empty cache)."""
    return os.environ.get("PIP_CACHE_DIR") or str(Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cache" / "pip")


def _clean_env(tmp: Path) -> dict[str, str]:
    drop = ("PYTHONPATH", "VIRTUAL_ENV", "DEERFLOW_USER", "DEERFLOW_CONFIG", "DEERFLOW_HOME", "OPENAI_API_KEY",
            "DEERFLOW_SERVER_URL", "DEERFLOW_SERVER_TOKEN", "DEERFLOW_SCRIPT", "JUPYTER_PATH")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return env | {"PIP_CACHE_DIR": _pip_cache(), "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                  "DEERFLOW_HOME": str(tmp / "deerflow-home")}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """One venv per session with the wheel built from this checkout installed (not editable)."""
    tmp = tmp_path_factory.mktemp("wheel-install")
    env = _clean_env(tmp)
    dist, venv = tmp / "dist", tmp / "venv"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(dist), str(ROOT)],
                           env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT, cwd=tmp, check=False)
    assert build.returncode == 0, (build.stdout + build.stderr)[-4000:]
    # an SPDX license string: no setuptools deprecation banner about the license on install
    assert "project.license" not in build.stdout + build.stderr, (build.stdout + build.stderr)[-4000:]
    wheel = next(dist.glob("deerflow_notebook-*.whl"))
    subprocess.run([sys.executable, "-m", "venv", str(venv)], env=env, check=True, timeout=BUILD_TIMEOUT)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
                   env=env, check=True, timeout=INSTALL_TIMEOUT, cwd=tmp)
    return Installed(venv, env | {"PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"})


def _run(installed: Installed, args: list[str], cwd: Path) -> str:
    done = subprocess.run(args, cwd=cwd, env=installed.env, capture_output=True, text=True,
                          timeout=COMMAND_TIMEOUT, check=False)
    output = ANSI.sub("", done.stdout + done.stderr)
    assert done.returncode == 0, f"{args} exited {done.returncode}:\n{output[-4000:]}"
    assert "Traceback" not in output, output[-4000:]
    return output


def test_the_wheel_is_a_real_install_outside_the_checkout(installed: Installed, tmp_path: Path):
    where = _run(installed, [installed.bin("python"), "-c",
                             "import deerflow; print(deerflow.__file__)"], tmp_path)
    location = Path(where.splitlines()[0])
    assert installed.venv in location.parents and ROOT not in location.parents
    config = installed.venv / "pyvenv.cfg"
    assert "include-system-site-packages = false" in config.read_text()


def test_deerflow_demo_in_an_empty_directory(installed: Installed, tmp_path: Path):
    output = _run(installed, [installed.bin("deerflow"), "demo"], tmp_path)
    artifacts = {p.name for p in (tmp_path / "demo-output" / "artifacts").iterdir()}
    assert {"report.md", "evidence.csv", "winter_severity.png"} <= artifacts, output[-3000:]
    assert (tmp_path / "demo-output" / "01_research_quickstart.ipynb").is_file()
    assert "without encryption" not in output


def test_the_public_skills_ship_with_the_package(installed: Installed, tmp_path: Path):
    output = _run(installed, [installed.bin("deerflow"), "skills", "list"], tmp_path)
    listed = {line.split()[1] for line in output.splitlines() if "[public]" in line}
    assert listed == PUBLIC_SKILLS, output


def test_the_install_enables_the_server_extension(installed: Installed, tmp_path: Path):
    output = _run(installed, [installed.bin("jupyter"), "server", "extension", "list"], tmp_path)
    assert re.search(r"deerflow_jupyter\s+enabled", output), output
    assert re.search(r"deerflow_jupyter\s+OK", output), output


def test_the_install_adds_the_deerflow_kernel_for_the_launcher(installed: Installed, tmp_path: Path):
    output = _run(installed, [installed.bin("jupyter"), "kernelspec", "list", "--json"], tmp_path)
    specs = json.loads(output[output.index("{"):])["kernelspecs"]
    assert "deerflow" in specs, sorted(specs)
    assert Path(specs["deerflow"]["resource_dir"]).is_relative_to(installed.venv), specs["deerflow"]
    assert specs["deerflow"]["spec"]["display_name"].startswith("DeerFlow"), specs["deerflow"]["spec"]


def test_a_server_from_the_venv_serves_deerflow_with_its_persona_as_default(installed: Installed, tmp_path: Path):
    env = {**installed.env, "PYTHONPATH": ""}  # the fixture adds tests/ only; nothing of the checkout
    with running_jupyter(tmp_path, env=env, python=installed.bin("python"), timeout=120) as server, \
            httpx.Client(headers=server.headers, timeout=60) as http:
        health = http.get(f"{server.api}/health")
        assert health.status_code == 200 and health.json()["status"] == "ok", health.text
        assert http.post(f"{server.api}/threads/search", json={}).json() == []
        page = http.get(f"{server.url}lab").text  # the persona manager's page config for the chat UI
        assert f'"jupyter_ai_default_persona": "{PERSONA_ID}"' in page
        # the persona manager's own route reaches DeerFlow (the installed offline model answers)
        answer = http.post(f"{server.url}api/ai/message/DeerFlow", json={"message": "Write me a report"})
        assert answer.status_code == 200, answer.text
        assert "I'll start by writing down a plan" in answer.json()["response"], answer.text
    log = server.log.read_text()
    assert "deerflow_jupyter | extension was successfully loaded" in log, log[-3000:]
    # (the route's one-shot chat, a uuid, has none: the persona manager builds it without the server's config)
    assert [line for line in log.splitlines() if "No default persona" in line
            and not re.search(r"chat '[0-9a-f-]{36}\.chat'", line)] == []
