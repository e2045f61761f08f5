"""The ``SKILL.md`` format: YAML frontmatter, then the instructions.

A skill is a directory whose ``SKILL.md`` starts with frontmatter between two
``---`` lines::

    ---
    name: data-analysis                 # required: hyphen-case, at most 64 characters
    description: Analyse uploaded data  # required: at most 1024 characters, no '<' or '>'
    license: MIT
    allowed-tools: [read_file, python]  # or "read_file, python"; shell globs allowed
    required-secrets: [SERPER_API_KEY]  # environment variables the skill expects
    metadata: {category: analysis}      # free-form string values
    compatibility: needs pandas
    version: "1.0"
    author: Jane Doe
    ---
    Instructions for the model...

Every other key is rejected, so a typo never silently drops a setting.  The
description is shown to the model for every enabled skill, which is why it may
not carry angle brackets (it cannot open or close prompt markup); the prompt
escapes it anyway.  The body is what the model follows once the skill is
active; other files of the package (scripts, references, templates) sit
beside it and are read under ``/mnt/skills/<name>/``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from deerflow.errors import UserError

MANIFEST = "SKILL.md"
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_MANIFEST_BYTES = 256 * 1024
NAME_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_TOOL_RE = re.compile(r"^[A-Za-z0-9_.*?\[\]-]{1,128}$")
_SECRET_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")

RESERVED_NAMES = frozenset({"bootstrap", "help", "new", "clear", "compact", "install"})
"""Names a skill may not take: slash commands the product keeps for itself
(``/bootstrap`` creates a custom agent) and API path words."""


class SkillFormatError(UserError):
    """A ``SKILL.md`` that does not follow the format; the message names the problem."""


class SkillManifest(BaseModel):
    """The validated frontmatter of a skill."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str
    license: str | None = None
    allowed_tools: tuple[str, ...] | None = Field(default=None, alias="allowed-tools")
    required_secrets: tuple[str, ...] = Field(default=(), alias="required-secrets")
    metadata: dict[str, str] = Field(default_factory=dict)
    compatibility: str | None = Field(default=None, max_length=500)
    version: str | None = None
    author: str | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_name(value)

    @field_validator("description")
    @classmethod
    def _description(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("must not be empty: say what the skill is for and when to use it")
        if len(value) > MAX_DESCRIPTION:
            raise ValueError(f"is {len(value)} characters; the limit is {MAX_DESCRIPTION}")
        if "<" in value or ">" in value:
            raise ValueError("must not contain '<' or '>' (it is shown inside the system prompt)")
        return value

    @field_validator("allowed_tools", mode="before")
    @classmethod
    def _tools(cls, value: Any) -> Any:
        items = _string_list(value, what="tool names")
        bad = [t for t in items if not _TOOL_RE.match(t)]
        if bad:
            raise ValueError(f"{bad[0]!r} is not a tool name (letters, digits, '_', '-', '.', globs)")
        return tuple(items)

    @field_validator("required_secrets", mode="before")
    @classmethod
    def _secrets(cls, value: Any) -> Any:
        items = _string_list(value, what="environment variable names")
        bad = [s for s in items if not _SECRET_RE.match(s)]
        if bad:
            raise ValueError(f"{bad[0]!r} is not an environment variable name")
        return tuple(items)

    @field_validator("metadata", mode="before")
    @classmethod
    def _metadata(cls, value: Any) -> Any:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise ValueError("must be a mapping of keys to text values")
        bad = [k for k, v in value.items() if not _is_scalar(v)]
        if bad:
            raise ValueError(f"must map keys to text values ({bad[0]!r} is not text)")
        return {str(k): str(v) for k, v in value.items()}

    @field_validator("version", mode="before")
    @classmethod
    def _version(cls, value: Any) -> Any:
        if value is not None and not _is_scalar(value):
            raise ValueError("must be text such as \"1.0\"")
        return None if value is None else str(value)

    def to_frontmatter(self) -> dict[str, Any]:
        """The manifest as frontmatter keys (aliases, unset keys left out)."""
        return self.model_dump(by_alias=True, exclude_none=True, exclude_defaults=True) | {
            "name": self.name, "description": self.description}


@dataclass(frozen=True)
class SkillDocument:
    """A parsed ``SKILL.md``: the manifest and the instructions."""

    manifest: SkillManifest
    body: str


def check_name(value: Any) -> str:
    """``value`` if it is a valid skill name; ValueError saying why not."""
    if not isinstance(value, str):
        raise ValueError("must be text")
    if len(value) > MAX_NAME:
        raise ValueError(f"is {len(value)} characters; the limit is {MAX_NAME}")
    if not NAME_RE.match(value):
        raise ValueError(f"{value!r} must be hyphen-case: lowercase letters and digits in words "
                         "joined by single hyphens (e.g. data-analysis)")
    if value in RESERVED_NAMES:
        raise ValueError(f"{value!r} is reserved; choose another name")
    return value


def parse_skill_md(text: str, *, where: str = MANIFEST) -> SkillDocument:
    """Parse and validate a ``SKILL.md``.

    Args:
        text: The file's content.
        where: How to name the file in errors (``skills/public/x/SKILL.md``).

    Raises:
        SkillFormatError: with one message naming the problem and the key.
    """
    if len(text.encode("utf-8")) > MAX_MANIFEST_BYTES:
        raise SkillFormatError(f"{where}: the file is larger than {MAX_MANIFEST_BYTES // 1024} KB")
    head, body = _split(text, where)
    try:
        data = yaml.safe_load(head)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 2}" if mark else ""
        raise SkillFormatError(f"{where}: the frontmatter is not valid YAML{at}") from None
    if not isinstance(data, dict):
        raise SkillFormatError(f"{where}: the frontmatter must be a mapping of keys (name, description...)")
    try:
        manifest = SkillManifest.model_validate(data)
    except ValidationError as exc:
        raise SkillFormatError(f"{where}: {_explain(exc)}") from None
    if not body.strip():
        raise SkillFormatError(f"{where}: there are no instructions after the frontmatter")
    return SkillDocument(manifest, body.strip() + "\n")


