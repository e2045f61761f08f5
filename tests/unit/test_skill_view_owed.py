"""A thread's first skills view is owed by its run and built on first use, never replaced by another folder.

A run on a thread with no view does not copy the skills at its start: its paths carry the owed
build, and whatever mounts or reads ``/mnt/skills`` (the sandbox providers' mount table, the
file tools) builds it first.  These check that the deferred build gives exactly the eager one's
view, that only an *absent* view is deferred (a planted link or a stale view is rebuilt at the
start as before), that a link planted before the first use is replaced, never followed, and that
nothing falls back to the canonical skills (the provider's ``skills_dir``), not even after a
failed build.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from deerflow.config.paths import HomePaths, ThreadPaths
from deerflow.errors import Conflict
from deerflow.sandbox.execution.local import LocalSandboxProvider
from deerflow.skills import SkillLibrary, projection
from deerflow.skills.projection import OwedView, project_skills
from deerflow.skills.run import RunSkills, project_run_skills
from deerflow.tools.builtins.exec_tools import exec_tools
from deerflow.tools.builtins.file_tools import FILE_READ_TOOLS
from fixtures.canary import host_canary
from fixtures.skill_runs import write_skill
from fixtures.tool_runtime import make_runtime

pytestmark = pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")

SECRET = "host-canary-owed-view"
READ = {t.name: t for t in FILE_READ_TOOLS}


@pytest.fixture
def library(tmp_path: Path) -> SkillLibrary:
    public = tmp_path / "public"
    write_skill(public, "alpha", files={"scripts/run.py": "print('alpha')\n", "notes/a.md": "a\n"})
    write_skill(public, "beta")
    return SkillLibrary(public_root=public, home=HomePaths(tmp_path / "home"), extensions_path=tmp_path / "ext.json")


@pytest.fixture
def canary(tmp_path: Path) -> Path:
    return host_canary(tmp_path, SECRET)


def run_skills(library: SkillLibrary) -> RunSkills:
    return RunSkills.create("local", [s for s in library.listing("local").skills if s.enabled])


def new_thread(library: SkillLibrary, name: str) -> ThreadPaths:
    return library.home.thread("local", name).ensure()


def tree(directory: Path) -> dict[str, str]:
    """Every entry below ``directory`` (no link followed): a file's digest, else its kind."""
    found = {}
    for root, dirs, files in os.walk(directory):
        for name in dirs + files:
            path = Path(root, name)
            kind = "link" if path.is_symlink() else "dir" if path.is_dir() else "file"
            found[str(path.relative_to(directory))] = (
                hashlib.sha256(path.read_bytes()).hexdigest() if kind == "file" else kind)
    return found


def read_skill_file(paths: ThreadPaths, services: dict[str, Any], path: str) -> str:
    runtime = make_runtime(paths, **services)
    message = READ["read_file"].invoke(
        {"type": "tool_call", "name": "read_file", "args": {"path": path, "runtime": runtime}, "id": "t1"})
    return str(message.content)


def test_a_new_threads_view_is_owed_at_the_start_and_the_deferred_build_equals_the_eager_one(library):
    skills = run_skills(library)
    paths, services = project_run_skills(skills, new_thread(library, "lazy"))
    assert paths.owes_skills_view and not os.path.lexists(paths.skills_view)
    assert services["skills_root"] == str(paths.skills_view)  # the thread's own view, never the library's
    paths.ready_skills_view()
    eager = new_thread(library, "eager")
    project_skills(skills.skills, eager)
    assert tree(paths.skills_view) == tree(eager.skills_view) != {}
    marker = "sandbox-state/skills-view.json"
    assert (paths.root / marker).read_text() == (eager.root / marker).read_text()
    assert not paths.owes_skills_view


