"""Concurrent installs of one skill name: they take turns, and without ``replace`` the first one stays.

The installs are real: the same :class:`SkillLibrary` code the HTTP endpoint
and the agent's ``install_skill`` tool call, run from several threads of one
process and from separate processes at once, released together by a barrier.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest

from deerflow.config.paths import HomePaths
from deerflow.skills import SkillLibrary
from deerflow.skills.installer import SkillExistsError

pytestmark = pytest.mark.integration

WORKERS = 6


def _package(tmp_path: Path, marker: str) -> Path:
    path = tmp_path / f"tidy-{marker}.skill"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("tidy/SKILL.md", f"---\nname: tidy\ndescription: Tidy things.\n---\nVersion {marker}.\n")
        zf.writestr("tidy/marker.txt", marker)
        for i in range(40):  # some bulk, so staging and scanning overlap between the racers
            zf.writestr(f"tidy/notes/{i}.md", f"note {i}\n" * 200)
    return path


def _library(home: Path) -> SkillLibrary:
    return SkillLibrary(public_root=None, home=HomePaths(home), extensions_path=home / "extensions_config.json")


def _installed_marker(home: Path) -> str:
    return (HomePaths(home).user_skills("local") / "tidy" / "marker.txt").read_text()


def test_threads_installing_one_name_without_replace_leave_exactly_the_first(tmp_path: Path) -> None:
    home = tmp_path / "home"
    packages = [_package(tmp_path, f"t{i}") for i in range(WORKERS)]
    barrier = threading.Barrier(WORKERS)
    outcomes: dict[str, str] = {}

    def install(package: Path) -> None:
        library = _library(home)
        barrier.wait(timeout=30)
        try:
            library.install("local", package)
            outcomes[package.stem] = "installed"
        except SkillExistsError as exc:
            outcomes[package.stem] = f"exists: {exc}"

    threads = [threading.Thread(target=install, args=(p,)) for p in packages]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(outcomes) == WORKERS
    winners = [name for name, outcome in outcomes.items() if outcome == "installed"]
    assert len(winners) == 1, outcomes
    assert all("already installed" in o for o in outcomes.values() if o != "installed")
    assert f"tidy-{_installed_marker(home)}" == winners[0]  # the winner's files, never a later racer's
    root = HomePaths(home).user_skills("local")
    assert sorted(p.name for p in root.iterdir()) == ["tidy"]  # no staging directory left behind
    assert not (root / "tidy" / ".lock").exists()
    assert (HomePaths(home).user_dir("local") / ".skill-install-locks" / "tidy.lock").is_file()


_CHILD = """
import json, os, sys, time
from pathlib import Path
from deerflow.config.paths import HomePaths
from deerflow.skills import SkillLibrary
from deerflow.skills.installer import SkillExistsError
home, package, go = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
library = SkillLibrary(public_root=None, home=HomePaths(home), extensions_path=home / "extensions_config.json")
go.with_name(f"ready-{os.getpid()}").touch()
deadline = time.monotonic() + 60
while not go.exists() and time.monotonic() < deadline:
    time.sleep(0.001)
try:
    library.install("local", package, replace=sys.argv[4] == "replace")
    print(json.dumps({"outcome": "installed"}))
except SkillExistsError as exc:
    print(json.dumps({"outcome": "exists", "message": str(exc)}))
"""


def _race_processes(tmp_path: Path, home: Path, markers: list[str], mode: str) -> dict[str, dict[str, str]]:
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = {m: subprocess.Popen([sys.executable, "-c", _CHILD, str(home), str(_package(tmp_path, m)), str(go),
                                  mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
             for m in markers}
    try:
        deadline = time.monotonic() + 60  # a hang guard: every child waits at the barrier
        while len(list(tmp_path.glob("ready-*"))) < len(procs) and time.monotonic() < deadline:
            time.sleep(0.01)
        go.touch()
        results = {}
        for marker, proc in procs.items():
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            results[marker] = json.loads(out.strip().splitlines()[-1])
        return results
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def test_processes_installing_one_name_without_replace_leave_exactly_the_first(tmp_path: Path) -> None:
    home = tmp_path / "home"
    results = _race_processes(tmp_path, home, ["p1", "p2", "p3"], "new")
    winners = [m for m, r in results.items() if r["outcome"] == "installed"]
    assert len(winners) == 1, results
    assert all("already installed" in r["message"] for m, r in results.items() if m not in winners)
    assert _installed_marker(home) == winners[0]


def test_processes_replacing_one_name_take_turns_and_leave_one_whole_version(tmp_path: Path) -> None:
    home = tmp_path / "home"
    results = _race_processes(tmp_path, home, ["r1", "r2", "r3"], "replace")
    assert {r["outcome"] for r in results.values()} == {"installed"}
    skill = _library(home).skill("local", "tidy")
    marker = _installed_marker(home)
    assert skill.body == f"Version {marker}.\n"  # SKILL.md and marker.txt come from the same package
    assert sorted(p.name for p in HomePaths(home).user_skills("local").iterdir()) == ["tidy"]
