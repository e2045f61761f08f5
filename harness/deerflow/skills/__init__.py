"""Skills: packages of instructions (``SKILL.md``) the agent discovers, activates and follows.

Where each concern lives:

* :mod:`.manifest` — the ``SKILL.md`` format and its parser;
* :mod:`.catalog` — public and custom skills on disk;
* :mod:`.state` — per-user enabled state (``extensions_config.json`` ``skills``);
* :mod:`.library` — the host service tying them together;
* :mod:`.archive`, :mod:`.installer`, :mod:`.scan` — safe installs and SkillScan;
* :mod:`.projection` — a thread's read-only view of its enabled skills;
* :mod:`.activation`, :mod:`.prompt`, :mod:`.run` — what a run sees and may use.

The middlewares (``agents/middlewares/skill_activation.py``, ``skill_policy.py``)
and the tools (``tools/builtins/skill_tools.py``) build on these.
"""

from typing import TYPE_CHECKING

from deerflow._lazy import lazy_exports

if TYPE_CHECKING:
    from deerflow.skills.archive import PackageLimits, SkillPackageError
    from deerflow.skills.catalog import Skill, SkillInfo, SkillProblem
    from deerflow.skills.installer import InstallResult, SkillScanBlocked
    from deerflow.skills.library import SkillLibrary, SkillListing
    from deerflow.skills.manifest import SkillFormatError, SkillManifest, parse_skill_md
    from deerflow.skills.run import RunSkills
    from deerflow.skills.scan import Finding, ScanReport, scan_package

# Imported on first use: importing the package (the CLI does) stays cheap.
_EXPORTS = {
    "PackageLimits": "archive",
    "SkillPackageError": "archive",
    "Skill": "catalog",
    "SkillInfo": "catalog",
    "SkillProblem": "catalog",
    "InstallResult": "installer",
    "SkillScanBlocked": "installer",
    "SkillLibrary": "library",
    "SkillListing": "library",
    "SkillFormatError": "manifest",
    "SkillManifest": "manifest",
    "parse_skill_md": "manifest",
    "RunSkills": "run",
    "Finding": "scan",
    "ScanReport": "scan",
    "scan_package": "scan",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)

__all__ = [
    "Finding",
    "InstallResult",
    "PackageLimits",
    "RunSkills",
    "ScanReport",
    "Skill",
    "SkillFormatError",
    "SkillInfo",
    "SkillLibrary",
    "SkillListing",
    "SkillManifest",
    "SkillPackageError",
    "SkillProblem",
    "SkillScanBlocked",
    "parse_skill_md",
    "scan_package",
]
