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

from deerflow.skills.archive import PackageLimits, SkillPackageError
from deerflow.skills.catalog import Skill, SkillInfo, SkillProblem
from deerflow.skills.installer import InstallResult, SkillScanBlocked
from deerflow.skills.library import SkillLibrary, SkillListing
from deerflow.skills.manifest import SkillFormatError, SkillManifest, parse_skill_md
from deerflow.skills.run import RunSkills
from deerflow.skills.scan import Finding, ScanReport, scan_package

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