def test_the_owed_build_runs_once(library, monkeypatch):
    builds: list[Path] = []
    real = projection.project_skills
    monkeypatch.setattr(projection, "project_skills", lambda s, p: builds.append(p.root) or real(s, p))
    paths, _ = project_run_skills(run_skills(library), new_thread(library, "t"))
    for _ in range(3):
        paths.ready_skills_view()
    assert builds == [paths.root]


@pytest.mark.parametrize("planted", ["dir_link", "file_link", "dangling_link", "file", "stale_view"])
def test_anything_where_the_view_belongs_is_rebuilt_at_the_start_not_deferred(library, canary, planted):
    paths = new_thread(library, "t")
    before = tree(canary)
    if planted == "stale_view":
        project_skills(run_skills(library).skills, paths)
        library.set_enabled("local", "beta", False)
    elif planted == "file":
        paths.skills_view.write_text("planted")
    else:
        target = {"dir_link": canary, "file_link": canary / "canary.txt", "dangling_link": canary / "nothing"}
        os.symlink(target[planted], paths.skills_view)
    run_paths, _ = project_run_skills(run_skills(library), paths)
    assert run_paths.owed_skills_view is None  # rebuilt now: no consumer of this run can meet what was there
    view = paths.skills_view
    assert view.is_dir() and not view.is_symlink()
    assert sorted(p.name for p in view.iterdir()) == (["alpha"] if planted == "stale_view" else ["alpha", "beta"])
    assert tree(canary) == before


def test_a_link_planted_before_the_first_use_is_replaced_never_followed(library, canary):
    skills = run_skills(library)
    paths, services = project_run_skills(skills, new_thread(library, "t"))
    before = tree(canary)
    os.symlink(canary, paths.skills_view)  # the view's place taken between the start and the first use
    text = read_skill_file(paths, services, "/mnt/skills/alpha/scripts/run.py")
    assert "print('alpha')" in text and SECRET not in text
    assert paths.skills_view.is_dir() and not paths.skills_view.is_symlink()
    assert tree(canary) == before


def test_the_sandbox_mounts_the_owed_view_never_the_providers_skills_dir(library, canary):
    provider = LocalSandboxProvider(skills_dir=canary)  # a canonical folder the provider would fall back to
    paths, _ = project_run_skills(run_skills(library), new_thread(library, "t"))
    skills_mount = next(m for m in provider.mounts(paths) if str(m.virtual) == "/mnt/skills")
    assert skills_mount.host == paths.skills_view
    assert sorted(p.name for p in paths.skills_view.iterdir()) == ["alpha", "beta"]
    assert str(canary) not in provider.translate_in(paths, "ls /mnt/skills")


def test_a_failed_build_fails_every_use_and_nothing_falls_back(library, canary, monkeypatch):
    calls: list[int] = []

    def tampered(skills: Any, paths: ThreadPaths) -> Path:
        calls.append(1)
        raise Conflict("the thread's skills view could not be built: swapped")

    monkeypatch.setattr(projection, "project_skills", tampered)
    provider = LocalSandboxProvider(skills_dir=canary)
    paths, services = project_run_skills(run_skills(library), new_thread(library, "t"))
    for use in (paths.ready_skills_view, lambda: provider.mounts(paths), lambda: provider.translate_in(paths, "ls")):
        with pytest.raises(Conflict):
            use()
    with pytest.raises(Conflict):
        read_skill_file(paths, services, "/mnt/skills/alpha/SKILL.md")
    assert calls == [1] and not os.path.lexists(paths.skills_view)


def test_a_thread_without_skills_owes_nothing(library):
    paths = new_thread(library, "t")
    assert project_run_skills(None, paths) == (paths, {})
    assert not paths.owes_skills_view
    paths.ready_skills_view()  # a no-op
    assert not os.path.lexists(paths.skills_view)


def test_the_owed_build_takes_no_part_in_the_paths_equality(library):
    paths = new_thread(library, "t")
    owed = ThreadPaths(paths.root, owed_skills_view=OwedView((), paths.root))
    assert owed == paths and hash(owed) == hash(paths) and repr(owed) == repr(paths)