def render_skill_md(manifest: SkillManifest, body: str) -> str:
    """A ``SKILL.md`` text for ``manifest`` and ``body`` (what the skill creator writes)."""
    head = yaml.safe_dump(manifest.to_frontmatter(), sort_keys=False, allow_unicode=True)
    return f"---\n{head}---\n\n{body.strip()}\n"


def _split(text: str, where: str) -> tuple[str, str]:
    text = text.removeprefix("\ufeff")
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise SkillFormatError(f"{where}: must start with YAML frontmatter between '---' lines")
    for i, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            return "".join(lines[1:i]), "".join(lines[i + 1:])
    raise SkillFormatError(f"{where}: the frontmatter is not closed by a '---' line")


_ALLOWED_KEYS = ("name", "description", "license", "allowed-tools", "required-secrets", "metadata",
                 "compatibility", "version", "author")


def _explain(exc: ValidationError) -> str:
    first = exc.errors()[0]
    key = ".".join(str(p) for p in first["loc"]) or "frontmatter"
    if first["type"] == "extra_forbidden":
        return f"unknown frontmatter key {key!r} (allowed: {', '.join(_ALLOWED_KEYS)})"
    if first["type"] == "missing":
        return f"the frontmatter needs {key!r}"
    message = first["msg"].removeprefix("Value error, ")
    if first["type"] in {"string_type", "str_type"}:
        message = "must be text"
    return f"{key!r} {message}"


def _string_list(value: Any, *, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [part for part in re.split(r"[\s,]+", value) if part]
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return [v.strip() for v in value if v.strip()]
    raise ValueError(f"must be a list of {what} (or one comma-separated string)")


def _is_scalar(value: Any) -> bool:
    return isinstance(value, str | int | float) and not isinstance(value, bool)
