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
  read-only copy).  An installed skill speaks in every later run, so nothing
  is installed without the user's yes (:mod:`deerflow.runtime.consent`): the
  first call freezes a copy of the package (:mod:`deerflow.skills.pending`)
  and asks; the approved copy is installed when the answer comes back.
  Unattended runs and subagents are refused.

Both read the run's skills from ``runtime.context.services.run_skills``.
"""

from __future__ import annotations

from typing import Any

from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool

from deerflow.errors import ToolFailure, UserError
from deerflow.runtime.consent import ConsentGrants, PendingChange, ask, refusal
from deerflow.runtime.context import RunContext
from deerflow.runtime.services import services_of
from deerflow.sandbox.files.virtual_paths import OUTPUTS, WORKSPACE
from deerflow.skills.installer import SkillScanBlocked
from deerflow.skills.pending import PendingPackage, discard, freeze_package, frozen_package
from deerflow.skills.prompt import describe_skills_text
from deerflow.skills.run import INSTALL_TOOL, RunSkills, run_skills_of
from deerflow.tools.builtins.file_tools import thread_fs
from deerflow.tools.schema import as_tool

SKILLS_GROUP = "skills"


def _run_skills(runtime: ToolRuntime[RunContext]) -> RunSkills:
    skills = run_skills_of(runtime.context)
    if skills is None:
        raise ToolFailure("skills are not available in this session", code="skills_unavailable")
    return skills


@as_tool("describe_skill", parse_docstring=True)
def describe_skill(query: str, runtime: ToolRuntime[RunContext]) -> str:
    """Look up skills from the skill index: what each is for, which tools it uses, where its instructions are.

    Args:
        query: Keywords describing the task (e.g. "research report"), or "select:name1,name2" for skills by name.
    """
    skills = _run_skills(runtime)
    return describe_skills_text(skills.search(query), query=query)


@as_tool(INSTALL_TOOL, parse_docstring=True, response_format="content_and_artifact")
def install_skill(path: str, runtime: ToolRuntime[RunContext]) -> tuple[str, dict[str, Any]]:
    """Install a skill you wrote as one of the user's custom skills. SkillScan checks it first; a critical finding refuses it. The user is asked to approve the install (refused in unattended runs); once approved it is enabled from the user's next message on.

    Args:
        path: Directory holding the skill's SKILL.md and files, under /mnt/user-data/workspace or /mnt/user-data/outputs.
    """
    skills = _run_skills(runtime)
    if skills.library is None:
        raise ToolFailure("skills cannot be installed in this session", code="skills_unavailable")
    refused = refusal(INSTALL_TOOL, runtime.context, hint=f"the user can install it with `deerflow skills "
                      f"install` or `%deerflow skills install` from {path}")
    if refused is not None:
        raise refused
    grants = _grants(runtime)
    granted = grants.take(runtime.tool_call_id, INSTALL_TOOL) if grants else None
    if granted is not None:
        return _install_approved(runtime, skills, granted)
    vfs = thread_fs(runtime)
    located = vfs.locate(path, write=False)
    if str(located.mount.virtual) not in {str(WORKSPACE), str(OUTPUTS)}:
        raise ToolFailure(f"{located.virtual} is not a directory under {WORKSPACE} or {OUTPUTS}; write the "
                          "skill's SKILL.md and files into such a directory first.", code="bad_path")
    try:  # opened part by part below the mount: a link the sandbox planted on the way is refused
        with vfs.open_dir(path)[1] as source:
            frozen = freeze_package(source, runtime.context.paths.root, limits=skills.library.limits)
    except ToolFailure as exc:
        raise ToolFailure(f"{exc.message} Write the skill's SKILL.md and files into a directory under "
                          f"{WORKSPACE} or {OUTPUTS}.", code="bad_path") from None
    except SkillScanBlocked as exc:
        _notify(runtime, f"SkillScan blocked skill {exc.name!r}", {"installed": False, **exc.report.to_dict()})
        raise ToolFailure(_mask(vfs.mask(str(exc)), runtime) + "\nRemove what SkillScan flagged, then install "
                          "again.", code="skill_blocked") from None
    except UserError as exc:
        raise ToolFailure(_mask(vfs.mask(str(exc)), runtime), code="invalid_skill") from None
    return ask(_install_change(path, frozen), tool_call_id=runtime.tool_call_id or "")


def _mask(text: str, runtime: ToolRuntime[RunContext]) -> str:
    """Hide the thread's host folder (where frozen copies live) from the model."""
    return text.replace(str(runtime.context.paths.root), "<thread>")


def _grants(runtime: ToolRuntime[RunContext]) -> ConsentGrants | None:
    grants = services_of(runtime.context).consent_grants
    return grants if isinstance(grants, ConsentGrants) else None


def _install_change(path: str, frozen: PendingPackage) -> PendingChange:
    """What the user is asked: the frozen copy's name, description, files and scan findings."""
    skill, report = frozen.skill, frozen.report
    files = [f for f in skill.files()][:20]
    findings = "".join(f"\n  {f}" for f in report.warnings) or " none"
    details = (f"The agent wants to install the custom skill {skill.name!r} from {path}. Once installed, its "
               "name and description are shown to the agent in every later run of yours, and its "
               "instructions are followed whenever it is used.\n"
               f"Description: {skill.description}\n"
               f"Allowed tools: {', '.join(skill.allowed_tools) if skill.allowed_tools is not None else 'any'}\n"
               f"Files: {', '.join(files)}\n"
               f"SkillScan warnings:{findings}\n"
               "What is installed is the copy taken now; later edits in the workspace are not included.")
    return PendingChange(tool=INSTALL_TOOL, args={"path": path},
                         question=f"Install the skill {skill.name!r} as one of your custom skills?",
                         details=details, data={"snapshot": frozen.snapshot_id, "name": skill.name})


def _install_approved(runtime: ToolRuntime[RunContext], skills: RunSkills,
                      granted: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Install the frozen copy the user approved (never the workspace as it is now)."""
    data = granted.get("data") or {}
    root = runtime.context.paths.root
    snapshot, name = str(data.get("snapshot", "")), str(data.get("name", ""))
    source = frozen_package(root, snapshot, name)
    if source is None or skills.library is None:
        raise ToolFailure("the approved skill copy is gone, so nothing was installed; install it again to ask "
                          "the user anew", code="approval_expired")
    try:
        result = skills.library.install(skills.user_id, source)
    except SkillScanBlocked as exc:
        _notify(runtime, f"SkillScan blocked skill {exc.name!r}", {"installed": False, **exc.report.to_dict()})
        raise ToolFailure(_mask(str(exc), runtime), code="skill_blocked") from None
    except UserError as exc:
        raise ToolFailure(_mask(str(exc), runtime), code="invalid_skill") from None
    finally:
        discard(root, snapshot)
    _notify(runtime, f"skill {result.skill.name!r} installed", {"installed": True, **result.report.to_dict()})
    warnings = "".join(f"\n  {f}" for f in result.report.warnings)
    text = (f"The user approved. Installed the custom skill {result.skill.name!r} (SkillScan: "
            f"{len(result.report.warnings)} warning(s)){warnings}. It is enabled from the user's next "
            f"message on, at /mnt/skills/{result.skill.name}/SKILL.md.")
    return text, {"status": "ok", "approved": True, **result.to_dict()}


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