async def test_the_bash_tool_builds_the_owed_view_off_the_loop_before_the_command_runs(library, monkeypatch):
    built_on: list[str] = []
    real = projection.project_skills

    def recording(skills: Any, paths: ThreadPaths) -> Path:
        built_on.append(threading.current_thread().name)
        return real(skills, paths)

    monkeypatch.setattr(projection, "project_skills", recording)
    provider = LocalSandboxProvider(allow_host_bash=True)
    paths, services = await asyncio.to_thread(lambda: project_run_skills(run_skills(library), new_thread(library, "t")))
    runtime = make_runtime(paths, sandbox=provider, **services)
    bash = next(t for t in exec_tools(provider) if t.name == "bash")
    message = await bash.ainvoke({"type": "tool_call", "name": "bash", "id": "t1",
                                  "args": {"command": "ls /mnt/skills", "runtime": runtime}})
    assert "alpha" in str(message.content) and "beta" in str(message.content)
    assert len(built_on) == 1 and built_on[0] != threading.main_thread().name


def test_a_copied_run_context_shares_the_one_owed_build(library):
    paths, _ = project_run_skills(run_skills(library), new_thread(library, "t"))
    copied = copy.deepcopy(paths)
    assert copied.owed_skills_view is paths.owed_skills_view
    copied.ready_skills_view()
    assert not paths.owes_skills_view and paths.skills_view.is_dir()


def _answer_request(paths: ThreadPaths, tools: list[Any]) -> Any:
    from langchain.agents.middleware import ModelRequest
    from langchain_core.messages import HumanMessage

    context = type("Context", (), {"paths": paths})()
    runtime = type("Runtime", (), {"context": context})()
    return ModelRequest(model=None, messages=[HumanMessage("go")], tools=tools, state={}, runtime=runtime)  # type: ignore[arg-type]


@pytest.mark.parametrize("called", ["read_file", "python", "web_search", "none"])
async def test_the_model_call_builds_the_owed_view_when_the_answer_calls_a_tool_that_reads_it(library, called):
    """Before the tools node runs the answer's calls (so parallel ones never race to build it), and
    only for a tool marked as reading the view: the file and exec tools, not ``web_search``."""
    from langchain.agents.middleware import ModelResponse
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool

    from deerflow.agents.middlewares.skills_view import SkillsViewMiddleware
    from deerflow.config.schema import AppConfig
    from deerflow.tools.builtins import builtin_groups

    skills = await asyncio.to_thread(run_skills, library)  # the library is read off the loop
    groups = builtin_groups(AppConfig(), None, sandbox=LocalSandboxProvider(allow_host_bash=True), skills=skills)
    offered = {t.name: t for group in groups.values() for t in group}
    assert projection.reads_the_view(offered["read_file"]) and projection.reads_the_view(offered["python"])
    assert not projection.reads_the_view(offered["web_search"])
    assert not projection.reads_the_view(offered["ask_clarification"])

    @tool
    def web_search(query: str) -> str:
        """Stands for the unmarked web tool."""
        return query

    paths, _ = await asyncio.to_thread(lambda: project_run_skills(skills, new_thread(library, "t")))
    tools = [offered["read_file"], offered["python"], web_search]
    calls = [] if called == "none" else [{"name": called, "args": {}, "id": "c1", "type": "tool_call"}]
    answer = ModelResponse(result=[AIMessage(content="", tool_calls=calls)])

    async def handler(_request: Any) -> ModelResponse:
        assert paths.owes_skills_view  # the answer comes first
        return answer

    assert await SkillsViewMiddleware().awrap_model_call(_answer_request(paths, tools), handler) is answer
    reads = called in ("read_file", "python")
    assert paths.owes_skills_view is not reads
    assert os.path.isdir(paths.skills_view) is reads
