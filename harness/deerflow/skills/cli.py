"""``deerflow skills``: list, show, install, enable and disable skills from a terminal.

    deerflow skills list [--json]
    deerflow skills show NAME
    deerflow skills install PATH [--replace] [--json]
    deerflow skills enable NAME
    deerflow skills disable NAME

Kept out of :mod:`deerflow.cli` so that module only wires it in.  Errors are
the harness's user errors (an unknown skill, an unsafe package, SkillScan
blocking) and are printed by the main CLI as one message, exit status 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:  # imported where used: `deerflow --help` stays cheap
    from deerflow.skills.catalog import SkillInfo
    from deerflow.skills.installer import InstallResult


def add_parser(sub: Any) -> None:
    """Add the ``skills`` command to the main CLI's subparsers."""
    skills = sub.add_parser("skills", help="list, show, install, enable or disable skills")
    actions = skills.add_subparsers(dest="skills_command", required=True)
    listing = actions.add_parser("list", help="every skill with its state")
    listing.add_argument("--json", action="store_true", help="print JSON")
    show = actions.add_parser("show", help="a skill's details and instructions")
    show.add_argument("name")
    install = actions.add_parser("install", help="install a .skill/.zip archive or a directory")
    install.add_argument("path")
    install.add_argument("--replace", action="store_true", help="overwrite an installed custom skill")
    install.add_argument("--json", action="store_true", help="print the result (and SkillScan findings) as JSON")
    for verb in ("enable", "disable"):
        action = actions.add_parser(verb, help=f"{verb} a skill for your next runs")
        action.add_argument("name")


def run(client: Any, args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Execute ``deerflow skills ...``; returns the exit status."""
    stream: TextIO = out or sys.stdout
    command = args.skills_command
    if command == "list":
        return _list(client, as_json=args.json, out=stream)
    if command == "show":
        return _show(client, args.name, stream)
    if command == "install":
        return _install(client, args.path, replace=args.replace, as_json=args.json, out=stream)
    info = client.enable_skill(args.name) if command == "enable" else client.disable_skill(args.name)
    stream.write(f"{info.name}: {'enabled' if info.enabled else 'disabled'} for your next runs\n")
    return 0


def skill_line(info: SkillInfo) -> str:
    """``✓ name  [source]  description`` (✗ when disabled), description cut to fit a line."""
    mark = "✓" if info.enabled else "✗"
    text = info.description if len(info.description) <= 90 else info.description[:89] + "…"
    return f"{mark} {info.name:<22} [{info.source}]  {text}"


def _list(client: Any, *, as_json: bool, out: TextIO) -> int:
    listing = client.skill_listing()
    if as_json:
        out.write(json.dumps({"skills": [s.to_dict() for s in listing.infos()],
                              "problems": [p.to_dict() for p in listing.problems]}, indent=2) + "\n")
        return 0
    if not listing.skills:
        out.write("no skills found\n")
    for info in listing.infos():
        out.write(skill_line(info) + "\n")
    for problem in listing.problems:
        out.write(f"! {problem.directory} [{problem.source}] not loaded: {problem.error}\n")
    return 0


def _show(client: Any, name: str, out: TextIO) -> int:
    skill = client.skill(name)
    info = skill.info()
    out.write(skill_line(info) + "\n")
    tools = ", ".join(info.allowed_tools) if info.allowed_tools is not None else "any (no allowed-tools)"
    out.write(f"  allowed tools: {tools}\n")
    for label, value in (("version", info.version), ("license", info.license), ("author", info.author),
                         ("compatibility", info.compatibility)):
        if value:
            out.write(f"  {label}: {value}\n")
    if info.required_secrets:
        out.write(f"  required secrets: {', '.join(info.required_secrets)}\n")
    out.write(f"  files: {', '.join(skill.files())}\n\n{skill.body}")
    return 0


def _install(client: Any, path: str, *, replace: bool, as_json: bool, out: TextIO) -> int:
    from deerflow.skills.installer import SkillScanBlocked

    try:
        result: InstallResult = client.install_skill(path, replace=replace)
    except SkillScanBlocked as exc:
        if not as_json:
            raise
        out.write(json.dumps({"installed": False, "skill": exc.name, "scan": exc.report.to_dict()}, indent=2) + "\n")
        return 1
    if as_json:
        out.write(json.dumps({"installed": True, **result.to_dict()}, indent=2) + "\n")
        return 0
    verb = "replaced" if result.replaced else "installed"
    out.write(f"{verb} {result.skill.name} (custom, enabled) — use it with /{result.skill.name}\n")
    out.write(f"SkillScan: {len(result.report.findings)} finding(s) in {result.report.files_scanned} file(s)\n")
    for finding in result.report.findings:
        out.write(f"  {finding}\n")
    return 0
