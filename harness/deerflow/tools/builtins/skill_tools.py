"""``describe_skill`` and ``install_skill``: the model's side of skills.

* ``describe_skill(query)`` — deferred discovery.  The system prompt lists
  only skill names; this tool answers ``select:a,b`` (those skills) or
  keywords (best matches by name, then description) with each skill's
  description, allowed tools and files.  Offered only when
  ``skills.deferred_discovery`` is on.
* ``install_skill(path)`` — the skill creator's last step: a skill the agent
  wrote in its workspace (a directory with a ``SKILL.md``) goes through the
  same installer as a user's upload — staged, parsed, scanned by SkillScan,
  renamed into the user's custom skills and enabled.  Findings are returned to
  the model and streamed to the user as a ``notice`` (``skill_scan``).  It is
  offered only when an enabled skill lists it in ``allowed-tools``; the agent
  has no other way to write under the custom skills (``/mnt/skills`` is a
  read-only copy).

Both read the run's skills from ``runtime.context.services["run_skills"]``.
"""

from __future__ import annotations

from typing import Any

from langchain.tools import ToolRuntime, tool
from langchain_core.tools import BaseTool

from deerflow.errors import UserError
from deerflow.runtime.context import RunContext
from deerflow.sandbox.virtual_paths import OUTPUTS, WORKSPACE
from deerflow.skills.installer import SkillScanBlocked
from deerflow.skills.prompt import describe_skills_text
from deerflow.skills.run import INSTALL_TOOL, RunSkills, run_skills_of
from deerflow.tools.builtins.file_tools import thread_fs
from deerflow.tools.errors import ToolFailure

SKILLS_GROUP = "skills"


def _run_skills(runtime: ToolRuntime[RunContext]) -> RunSkills:
    skills = run_skills_of(runtime.context)
    if skills is None:
        raise ToolFailure("skills are not available in this session", code="skills_unavailable")
    return skills


@tool("describe_skill", parse_docstring=True)
def describe_skill(query: str, runtime: ToolRuntime[RunContext]) -> str:
    """Look up skills from the skill index: what each is for, which tools it uses, where its instructions are.

    Args:
        query: Keywords describing the task (e.g. "research report"), or "select:name1,name2" for skills by name.
    """
    skills = _run_skills(runtime)
    return describe_skills_text(skills.search(query), query=query)


@tool(INSTALL_TOOL, parse_docstring=True, response_format="content_and_artifact")
def install_skill(path: str, runtime: ToolRuntime[RunContext]) -> tuple[str, dict[str, Any]]:
    """Install a skill you wrote as one of the user's custom skills. SkillScan checks it first; a critical finding refuses it. It is enabled from the user's next message on.

    Args:
        path: Directory holding the skill's SKILL.md and files, under /mnt/user-data/workspace or /mnt/user-data/outputs.
    """
    skills = _run_skills(runtime)
    if skills.library is None:
        raise ToolFailure("skills cannot be installed in this session", code="skills_unavailable")
    vfs = thread_fs(runtime)
    located = vfs.locate(path, write=False)
    if str(located.mount.virtual) not in {str(WORKSPACE), str(OUTPUTS)} or not located.host.is_dir():
        raise ToolFailure(f"{located.virtual} is not a directory under {WORKSPACE} or {OUTPUTS}; write the "
                          "skill's SKILL.md and files into such a directory first.", code="bad_path")
    try:
        result = skills.library.install(skills.user_id, located.host)
    except SkillScanBlocked as exc:
        _notify(runtime, f"SkillScan blocked skill {exc.name!r}", {"installed": False, **exc.report.to_dict()})
        raise ToolFailure(vfs.mask(str(exc)) + "\nRemove what SkillScan flagged, then install again.",
                          code="skill_blocked") from None
    except UserError as exc:
        raise ToolFailure(vfs.mask(str(exc)), code="invalid_skill") from None
    _notify(runtime, f"skill {result.skill.name!r} installed", {"installed": True, **result.report.to_dict()})
    warnings = "".join(f"\n  {f}" for f in result.report.warnings)
    text = (f"Installed the custom skill {result.skill.name!r} (SkillScan: "
            f"{len(result.report.warnings)} warning(s)){warnings}. It is enabled from the user's next "
            f"message on, at /mnt/skills/{result.skill.name}/SKILL.md.")
    return text, {"status": "ok", **result.to_dict()}


def _notify(runtime: ToolRuntime[RunContext], text: str, data: dict[str, Any]) -> None:
    """Stream the scan result to the user as a ``notice`` event."""
    runtime.stream_writer({"type": "notice", "kind": "skill_scan", "text": text, "data": data})


def skill_tools(skills: RunSkills | None) -> list[BaseTool]:
    """The skill tools a run is offered (see the module docstring for when)."""
    if skills is None or not skills.skills:
        return []
    tools: list[BaseTool] = []
    if skills.deferred:
        tools.append(describe_skill)
    if skills.offers_install():
        tools.append(install_skill)
    return tools
